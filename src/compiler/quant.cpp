#include "compiler/quant.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "compiler/gemm.h"
#include "compiler/network.h"

namespace tpu::compiler {

model::Requant requant_from_multiplier(double real, std::int32_t zero_point) {
  if (!(real > 0.0) || !std::isfinite(real))
    throw CompileError(fmt::format("requantization multiplier {} is not positive and finite", real));
  if (zero_point < -128 || zero_point > 127)
    throw CompileError(fmt::format("zero point {} is outside -128..127", zero_point));
  int e = 0;
  const double f = std::frexp(real, &e);  // real = f * 2^e, f in [0.5, 1)
  // f * 2^31 is exact; llround rounds halves away from zero.
  std::int64_t m = std::llround(std::ldexp(f, 31));
  if (m == (std::int64_t{1} << 31)) {
    m = std::int64_t{1} << 30;
    ++e;
  }
  std::int64_t s = 31 - e;
  if (s < 0)
    throw CompileError(fmt::format(
        "requantization multiplier {} is too large (at least 2^31): check the scales", real));
  if (s > 62) {
    s = 62;
    m = std::llround(std::ldexp(real, 62));
  }
  model::Requant q;
  q.multiplier = static_cast<std::int32_t>(m);
  q.shift = static_cast<std::uint32_t>(s);
  q.zero_point = static_cast<std::int8_t>(zero_point);
  return q;
}

model::Requant layer_requant(double input_scale, double weight_scale, const QuantParams& output,
                             model::ActFunction act) {
  const bool table = act == model::ActFunction::Sigmoid || act == model::ActFunction::Tanh;
  const double out_scale = table ? kSigmoidTanhInputScale : output.scale;
  const std::int32_t zero_point = table ? 0 : output.zero_point;
  return requant_from_multiplier(input_scale * weight_scale / out_scale, zero_point);
}

std::optional<std::vector<std::vector<std::int8_t>>> decompose_bias(
    const std::vector<std::int32_t>& bias, const std::vector<std::int32_t>& values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::llabs(values[a]) > std::llabs(values[b]);
  });
  std::vector<std::vector<std::int8_t>> digits(values.size(),
                                               std::vector<std::int8_t>(bias.size(), 0));
  for (std::size_t o = 0; o < bias.size(); ++o) {
    std::int64_t rest = bias[o];
    for (std::size_t l : order) {
      const std::int64_t v = values[l];
      if (v == 0 || rest == 0) continue;
      // Nearest quotient, halves away from zero, clamped to the digit range.
      const std::int64_t a = std::llabs(rest), b = std::llabs(v);
      std::int64_t qt = (2 * a + b) / (2 * b);
      if ((rest < 0) != (v < 0)) qt = -qt;
      qt = std::clamp<std::int64_t>(qt, -127, 127);
      digits[l][o] = static_cast<std::int8_t>(qt);
      rest -= qt * v;
    }
    if (rest != 0) return std::nullopt;
  }
  return digits;
}

AddFactors add_factors(double scale_a, double scale_b) {
  const double hi = std::max(scale_a, scale_b), lo = std::min(scale_a, scale_b);
  const double d = std::floor(127.0 * lo / hi + 0.5);
  const auto d_lo = static_cast<std::int32_t>(std::clamp(d, 1.0, 127.0));
  AddFactors f;
  f.a = scale_a >= scale_b ? 127 : d_lo;
  f.b = scale_a >= scale_b ? d_lo : 127;
  f.acc_scale = hi / 127.0;
  return f;
}

ConcatFactors concat_factors(const std::vector<double>& scales) {
  ConcatFactors f;
  double hi = 0.0;
  for (double s : scales) hi = std::max(hi, s);
  for (double s : scales)
    f.d.push_back(static_cast<std::int32_t>(std::clamp(std::floor(127.0 * s / hi + 0.5), 1.0, 127.0)));
  f.acc_scale = hi / 127.0;
  return f;
}

