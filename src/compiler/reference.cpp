#include "compiler/reference.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

namespace tpu::compiler {
namespace {

using MatI64 = Eigen::Matrix<std::int64_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

MatI64 to_matrix(const MatrixI8& m) {
  MatI64 out(m.rows, m.cols);
  for (std::size_t r = 0; r < m.rows; ++r)
    for (std::size_t c = 0; c < m.cols; ++c) out(r, c) = m.at(r, c);
  return out;
}

// round(127 * g(y / 16)), halves away from zero.
std::int8_t table_value(long double g) {
  const long double v = 127.0L * g;
  const long double r = std::floor(std::fabs(v) + 0.5L);
  return static_cast<std::int8_t>(v < 0 ? -r : r);
}

}  // namespace

std::int8_t reference_requantize(std::int32_t acc, const model::Requant& q) {
  __int128 p = static_cast<__int128>(acc) * q.multiplier;
  if (q.shift > 0) p += static_cast<__int128>(1) << (q.shift - 1);
  const __int128 d = static_cast<__int128>(1) << q.shift;
  __int128 floor_q = p / d;  // truncates toward zero; floor is one less for negative remainders
  if (p % d != 0 && p < 0) floor_q -= 1;
  const __int128 y = floor_q + q.zero_point;
  return static_cast<std::int8_t>(y < -128 ? -128 : y > 127 ? 127 : y);
}

std::int8_t reference_activate(std::int8_t y, model::ActFunction f, std::int8_t zero_point) {
  const long double x = static_cast<long double>(y) / 16.0L;
  switch (f) {
    case model::ActFunction::None: return y;
    case model::ActFunction::Relu: return y > zero_point ? y : zero_point;
    case model::ActFunction::Sigmoid: return table_value(1.0L / (1.0L + std::exp(-x)));
    case model::ActFunction::Tanh: return table_value(std::tanh(x));
  }
  return y;
}

std::vector<std::int32_t> reference_gemm(const MatrixI8& a, const MatrixI8& b,
                                         const GemmSpec& spec) {
  const MatI64 c = to_matrix(a) * to_matrix(b);
  std::vector<std::int32_t> out(a.rows * b.cols);
  for (std::size_t r = 0; r < a.rows; ++r)
    for (std::size_t col = 0; col < b.cols; ++col) {
      // int32 two's-complement wrap of the exact sum.
      const auto acc = static_cast<std::int32_t>(static_cast<std::uint32_t>(c(r, col)));
      out[r * b.cols + col] =
          spec.requant ? reference_activate(reference_requantize(acc, *spec.requant), spec.act,
                                            spec.requant->zero_point)
                       : acc;
    }
  return out;
}

}  // namespace tpu::compiler
