// The activation unit's row function (model::activate_row) against the
// definition of docs/quantization.md written out here in 128-bit integers and
// doubles: every kernel this CPU has (scalar, AVX2, AVX-512; each forced by
// name), every shift, multipliers and accumulators at their extremes, every
// zero point and function, rows that are and are not a multiple of the vector
// kernels' eight lanes, and values on the rounding and clamping boundaries.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "model/activation.h"

using namespace tpu;

namespace {

const model::ActKernel kAllKernels[] = {model::ActKernel::Scalar, model::ActKernel::Avx2, model::ActKernel::Avx512};

std::int8_t defined(std::int32_t a, const model::Requant& q, model::ActFunction f) {
  const __int128 r = q.shift ? __int128{1} << (q.shift - 1) : 0;
  const __int128 scaled = (__int128{a} * q.multiplier + r) >> q.shift;  // arithmetic: floor
  const __int128 y128 = std::clamp<__int128>(scaled + q.zero_point, -128, 127);
  const int y = static_cast<int>(y128);
  switch (f) {
    case model::ActFunction::None: return static_cast<std::int8_t>(y);
    case model::ActFunction::Relu: return static_cast<std::int8_t>(std::max<int>(y, q.zero_point));
    case model::ActFunction::Sigmoid: return static_cast<std::int8_t>(std::round(127.0 / (1.0 + std::exp(-y / 16.0))));
    case model::ActFunction::Tanh: return static_cast<std::int8_t>(std::round(127.0 * std::tanh(y / 16.0)));
  }
  return 0;
}

}  // namespace

TEST_CASE("Every activation row kernel gives the definition's bits", "[act_row]") {
  std::mt19937 rng(31);
  std::vector<model::ActKernel> kernels;
  for (model::ActKernel k : kAllKernels)
    if (model::act_kernel_available(k)) kernels.push_back(k);
  REQUIRE(!kernels.empty());
  const std::vector<std::int32_t> multipliers = {1, -1, 2, 1 << 30, INT32_MAX, INT32_MIN, -12345, 1234567};
  const std::vector<std::int32_t> extremes = {0, 1, -1, INT32_MAX, INT32_MIN, 127, -128, 1 << 20};
  for (std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{256}}) {
    std::vector<std::int32_t> acc(n);
    for (unsigned shift = 0; shift <= 62; ++shift) {
      for (std::int32_t m : multipliers) {
        for (auto& v : acc) v = static_cast<std::int32_t>(rng());
        for (std::size_t j = 0; j < std::min(n, extremes.size()); ++j) acc[j] = extremes[j];
        // Small accumulators too, so that large shifts do not make every value 0 or -1.
        if (n > 8)
          for (std::size_t j = 8; j < n; j += 2) acc[j] = static_cast<std::int32_t>(rng() % 4001) - 2000;
        const auto zp = static_cast<std::int8_t>(rng());
        const model::Requant q{m, shift, zp};
        for (model::ActFunction f : {model::ActFunction::None, model::ActFunction::Relu,
                                     model::ActFunction::Sigmoid, model::ActFunction::Tanh}) {
          std::vector<std::int8_t> want(n);
          for (std::size_t j = 0; j < n; ++j) want[j] = defined(acc[j], q, f);
          for (model::ActKernel k : kernels) {
            CAPTURE(n, shift, m, int{zp}, static_cast<int>(f), static_cast<int>(k));
            std::vector<std::int8_t> got(n, 99);
            model::activate_row(k, acc.data(), n, q, f, got.data());
            REQUIRE(got == want);
          }
          std::vector<std::int8_t> got(n, 99);
          model::activate_row(acc.data(), n, q, f, got.data());  // the kernel the model uses
          REQUIRE(got == want);
        }
      }
    }
  }
}

// Ties and saturation: with M = +-1 and shift S, acc = k * 2^(S-1) + d for
// d in {-1, 0, 1} puts the rounded value on, just below and just above each
// half (negative ones included: the AVX2 kernel builds its arithmetic shift
// from a logical one), and zero points that put the result at -128, 127 and
// one past each; ReLU too (the AVX2 kernel clamps at Z instead of -128).
TEST_CASE("Activation row kernels on rounding ties and the clamp's edges", "[act_row]") {
  std::size_t tested = 0;
  for (model::ActKernel k : kAllKernels) {
    if (!model::act_kernel_available(k)) continue;
    ++tested;
    for (unsigned shift = 0; shift <= 31; ++shift) {
      std::vector<std::int32_t> acc;
      const std::int64_t half = shift ? std::int64_t{1} << (shift - 1) : 1;
      for (std::int64_t kk = -300; kk <= 300; ++kk)
        for (std::int64_t d = -1; d <= 1; ++d) {
          const std::int64_t v = kk * half + d;
          if (v >= INT32_MIN && v <= INT32_MAX) acc.push_back(static_cast<std::int32_t>(v));
        }
      for (std::int32_t m : {1, -1})
        for (int zp : {-128, -127, -1, 0, 1, 126, 127})
          for (model::ActFunction f : {model::ActFunction::None, model::ActFunction::Relu}) {
            const model::Requant q{m, shift, static_cast<std::int8_t>(zp)};
            std::vector<std::int8_t> want(acc.size()), got(acc.size(), 99);
            for (std::size_t j = 0; j < acc.size(); ++j) want[j] = defined(acc[j], q, f);
            model::activate_row(k, acc.data(), acc.size(), q, f, got.data());
            CAPTURE(shift, m, zp, static_cast<int>(f), static_cast<int>(k));
            REQUIRE(got == want);
          }
    }
  }
  REQUIRE(tested >= 1);
}