model::Requant concat_requant(const std::vector<double>& scales, const QuantParams& out) {
  return requant_from_multiplier(concat_factors(scales).acc_scale / out.scale, out.zero_point);
}

model::Requant add_requant(const QuantParams& a, const QuantParams& b, const QuantParams& out) {
  return requant_from_multiplier(add_factors(a.scale, b.scale).acc_scale / out.scale,
                                 out.zero_point);
}

namespace {
// The requantization target of an activation: the tables read q / 16 at zero point 0.
QuantParams act_target(const QuantParams& out, model::ActFunction act) {
  if (act == model::ActFunction::Sigmoid || act == model::ActFunction::Tanh) return {kSigmoidTanhInputScale, 0};
  return out;
}
}  // namespace

VecParams mul_vec(const QuantParams& a, const QuantParams& b, const QuantParams& out, model::ActFunction act) {
  const QuantParams t = act_target(out, act);
  VecParams p;
  p.op = 2;  // MUL
  p.za = a.zero_point;
  p.zb = b.zero_point;
  p.requant = requant_from_multiplier(a.scale * b.scale / t.scale, t.zero_point);
  return p;
}

VecParams affine_vec(const QuantParams& x, double alpha, double beta, const QuantParams& out,
                     model::ActFunction act) {
  if (!std::isfinite(alpha) || !std::isfinite(beta))
    throw CompileError(fmt::format("affine alpha {} and beta {} must be finite", alpha, beta));
  const QuantParams t = act_target(out, act);
  const std::int32_t k = x.zero_point >= 0 ? x.zero_point + 128 : x.zero_point - 127;
  const double g = alpha * x.scale;
  double s = std::max(std::fabs(g), std::fabs(beta / k)) / 8192.0;
  if (!(s > 0.0)) s = x.scale;
  if (!std::isfinite(s)) throw CompileError(fmt::format("affine alpha {} gives no finite scale", alpha));
  const double d_real = std::round(g / s), db_real = std::round(beta / (s * k));  // halves away from zero
  VecParams p;
  p.op = 0;  // ADD
  p.za = x.zero_point;
  p.zb = x.zero_point - k;
  p.db = static_cast<std::int32_t>(db_real);
  p.da = static_cast<std::int32_t>(d_real) - p.db;
  p.requant = requant_from_multiplier(s / t.scale, t.zero_point);
  return p;
}

std::vector<std::int64_t> folded_bias(const Layer& l, std::int32_t zin) {
  return folded_bias(l, {KPart{l.weights.size() / l.weight_shape.back(), zin}});
}

// The weights are read row by row, in their order in memory (a column at a
// time strode through the whole matrix: a quarter of the import of an
// LSTM0-sized stack, docs/validation.md), and a part at zero point 0 adds
// nothing.
std::vector<std::int64_t> folded_bias(const Layer& l, const std::vector<KPart>& parts) {
  const std::uint64_t nout = l.weight_shape.back();
  std::vector<std::int64_t> bias(nout, 0);
  if (!l.bias.empty())
    for (std::uint64_t o = 0; o < nout; ++o) bias[o] = l.bias[o];
  std::vector<std::int64_t> sum(nout);
  std::uint64_t k0 = 0;
  for (const KPart& part : parts) {
    if (part.zin != 0) {
      std::fill(sum.begin(), sum.end(), 0);
      for (std::uint64_t k = k0; k < k0 + part.rows; ++k) {
        const std::int8_t* row = l.weights.data() + k * nout;
        for (std::uint64_t o = 0; o < nout; ++o) sum[o] += row[o];
      }
      for (std::uint64_t o = 0; o < nout; ++o) bias[o] -= std::int64_t{part.zin} * sum[o];
    }
    k0 += part.rows;
  }
  for (std::int64_t& b : bias) b = wrap32(b);
  return bias;
}

}  // namespace tpu::compiler
