#include "model/activation.h"

#include <algorithm>
#include <cmath>

namespace tpu::model {
namespace {

template <typename F>
std::array<std::int8_t, 256> make_table(F f) {
  std::array<std::int8_t, 256> t{};
  for (int y = -128; y <= 127; ++y)
    t[static_cast<std::size_t>(y + 128)] =
        static_cast<std::int8_t>(std::round(127.0 * f(static_cast<double>(y) / 16.0)));
  return t;
}

}  // namespace

std::optional<ActFunction> parse_act_function(std::string_view name) {
  for (std::size_t i = 0; i < kActFunctionNames.size(); ++i)
    if (kActFunctionNames[i] == name) return static_cast<ActFunction>(i);
  return std::nullopt;
}

std::string act_function_list() {
  std::string list;
  for (const std::string_view name : kActFunctionNames) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

std::int8_t requantize(std::int32_t acc, const Requant& q) {
  const std::int64_t rounding = q.shift ? std::int64_t{1} << (q.shift - 1) : 0;
  const std::int64_t scaled = (std::int64_t{acc} * q.multiplier + rounding) >> q.shift;
  return static_cast<std::int8_t>(std::clamp<std::int64_t>(scaled + q.zero_point, -128, 127));
}

std::int32_t vec_combine(std::int8_t a, std::int8_t b, const isa::VecRegs& r) {
  const std::int32_t xa = a - r.za, xb = b - r.zb;
  const std::int32_t ya = r.da * xa, yb = r.db * xb;
  switch (r.op) {
    case isa::VecOperation::Add: return ya + yb;
    case isa::VecOperation::Sub: return ya - yb;
    case isa::VecOperation::Mul: return xa * xb;
    case isa::VecOperation::Max: return std::max(ya, yb);
    case isa::VecOperation::Min: return std::min(ya, yb);
  }
  return 0;
}

std::int8_t activate(std::int8_t y, ActFunction f, std::int8_t zero_point) {
  switch (f) {
    case ActFunction::None: return y;
    case ActFunction::Relu: return std::max(y, zero_point);
    case ActFunction::Sigmoid: return sigmoid_table()[static_cast<std::size_t>(y + 128)];
    case ActFunction::Tanh: return tanh_table()[static_cast<std::size_t>(y + 128)];
  }
  return y;
}

const std::array<std::int8_t, 256>& sigmoid_table() {
  static const auto t = make_table([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  return t;
}

const std::array<std::int8_t, 256>& tanh_table() {
  static const auto t = make_table([](double x) { return std::tanh(x); });
  return t;
}

}  // namespace tpu::model
