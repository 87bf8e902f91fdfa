#include "compiler/attention.h"

#include <fmt/format.h>

#include <cmath>

#include "compiler/gemm.h"

namespace tpu::compiler {
namespace {

// I-BERT's i-exp polynomial, exp(r) ~ a (r + b)^2 + c on (-ln 2, 0] (Kim et al. 2021).
constexpr double kExpA = 0.3585, kExpB = 1.353, kExpC = 0.344;
constexpr int kSoftmaxValueBits = 30;  // SMAX's v is the softmax in units of 2^-30

}  // namespace

SoftmaxConstants softmax_constants(double in_scale, const QuantParams& out) {
  if (!(in_scale > 0.0) || !std::isfinite(in_scale))
    throw CompileError(fmt::format("softmax: input scale {} is not positive and finite", in_scale));
  // The expressions in the order of tools/int8_reference.py's softmax_constants.
  const double limit = static_cast<double>((std::int64_t{1} << 31) - 1);
  for (int sh = 15; sh >= 0; --sh) {
    const double s = in_scale / static_cast<double>(1u << sh);
    if (!(kExpC / (kExpA * s * s) < limit)) continue;
    const double k0 = std::floor(std::log(2.0) / s), k1 = std::floor(kExpB / s);
    const double k2 = std::floor(kExpC / (kExpA * s * s));
    if (k0 > limit || k1 > limit)
      throw CompileError(fmt::format("softmax: input scale {} is too small for SMAX's constants", in_scale));
    SoftmaxConstants c;
    c.shift = static_cast<std::uint32_t>(sh);
    c.k0 = static_cast<std::int32_t>(k0);
    c.k1 = static_cast<std::int32_t>(k1);
    c.k2 = static_cast<std::int32_t>(k2);
    c.requant = requant_from_multiplier(std::ldexp(1.0, -kSoftmaxValueBits) / out.scale, out.zero_point);
    return c;
  }
  throw CompileError(fmt::format("softmax: input scale {} is too large for SMAX's polynomial", in_scale));
}

model::Requant matmul_requant(const QuantParams& a, const QuantParams& b, double alpha, const QuantParams& out) {
  return requant_from_multiplier(alpha * a.scale * b.scale / out.scale, out.zero_point);
}

}  // namespace tpu::compiler
