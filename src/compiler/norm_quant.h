// The registers of the transformer layers on the activation unit
// (docs/quantization.md, "Integer softmax, LayerNorm and GELU" and
// "Transformer layers"): NGEO's pre-shift, NCON's constants and SETQ's
// requantization of a LayerNorm (LNRM) or GELU layer, chosen from the
// input's and output's quantization exactly as tools/int8_reference.py's
// layernorm_constants and gelu_constants choose them. NGEO's token geometry
// (groups, stride) is the lowering's (lower_norm.cpp).
#pragma once

#include <cstdint>

#include "compiler/quant.h"
#include "isa/instruction.h"
#include "model/activation.h"

namespace tpu::compiler {

struct NormSetting {
  isa::NormRegs regs;      // shift, k0, k1, k2 (groups and stride at their reset values)
  model::Requant requant;  // SETQ's (M, S, Z)
};

// LNRM over tokens of `d` values at `in`'s scale: k0 = round_half_even(d * eps
// * 256 / s^2) (eps in the units of V, the sum of (16 (x - mean))^2), m =
// sqrt(d) * 2^-16 / s_o. Throws CompileError when k0 does not fit int32 or m
// is not a requantization multiplier.
NormSetting layernorm_setting(const QuantParams& in, std::uint64_t d, double eps, const QuantParams& out);

// GELU: sh the largest in 0..15 with 1 / (|a| S'^2) < 2^30 (S = s / 2^sh,
// S' = S / sqrt 2, I-BERT's a = -0.2888, b = -1.769), k0 = floor(-b / S'),
// k1 = floor(1 / (|a| S'^2)), k2 = z_in, m = S |a| S'^2 / (2 s_o). Throws
// CompileError when no shift fits (an input scale below about 8.3e-5).
NormSetting gelu_setting(const QuantParams& in, const QuantParams& out);

}  // namespace tpu::compiler
