// The activation unit's row function (model::activate_row) against the
// definition of docs/quantization.md written out here in 128-bit integers and
// doubles: every kernel this CPU has, every shift, multipliers and
// accumulators at their extremes, every zero point and function, rows that
// are and are not a multiple of the vector kernel's eight lanes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "model/activation.h"

using namespace tpu;

namespace {

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
  for (model::ActKernel k : {model::ActKernel::Scalar, model::ActKernel::Avx512})
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
