// The attention layers' quantization (docs/quantization.md, "Softmax and
// attention"): the registers an SMAX of a softmax layer takes, chosen by the
// compiler from the input scale (NGEO's shift, NCON's constants, SETQ's
// requantization), and the softmax's fixed output quantization.
#pragma once

#include <cstdint>

#include "compiler/quant.h"
#include "model/activation.h"

namespace tpu::compiler {

// A softmax's output: round(256 p) - 128 (docs/quantization.md).
inline constexpr QuantParams kSoftmaxOutput{1.0 / 256.0, -128};

// SMAX's constants for int8 logits at `in_scale` (docs/quantization.md,
// "Integer softmax, LayerNorm and GELU"): sh the largest in 0..15 with
// c / (a S^2) < 2^31 - 1 at S = in_scale / 2^sh, k0 = floor(ln 2 / S),
// k1 = floor(b / S), k2 = floor(c / (a S^2)) with I-BERT's a, b, c, and (M, S)
// from m = 2^-30 / s_o. Throws CompileError when no shift fits.
struct SoftmaxConstants {
  std::uint32_t shift = 0;
  std::int32_t k0 = 0, k1 = 0, k2 = 0;
  model::Requant requant;
};
SoftmaxConstants softmax_constants(double in_scale, const QuantParams& out = kSoftmaxOutput);

// A matmul's requantization (docs/quantization.md, "MatMul of two
// activations"): the accumulators hold sum_k (a - z_a) b at s_a * s_b, so
// m = alpha * s_a * s_b / s_o (in double, in that order), Z = z_o.
model::Requant matmul_requant(const QuantParams& a, const QuantParams& b, double alpha, const QuantParams& out);

}  // namespace tpu::compiler
