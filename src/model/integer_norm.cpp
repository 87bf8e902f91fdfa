#include "model/integer_norm.h"

#include <algorithm>
#include <limits>

namespace tpu::model {
namespace {

constexpr std::int64_t kExpMax = (std::int64_t{1} << 39) - 1;

std::int64_t sat32(std::int64_t v) {
  return std::clamp<std::int64_t>(v, std::numeric_limits<std::int32_t>::min(),
                                  std::numeric_limits<std::int32_t>::max());
}

// The arithmetic shift of a value whose magnitude fits 62 bits: a left shift
// of a negative value is written as a multiplication (no UB before C++20).
std::int64_t shifted(std::int64_t v, std::uint32_t sh) { return v * (std::int64_t{1} << sh); }

}  // namespace

std::int64_t norm_exp(std::int64_t p, const isa::NormRegs& r) {
  // p > 0 only when the instruction's own writes changed a row between its
  // passes (docs/quantization.md): taken as 0.
  p = std::min<std::int64_t>(p, 0);
  const std::int64_t k = std::max<std::int64_t>(r.k0, 1);
  const std::int64_t z = -p / k;  // p <= 0: truncation is the floor of -p / k
  const std::int64_t rest = p + z * k;
  const std::int64_t t = sat32(rest + r.k1);
  const std::int64_t big = std::max<std::int64_t>(t * t + r.k2, 0);  // |t*t| <= 2^62
  if (z >= 63) return 0;
  return std::min(big >> z, kExpMax);
}

std::int64_t softmax_recip(std::int64_t sum) {
  return sum <= 0 ? 0 : (std::int64_t{1} << 62) / sum;
}

std::int32_t softmax_value(std::int64_t e, std::int64_t recip) {
  // e <= sum unless the instruction's own writes changed a row between its
  // passes: the product is exact in 128 bits and v saturates at int32's top.
  const __int128 v = (static_cast<__int128>(e) * recip) >> 32;
  return static_cast<std::int32_t>(std::min<__int128>(v, std::numeric_limits<std::int32_t>::max()));
}

std::int64_t layernorm_mean(std::int64_t sum, std::uint64_t lanes) {
  const auto d = static_cast<std::int64_t>(lanes);
  const std::int64_t num = sum * 32 + d, den = 2 * d;
  // Floor division: C++ truncates toward zero.
  return num / den - ((num % den != 0 && num < 0) ? 1 : 0);
}

std::int64_t isqrt_newton(std::int64_t n) {
  if (n <= 0) return 0;
  const auto bits = static_cast<unsigned>(64 - __builtin_clzll(static_cast<unsigned long long>(n)));
  std::int64_t x = std::int64_t{1} << ((bits + 1) / 2);
  for (;;) {
    const std::int64_t y = (x + n / x) >> 1;
    if (y >= x) return x;
    x = y;
  }
}

std::int64_t layernorm_recip(std::int64_t var, std::int32_t k0) {
  const std::int64_t sq = isqrt_newton(std::max<std::int64_t>(var + k0, 0));
  return (std::int64_t{1} << 32) / std::max<std::int64_t>(sq, 1);
}

std::int32_t layernorm_value(std::int64_t dev, std::int64_t recip) {
  return static_cast<std::int32_t>((dev * recip) >> 16);
}

std::int64_t gelu_value(std::int8_t x, const isa::NormRegs& r) {
  const std::int64_t q = sat32(shifted(std::int64_t{x} - r.k2, r.shift));
  const std::int64_t k = std::max<std::int64_t>(r.k0, 0);
  const std::int64_t u = std::min<std::int64_t>(q < 0 ? -q : q, k) - k;
  const std::int64_t sign = (q > 0) - (q < 0);
  const std::int64_t e = sign * (r.k1 - u * u);
  return q * sat32(r.k1 + e);
}

std::int8_t requantize_wide(std::int64_t v, const Requant& q) {
  __int128 p = static_cast<__int128>(v) * q.multiplier;
  if (q.shift > 0) p += static_cast<__int128>(1) << (q.shift - 1);
  const __int128 y = (p >> q.shift) + q.zero_point;  // >> on a signed __int128 is arithmetic (GCC, Clang)
  return static_cast<std::int8_t>(std::clamp<__int128>(y, -128, 127));
}

}  // namespace tpu::model
