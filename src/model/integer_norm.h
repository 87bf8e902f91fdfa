// integer_norm: the lane and token arithmetic of SMAX, LNRM and GELU
// (docs/quantization.md, "Integer softmax, LayerNorm and GELU"), I-BERT's
// i-exp, i-sqrt and i-erf (Kim et al. 2021) on int8 inputs. The activation
// unit calls these per cycle as it reads a token's rows; the functions hold no
// state, so the unit's passes decide what is kept between them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "isa/instruction.h"
#include "model/activation.h"

namespace tpu::model {

// An SMAX lane's exponential of p = (x - max) << sh (p > 0 taken as 0), in [0, 2^39 - 1].
std::int64_t norm_exp(std::int64_t p, const isa::NormRegs& r);
// SMAX's per-token reciprocal 2^62 // sum (0 for sum 0).
std::int64_t softmax_recip(std::int64_t sum);
// SMAX's v = min((e * recip) >> 32, 2^31 - 1), in [0, 2^30] when e <= sum.
std::int32_t softmax_value(std::int64_t e, std::int64_t recip);

// LNRM's mean with 4 fractional bits: round(16 * sum / lanes), ties up.
std::int64_t layernorm_mean(std::int64_t sum, std::uint64_t lanes);
// LNRM's y = (x << 4) - mean.
inline std::int64_t layernorm_dev(std::int8_t x, std::int64_t mean) {
  return std::int64_t{x} * 16 - mean;
}
// floor(sqrt(n)) for n >= 0 by I-BERT's integer Newton iteration.
std::int64_t isqrt_newton(std::int64_t n);
// LNRM's per-token reciprocal 2^32 // max(isqrt(max(var + k0, 0)), 1).
std::int64_t layernorm_recip(std::int64_t var, std::int32_t k0);
// LNRM's v = (y * recip) >> 16.
std::int32_t layernorm_value(std::int64_t dev, std::int64_t recip);

// GELU's v of one lane (before the requantization), |v| < 2^63.
std::int64_t gelu_value(std::int8_t x, const isa::NormRegs& r);
// q(v) for a 64-bit v: sat8(((v * M + r) >> S) + Z), the product exact.
std::int8_t requantize_wide(std::int64_t v, const Requant& q);

}  // namespace tpu::model
