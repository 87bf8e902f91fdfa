#include "compiler/layer_reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/norm_quant.h"
#include "compiler/quant.h"
#include "compiler/reference.h"

namespace tpu::compiler {
namespace {

// Accumulator -> layer output element.
std::int32_t finish(std::int64_t acc, const Layer& l, double in_scale) {
  const std::int32_t a = wrap32(acc);
  if (l.int32_output) return a;
  const bool table = l.act == model::ActFunction::Sigmoid || l.act == model::ActFunction::Tanh;
  const double out_scale = table ? 1.0 / 16.0 : l.output.scale;
  const std::int32_t zp = table ? 0 : l.output.zero_point;
  const model::Requant q = reference_requant(in_scale * l.weight_scale / out_scale, zp);
  return reference_activate(reference_requantize(a, q), l.act, q.zero_point);
}

// A dense layer of one input or more: its K rows are the inputs' features in
// order, of the first input's pixel `l.pixel` only when that is set, each
// input read at its own zero point; the requantization is the first input's
// (docs/quantization.md, "Recurrent layers").
Tensor dense(const Layer& l, const std::vector<const TensorInfo*>& ins, const std::vector<const Tensor*>& xs) {
  const std::size_t n_out = l.weight_shape[1], batch = xs[0]->batch();
  Tensor y;
  y.shape = {batch, n_out};
  y.int32 = l.int32_output;
  y.data.resize(batch * n_out);
  for (std::size_t s = 0; s < batch; ++s)
    for (std::size_t o = 0; o < n_out; ++o) {
      std::int64_t acc = l.bias.empty() ? 0 : l.bias[o];
      std::size_t row = 0;  // the weight row of the part's first feature
      for (std::size_t j = 0; j < xs.size(); ++j) {
        const TensorInfo& in = *ins[j];
        const bool one_pixel = j == 0 && l.pixel >= 0;
        const std::size_t k = one_pixel ? in.shape[2] : in.shape[0];
        const std::size_t sample = xs[j]->data.size() / batch;
        const std::size_t first = s * sample + (one_pixel ? static_cast<std::size_t>(l.pixel) * k : 0);
        for (std::size_t f = 0; f < k; ++f)
          acc += (std::int64_t{xs[j]->data[first + f]} - in.quant.zero_point) * l.weights[(row + f) * n_out + o];
        row += k;
      }
      y.data[s * n_out + o] = finish(acc, l, ins[0]->quant.scale);
    }
  return y;
}

Tensor conv2d(const Layer& l, const TensorInfo& in, const TensorInfo& out, const Tensor& x) {
  const std::size_t h = in.shape[0], w = in.shape[1], cin = in.shape[2];
  const std::size_t oh = out.shape[0], ow = out.shape[1], cout = out.shape[2];
  const std::size_t kh = l.weight_shape[0], kw = l.weight_shape[1], batch = x.batch();
  // Depthwise (groups = C): output channel co reads input channel co only,
  // with weights KH x KW x 1 x C.
  const bool depthwise = l.groups != 1;
  Tensor y;
  y.shape = {batch, oh, ow, cout};
  y.int32 = l.int32_output;
  y.data.resize(batch * oh * ow * cout);
  for (std::size_t s = 0; s < batch; ++s)
    for (std::size_t i = 0; i < oh; ++i)
      for (std::size_t j = 0; j < ow; ++j)
        for (std::size_t co = 0; co < cout; ++co) {
          std::int64_t acc = l.bias.empty() ? 0 : l.bias[co];
          for (std::size_t dy = 0; dy < kh; ++dy)
            for (std::size_t dx = 0; dx < kw; ++dx) {
              // Input position; outside the image the input is the zero point,
              // whose contribution (z - z) * w is zero.
              const long long yy = static_cast<long long>(i * l.stride_h + dy) - l.pad_top;
              const long long xx = static_cast<long long>(j * l.stride_w + dx) - l.pad_left;
              if (yy < 0 || xx < 0 || yy >= static_cast<long long>(h) || xx >= static_cast<long long>(w))
                continue;
              const std::size_t pixel =
                  (s * h + static_cast<std::size_t>(yy)) * w + static_cast<std::size_t>(xx);
              if (depthwise) {
                const std::int64_t v = x.data[pixel * cin + co];
                acc += (v - in.quant.zero_point) * l.weights[(dy * kw + dx) * cout + co];
                continue;
              }
              for (std::size_t ci = 0; ci < cin; ++ci) {
                const std::int64_t v = x.data[pixel * cin + ci];
                acc += (v - in.quant.zero_point) * l.weights[((dy * kw + dx) * cin + ci) * cout + co];
              }
            }
          y.data[((s * oh + i) * ow + j) * cout + co] = finish(acc, l, in.quant.scale);
        }
  return y;
}

// The input positions of pooling window (i, j) inside the h x w map, in
// row-major order: a window of `l` (kernel, stride, padding), or with `global`
// the whole map.
template <typename F>
void for_window(const Layer& l, bool global, std::size_t h, std::size_t w, std::size_t i,
                std::size_t j, F&& f) {
  const std::size_t kh = global ? h : l.kernel_h, kw = global ? w : l.kernel_w;
  for (std::size_t dy = 0; dy < kh; ++dy)
    for (std::size_t dx = 0; dx < kw; ++dx) {
      const long long yy =
          global ? static_cast<long long>(dy) : static_cast<long long>(i * l.stride_h + dy) - l.pad_top;
      const long long xx =
          global ? static_cast<long long>(dx) : static_cast<long long>(j * l.stride_w + dx) - l.pad_left;
      if (yy < 0 || xx < 0 || yy >= static_cast<long long>(h) || xx >= static_cast<long long>(w))
        continue;  // padding
      f(static_cast<std::size_t>(yy), static_cast<std::size_t>(xx));
    }
}

// Max pooling: the largest value over the window's positions inside the map
// (padded positions never win); the input zero point if there are none.
// Average pooling: q of the exact sum of (x - z_in) over the positions inside
// the map (padded positions add 0 but count in K = kh * kw, count_include_pad),
// with m = s_in / (K * s_out); a global one has one window, the whole map.
Tensor pool(const Layer& l, const TensorInfo& in, const TensorInfo& out, const Tensor& x) {
  const std::size_t h = in.shape[0], w = in.shape[1], c = in.shape[2];
  const std::size_t oh = out.shape[0], ow = out.shape[1], batch = x.batch();
  const bool global = l.kind == LayerKind::GlobalAvgPool2d;
  const bool average = l.kind != LayerKind::MaxPool2d;
  model::Requant q{};
  if (average) {
    const std::uint64_t window = global ? std::uint64_t{h} * w : std::uint64_t{l.kernel_h} * l.kernel_w;
    q = reference_requant(in.quant.scale / (static_cast<double>(window) * out.quant.scale),
                          out.quant.zero_point);
  }
  Tensor y;
  y.shape = {batch, oh, ow, c};
  y.data.resize(batch * oh * ow * c);
  for (std::size_t s = 0; s < batch; ++s)
    for (std::size_t i = 0; i < oh; ++i)
      for (std::size_t j = 0; j < ow; ++j)
        for (std::size_t ch = 0; ch < c; ++ch) {
          std::int32_t m = -129;
          std::int64_t sum = 0;
          for_window(l, global, h, w, i, j, [&](std::size_t yy, std::size_t xx) {
            const std::int32_t v = x.data[((s * h + yy) * w + xx) * c + ch];
            m = std::max(m, v);
            sum += std::int64_t{v} - in.quant.zero_point;
          });
          std::int32_t v = 0;
          if (average)
            v = reference_requantize(wrap32(sum), q);
          else
            v = m == -129 ? in.quant.zero_point : m;
          y.data[((s * oh + i) * ow + j) * c + ch] = v;
        }
  return y;
}

// Add: the input of the larger scale s_hi weighs d_hi = 127, the other
// d_lo = round(127 * s_lo / s_hi) (halves up) clamped to 1..127 (both 127 for
// equal scales); the weighted sum of (x - z) is at scale s_hi / 127 and is
// requantized with m = (s_hi / 127) / s_o, then relu or none.
Tensor add(const Layer& l, const TensorInfo& ia, const TensorInfo& ib, const TensorInfo& out,
           const Tensor& a, const Tensor& b) {
  const double sa = ia.quant.scale, sb = ib.quant.scale;
  const double s_hi = std::max(sa, sb), s_lo = std::min(sa, sb);
  const double d_lo_real = std::floor(127.0 * s_lo / s_hi + 0.5);
  const std::int64_t d_lo = static_cast<std::int64_t>(std::min(127.0, std::max(1.0, d_lo_real)));
  const std::int64_t da = sa >= sb ? 127 : d_lo;
  const std::int64_t db = sa >= sb ? d_lo : 127;
  const model::Requant q = reference_requant((s_hi / 127.0) / out.quant.scale, out.quant.zero_point);
  Tensor y;
  y.shape = a.shape;
  y.data.resize(a.data.size());
  for (std::size_t e = 0; e < a.data.size(); ++e) {
    const std::int64_t acc = da * (std::int64_t{a.data[e]} - ia.quant.zero_point) +
                             db * (std::int64_t{b.data[e]} - ib.quant.zero_point);
    y.data[e] = reference_activate(reference_requantize(wrap32(acc), q), l.act, q.zero_point);
  }
  return y;
}

// Concat along the last axis: input i weighs d_i = round(127 * s_i / s_hi)
// (halves up) clamped to 1..127, s_hi the largest input scale; d_i * (x - z_i)
// is requantized with m = (s_hi / 127) / s_o (no activation).
Tensor concat(const std::vector<const Tensor*>& xs, const std::vector<const TensorInfo*>& ins,
              const TensorInfo& out) {
  double s_hi = 0.0;
  for (const TensorInfo* t : ins) s_hi = std::max(s_hi, t->quant.scale);
  const model::Requant q = reference_requant((s_hi / 127.0) / out.quant.scale, out.quant.zero_point);
  const std::size_t batch = xs[0]->batch();
  std::size_t rows = 1;  // per sample: the elements of every axis but the last
  for (std::size_t a = 0; a + 1 < out.shape.size(); ++a) rows *= out.shape[a];
  const std::size_t c_out = out.shape.back();
  Tensor y;
  y.shape = {batch};
  y.shape.insert(y.shape.end(), out.shape.begin(), out.shape.end());
  y.data.resize(batch * rows * c_out);
  std::size_t at = 0;
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const std::size_t ck = ins[k]->shape.back();
    const std::int64_t d = static_cast<std::int64_t>(
        std::min(127.0, std::max(1.0, std::floor(127.0 * ins[k]->quant.scale / s_hi + 0.5))));
    for (std::size_t r = 0; r < batch * rows; ++r)
      for (std::size_t c = 0; c < ck; ++c) {
        const std::int64_t acc = d * (std::int64_t{xs[k]->data[r * ck + c]} - ins[k]->quant.zero_point);
        y.data[r * c_out + at + c] =
            reference_activate(reference_requantize(wrap32(acc), q), model::ActFunction::None, q.zero_point);
      }
    at += ck;
  }
  return y;
}

// The vector unit's layers (docs/quantization.md, "Layers on the vector
// unit"), written from the formulas: the requantization target of the
// sigmoid and tanh tables is scale 1/16, zero point 0.
double vec_target_scale(const Layer& l, std::int32_t& zp) {
  const bool table = l.act == model::ActFunction::Sigmoid || l.act == model::ActFunction::Tanh;
  zp = table ? 0 : l.output.zero_point;
  return table ? 1.0 / 16.0 : l.output.scale;
}

// Mul: (a - z_a) * (b - z_b) at m = s_a * s_b / s_o; b the same shape as a,
// or one value per channel (1 x 1 x C) for every pixel of a.
Tensor mul(const Layer& l, const TensorInfo& ia, const TensorInfo& ib, const Tensor& a, const Tensor& b) {
  std::int32_t zp = 0;
  const double so = vec_target_scale(l, zp);
  const model::Requant q = reference_requant(ia.quant.scale * ib.quant.scale / so, zp);
  const std::size_t per_a = a.data.size() / std::max<std::size_t>(1, a.batch());
  const std::size_t per_b = b.data.size() / std::max<std::size_t>(1, b.batch());
  const std::size_t channels = ib.shape.back();
  Tensor y;
  y.shape = a.shape;
  y.data.resize(a.data.size());
  for (std::size_t e = 0; e < a.data.size(); ++e) {
    const std::size_t s = e / per_a;
    const std::size_t eb = per_b == per_a ? e : s * per_b + (e % per_a) % channels;
    const std::int64_t v = (std::int64_t{a.data[e]} - ia.quant.zero_point) *
                           (std::int64_t{b.data[eb]} - ib.quant.zero_point);
    y.data[e] = reference_activate(reference_requantize(wrap32(v), q), l.act, q.zero_point);
  }
  return y;
}

// Affine: k = z + 128 (z >= 0) or z - 127, s = max(|alpha s_x|, |beta / k|) / 8192
// (s_x when 0), D = round(alpha s_x / s), db = round(beta / (s k)) (halves away
// from zero), v = D (x - z) + db k, at m = s / s_o.
Tensor affine(const Layer& l, const TensorInfo& in, const Tensor& x) {
  const std::int64_t z = in.quant.zero_point;
  const std::int64_t k = z >= 0 ? z + 128 : z - 127;
  double s = std::max(std::fabs(l.alpha * in.quant.scale), std::fabs(l.beta / static_cast<double>(k))) / 8192.0;
  if (s == 0.0) s = in.quant.scale;
  const auto away = [](double v) { return v < 0 ? -std::floor(-v + 0.5) : std::floor(v + 0.5); };
  const std::int64_t d = static_cast<std::int64_t>(away(l.alpha * in.quant.scale / s));
  const std::int64_t db = static_cast<std::int64_t>(away(l.beta / (s * static_cast<double>(k))));
  std::int32_t zp = 0;
  const double so = vec_target_scale(l, zp);
  const model::Requant q = reference_requant(s / so, zp);
  Tensor y;
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (std::size_t e = 0; e < x.data.size(); ++e) {
    const std::int64_t v = d * (std::int64_t{x.data[e]} - z) + db * k;
    y.data[e] = reference_activate(reference_requantize(wrap32(v), q), l.act, q.zero_point);
  }
  return y;
}

// ---- Transformer layers (docs/quantization.md, "Integer softmax, LayerNorm
// and GELU", "Transformer layers"), written from the formulas there; the
// registers are the compiler's choice (norm_quant.h), which
// tools/int8_reference.py makes independently.

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// floor(sqrt(n)), n >= 0 (exact: corrected after the double estimate).
std::int64_t floor_sqrt(std::int64_t n) {
  auto r = static_cast<std::int64_t>(std::sqrt(static_cast<double>(n)));
  while (r > 0 && r * r > n) --r;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}

// sat8(((v * M + 2^(S-1)) >> S) + Z) with the product exact.
std::int32_t requantize_wide(std::int64_t v, const model::Requant& q) {
  __int128 p = static_cast<__int128>(v) * q.multiplier;
  if (q.shift > 0) p += static_cast<__int128>(1) << (q.shift - 1);
  p >>= q.shift;
  p += q.zero_point;
  return static_cast<std::int32_t>(std::clamp<__int128>(p, -128, 127));
}

// Constant tokens and positions (docs/quantization.md): acc = b[p][c] for the
// prefix_tokens constant tokens, (x - z_x) + b[p][c] for the input's, in int32
// (|b| <= 2^30), requantized with s_x / s_y.
Tensor token_bias(const Layer& l, const TensorInfo& in, const TensorInfo& out, const Tensor& x) {
  const std::size_t c = in.shape[2], tokens_in = in.shape[0] * in.shape[1], tokens = out.shape[1];
  const model::Requant q = reference_requant(in.quant.scale / l.output.scale, l.output.zero_point);
  Tensor y;
  y.shape = {x.batch(), 1, tokens, c};
  y.data.resize(x.batch() * tokens * c);
  for (std::size_t s = 0; s < x.batch(); ++s)
    for (std::size_t p = 0; p < tokens; ++p)
      for (std::size_t ch = 0; ch < c; ++ch) {
        std::int64_t acc = l.bias[p * c + ch];
        if (p >= l.prefix_tokens)
          acc += std::int64_t{x.data[(s * tokens_in + p - l.prefix_tokens) * c + ch]} - in.quant.zero_point;
        y.data[(s * tokens + p) * c + ch] = reference_requantize(wrap32(acc), q);
      }
  return y;
}

// LayerNorm without its affine: each token (the last axis) normalized by
// LNRM's integer arithmetic.
Tensor layernorm(const Layer& l, const TensorInfo& in, const Tensor& x) {
  const std::int64_t d = static_cast<std::int64_t>(in.shape.back());
  const NormSetting ns = layernorm_setting(in.quant, static_cast<std::uint64_t>(d), l.eps, l.output);
  Tensor y;
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (std::size_t t0 = 0; t0 < x.data.size(); t0 += static_cast<std::size_t>(d)) {
    std::int64_t sum = 0;
    for (std::int64_t k = 0; k < d; ++k) sum += x.data[t0 + static_cast<std::size_t>(k)];
    const std::int64_t mean = floor_div(sum * 32 + d, 2 * d);  // round(16 sum / D), ties up
    std::int64_t var = 0;
    for (std::int64_t k = 0; k < d; ++k) {
      const std::int64_t dev = std::int64_t{x.data[t0 + static_cast<std::size_t>(k)]} * 16 - mean;
      var += dev * dev;
    }
    const std::int64_t sq = floor_sqrt(std::max<std::int64_t>(var + ns.regs.k0, 0));
    const std::int64_t recip = (std::int64_t{1} << 32) / std::max<std::int64_t>(sq, 1);
    for (std::int64_t k = 0; k < d; ++k) {
      const std::size_t e = t0 + static_cast<std::size_t>(k);
      const std::int64_t dev = std::int64_t{x.data[e]} * 16 - mean;
      y.data[e] = requantize_wide((dev * recip) >> 16, ns.requant);
    }
  }
  return y;
}

// GELU element by element: I-BERT's i-erf in GELU's integer arithmetic.
Tensor gelu(const Layer& l, const TensorInfo& in, const Tensor& x) {
  const NormSetting ns = gelu_setting(in.quant, l.output);
  const isa::NormRegs& r = ns.regs;
  const auto sat32 = [](std::int64_t v) {
    return std::clamp<std::int64_t>(v, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max());
  };
  const std::int64_t k = std::max<std::int64_t>(r.k0, 0);
  Tensor y;
  y.shape = x.shape;
  y.data.resize(x.data.size());
  for (std::size_t e = 0; e < x.data.size(); ++e) {
    const std::int64_t q = sat32((std::int64_t{x.data[e]} - r.k2) * (std::int64_t{1} << r.shift));
    const std::int64_t u = std::min<std::int64_t>(q < 0 ? -q : q, k) - k;
    const std::int64_t sgn = q > 0 ? 1 : (q < 0 ? -1 : 0);
    const std::int64_t w = sat32(r.k1 + sgn * (r.k1 - u * u));
    y.data[e] = requantize_wide(q * w, ns.requant);
  }
  return y;
}

}  // namespace

