// The LNRM and GELU registers (norm_quant.h), each expression evaluated in
// double in the order tools/int8_reference.py evaluates it, so that both
// choose the same integers.
#include "compiler/norm_quant.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "compiler/gemm.h"

namespace tpu::compiler {
namespace {

constexpr double kIerfA = -0.2888, kIerfB = -1.769;  // I-BERT's i-erf (Kim et al. 2021, Algorithm 3)
constexpr int kLnrmYBits = 4, kLnrmVBits = 16;       // LNRM's fractional bits (docs/quantization.md)
constexpr double kInt32Max = 2147483647.0;

}  // namespace

NormSetting layernorm_setting(const QuantParams& in, std::uint64_t d, double eps, const QuantParams& out) {
  if (d == 0) throw CompileError("a LayerNorm over 0 values");
  if (!(eps >= 0.0) || !std::isfinite(eps)) throw CompileError(fmt::format("LayerNorm epsilon {} is not >= 0", eps));
  const double k0 = std::nearbyint(static_cast<double>(d) * eps * static_cast<double>(1 << (2 * kLnrmYBits)) /
                                   (in.scale * in.scale));
  if (k0 > kInt32Max)
    throw CompileError(fmt::format("LayerNorm epsilon {} at input scale {} does not fit NCON's k0", eps, in.scale));
  NormSetting s;
  s.regs.k0 = static_cast<std::int32_t>(k0);
  s.requant = requant_from_multiplier(std::sqrt(static_cast<double>(d)) * std::ldexp(1.0, -kLnrmVBits) / out.scale,
                                      out.zero_point);
  return s;
}

NormSetting gelu_setting(const QuantParams& in, const QuantParams& out) {
  int sh = 15;
  for (; sh >= 0; --sh) {
    const double s = in.scale / static_cast<double>(1 << sh);
    if (2.0 / (-kIerfA * s * s) < static_cast<double>(1 << 30)) break;
  }
  if (sh < 0)  // 1 / (|a| S'^2) grows as the scale shrinks: no shift fits a scale below about 8.3e-5
    throw CompileError(fmt::format("input scale {} is too small for the integer GELU (its constant k1 needs "
                                   "30 bits at pre-shift 0)", in.scale));
  const double s = in.scale / static_cast<double>(1 << sh);
  const double s_erf = s / std::sqrt(2.0);
  const double k0 = std::floor(-kIerfB / s_erf);
  const double k1 = std::floor(1.0 / (-kIerfA * s_erf * s_erf));
  if (k0 > kInt32Max || k1 > kInt32Max)
    throw CompileError(fmt::format("input scale {} is too small for the integer GELU's constants", in.scale));
  NormSetting g;
  g.regs.shift = static_cast<std::uint32_t>(sh);
  g.regs.k0 = static_cast<std::int32_t>(k0);
  g.regs.k1 = static_cast<std::int32_t>(k1);
  g.regs.k2 = in.zero_point;
  g.requant = requant_from_multiplier(s * (-kIerfA * s_erf * s_erf) / 2.0 / out.scale, out.zero_point);
  return g;
}

}  // namespace tpu::compiler