model::Requant reference_requant(double real, std::int32_t zero_point) {
  if (!(real > 0.0) || !std::isfinite(real))
    throw CompileError(fmt::format("requantization multiplier {} is not positive and finite", real));
  // The shift that brings real * 2^S into [2^30, 2^31).
  long long s = 0;
  while (std::ldexp(real, static_cast<int>(s)) < 1073741824.0) ++s;
  while (std::ldexp(real, static_cast<int>(s)) >= 2147483648.0) --s;
  // Round half away from zero (the value is positive).
  long long m = static_cast<long long>(std::floor(std::ldexp(real, static_cast<int>(s)) + 0.5));
  if (m == 2147483648LL) {
    m = 1073741824LL;
    --s;
  }
  if (s < 0) throw CompileError(fmt::format("requantization multiplier {} is too large", real));
  if (s > 62) {
    m = static_cast<long long>(std::floor(std::ldexp(real, 62) + 0.5));
    s = 62;
  }
  model::Requant q;
  q.multiplier = static_cast<std::int32_t>(m);
  q.shift = static_cast<std::uint32_t>(s);
  q.zero_point = static_cast<std::int8_t>(zero_point);
  return q;
}

std::vector<Tensor> reference_network_all(const Network& net, const Tensor& x) {
  const std::vector<TensorInfo> infos = infer_network(net);
  std::vector<Tensor> outs;
  outs.reserve(net.layers.size());
  // Tensor id t: 0 is the network input, i + 1 layer i's output.
  const auto tensor = [&](std::size_t t) -> const Tensor& { return t == 0 ? x : outs[t - 1]; };
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    const std::vector<std::size_t> ids = layer_inputs(net, i);
    const Tensor& cur = tensor(ids[0]);
    const TensorInfo& in = infos[ids[0]];
    const TensorInfo& out = infos[i + 1];
    // Every input and its info (concat; dense of several inputs).
    const auto all_inputs = [&] {
      std::vector<const Tensor*> xs;
      for (std::size_t id : ids) xs.push_back(&tensor(id));
      return xs;
    };
    const auto all_infos = [&] {
      std::vector<const TensorInfo*> ins;
      for (std::size_t id : ids) ins.push_back(&infos[id]);
      return ins;
    };
    switch (l.kind) {
      case LayerKind::Dense: outs.push_back(dense(l, all_infos(), all_inputs())); break;
      case LayerKind::Conv2d: outs.push_back(conv2d(l, in, out, cur)); break;
      case LayerKind::MaxPool2d:
      case LayerKind::AvgPool2d:
      case LayerKind::GlobalAvgPool2d: outs.push_back(pool(l, in, out, cur)); break;
      case LayerKind::Flatten: {
        Tensor y = cur;
        y.shape = {cur.batch(), out.shape[0]};
        outs.push_back(std::move(y));
        break;
      }
      case LayerKind::Add:
        outs.push_back(add(l, in, infos[ids[1]], out, cur, tensor(ids[1])));
        break;
      case LayerKind::Upsample: {
        // Nearest: output (oy, ox) is input (oy / s_h, ox / s_w), unchanged.
        const std::size_t h = in.shape[0], w = in.shape[1], c = in.shape[2];
        const std::size_t oh = out.shape[0], ow = out.shape[1];
        Tensor y;
        y.shape = {cur.batch(), oh, ow, c};
        y.data.resize(cur.batch() * oh * ow * c);
        for (std::size_t s = 0; s < cur.batch(); ++s)
          for (std::size_t oy = 0; oy < oh; ++oy)
            for (std::size_t ox = 0; ox < ow; ++ox)
              for (std::size_t ch = 0; ch < c; ++ch)
                y.data[((s * oh + oy) * ow + ox) * c + ch] =
                    cur.data[((s * h + oy / l.stride_h) * w + ox / l.stride_w) * c + ch];
        outs.push_back(std::move(y));
        break;
      }
      case LayerKind::Concat: outs.push_back(concat(all_inputs(), all_infos(), out)); break;
      case LayerKind::Mul: outs.push_back(mul(l, in, infos[ids[1]], cur, tensor(ids[1]))); break;
      case LayerKind::Affine: outs.push_back(affine(l, in, cur)); break;
      // --- attention ---
      case LayerKind::Softmax: outs.push_back(reference_softmax(in, cur)); break;
      case LayerKind::MatMul:
        outs.push_back(reference_matmul(l, in, infos[ids[1]], out, cur, tensor(ids[1])));
        break;
      case LayerKind::LayerNorm: outs.push_back(layernorm(l, in, cur)); break;
      case LayerKind::Gelu: outs.push_back(gelu(l, in, cur)); break;
      case LayerKind::TokenBias: outs.push_back(token_bias(l, in, out, cur)); break;
    }
  }
  return outs;
}

Tensor reference_network(const Network& net, const Tensor& x) {
  std::vector<Tensor> all = reference_network_all(net, x);
  return all.empty() ? x : std::move(all.back());
}

}  // namespace tpu::compiler
