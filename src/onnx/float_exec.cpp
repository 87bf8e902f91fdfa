#include "onnx/float_exec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "model/int8_gemm.h"
#include "onnx/float_kernels.h"

namespace tpu::onnximport {
namespace {

using compiler::CompileError;
using compiler::LayerKind;
using Shape = std::vector<std::size_t>;

std::size_t count(const Shape& s) {
  std::size_t n = 1;
  for (std::size_t d : s) n *= d;
  return n;
}

[[noreturn]] void fail(const FloatLayer& l, const std::string& what) {
  throw CompileError(fmt::format("layer '{}': {}", l.name, what));
}

// Output size of a window of k at stride s over n padded by a + b.
std::size_t out_size(const FloatLayer& l, std::size_t n, unsigned k, unsigned s, unsigned a,
                     unsigned b) {
  if (n + a + b < k) fail(l, "the window is larger than the padded input");
  return (n + a + b - k) / s + 1;
}

}  // namespace

Shape float_layer_shape(const FloatLayer& l, const std::vector<Shape>& shapes) {
  const Shape& in = shapes.at(l.inputs.at(0));
  const auto need_map = [&] {
    if (in.size() != 3) fail(l, "needs an H x W x C input");
  };
  switch (l.kind) {
    case LayerKind::Dense: {
      std::size_t k = 0;
      for (std::size_t j = 0; j < l.inputs.size(); ++j) {
        const Shape& s = shapes.at(l.inputs[j]);
        const bool one_pixel = j == 0 && l.pixel >= 0;
        if (one_pixel ? s.size() != 3 || static_cast<std::size_t>(l.pixel) >= s[0] * s[1] : s.size() != 1)
          fail(l, "a dense layer reads 1-D inputs (or a pixel of a map)");
        k += s.back();
      }
      if (l.weight_shape.size() != 2 || l.weight_shape[0] != k) fail(l, "dense weights do not match the input");
      return {l.weight_shape[1]};
    }
    case LayerKind::Conv2d: {
      need_map();
      const std::size_t cin_w = l.groups == 1 ? in[2] : 1;
      if (l.weight_shape.size() != 4 || l.weight_shape[2] != cin_w ||
          (l.groups != 1 && (l.groups != in[2] || l.weight_shape[3] != in[2])))
        fail(l, "conv weights do not match the input");
      return {out_size(l, in[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom),
              out_size(l, in[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right), l.weight_shape[3]};
    }
    case LayerKind::MaxPool2d:
    case LayerKind::AvgPool2d:
      need_map();
      return {out_size(l, in[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom),
              out_size(l, in[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right), in[2]};
    case LayerKind::GlobalAvgPool2d:
      need_map();
      return {1, 1, in[2]};
    case LayerKind::Add:
      if (l.inputs.size() != 2 || shapes.at(l.inputs[1]) != in) fail(l, "adds tensors of different shapes");
      return in;
    case LayerKind::Flatten:
      return {count(in)};
    case LayerKind::Affine:
      return in;
    case LayerKind::Mul: {
      if (l.inputs.size() != 2) fail(l, "multiplies two tensors");
      const Shape& b = shapes.at(l.inputs[1]);
      if (b != in && !(in.size() == 3 && b.size() == 3 && b[0] == 1 && b[1] == 1 && b[2] == in[2]))
        fail(l, "multiplies tensors of shapes that are neither the same nor a map and a per-channel vector");
      return in;
    }
    case LayerKind::Upsample:
      need_map();
      return {in[0] * l.stride_h, in[1] * l.stride_w, in[2]};
    // --- attention ---
    case LayerKind::Softmax:
      return in;
    case LayerKind::MatMul: {
      const Shape& b = shapes.at(l.inputs.at(1));
      if (in.size() != 3 || b.size() != 3) fail(l, "multiplies two maps");
      if (l.transpose_b ? b[2] != in[2] : b[0] * b[1] != in[2]) fail(l, "multiplies maps of mismatched shapes");
      return {in[0], in[1], l.transpose_b ? b[0] * b[1] : b[2]};
    }
    case LayerKind::LayerNorm:
    case LayerKind::Gelu:
      return in;
    case LayerKind::TokenBias: {
      need_map();
      const std::size_t tokens = l.prefix_tokens + in[0] * in[1];
      if (l.bias.size() != tokens * in[2]) fail(l, "has a bias of the wrong size");
      return {1, tokens, in[2]};
    }
    case LayerKind::Concat: {
      Shape out = in;
      out.back() = 0;
      for (std::size_t id : l.inputs) {
        const Shape& s = shapes.at(id);
        if (s.size() != in.size() || !std::equal(s.begin(), s.end() - 1, in.begin()))
          fail(l, "concatenates tensors whose shapes differ in more than the channels");
        out.back() += s.back();
      }
      return out;
    }
  }
  fail(l, "unknown layer kind");
}

namespace {

float activate(const FloatLayer& l, float v) {
  switch (l.act) {
    case model::ActFunction::None: return v;
    case model::ActFunction::Relu: return std::min(std::max(v, 0.0f), l.clip_hi);
    case model::ActFunction::Sigmoid: return 1.0f / (1.0f + std::exp(-v));
    case model::ActFunction::Tanh: return std::tanh(v);
  }
  return v;
}

void pool(const FloatLayer& l, const Shape& is, const float* x, const Shape& os, float* y) {
  const std::size_t H = is[0], W = is[1], C = is[2];
  const bool max = l.kind == LayerKind::MaxPool2d;
  // Average pooling counts padded positions (PyTorch's count_include_pad).
  const float window = static_cast<float>(l.kernel_h * l.kernel_w);
  for (std::size_t oy = 0; oy < os[0]; ++oy)
    for (std::size_t ox = 0; ox < os[1]; ++ox)
      for (std::size_t c = 0; c < C; ++c) {
        float best = -std::numeric_limits<float>::infinity(), sum = 0.0f;
        for (unsigned dy = 0; dy < l.kernel_h; ++dy) {
          const long iy = static_cast<long>(oy * l.stride_h + dy) - l.pad_top;
          if (iy < 0 || iy >= static_cast<long>(H)) continue;
          for (unsigned dx = 0; dx < l.kernel_w; ++dx) {
            const long ix = static_cast<long>(ox * l.stride_w + dx) - l.pad_left;
            if (ix < 0 || ix >= static_cast<long>(W)) continue;
            const float v = x[(static_cast<std::size_t>(iy) * W + static_cast<std::size_t>(ix)) * C + c];
            best = std::max(best, v);
            sum += v;
          }
        }
        y[(oy * os[1] + ox) * C + c] = max ? best : sum / window;
      }
}

ConvGeom conv_geom(const FloatLayer& l, const Shape& is, const Shape& os) {
  ConvGeom g;
  g.h = is[0], g.w = is[1], g.c = is[2];
  g.oh = os[0], g.ow = os[1], g.co = os[2];
  g.kh = l.kernel_h, g.kw = l.kernel_w;
  g.stride_h = l.stride_h, g.stride_w = l.stride_w;
  g.pad_top = l.pad_top, g.pad_left = l.pad_left;
  g.groups = l.groups;
  return g;
}

// One sample of a layer other than conv2d and dense.
void run_sample(const FloatLayer& l, const Shape& is, const Shape& os, const std::vector<const float*>& in,
                float* y) {
  const float* x = in[0];
  switch (l.kind) {
    case LayerKind::MaxPool2d:
    case LayerKind::AvgPool2d: pool(l, is, x, os, y); return;
    case LayerKind::GlobalAvgPool2d: {
      const std::size_t P = is[0] * is[1], C = is[2];
      for (std::size_t c = 0; c < C; ++c) {
        double s = 0.0;
        for (std::size_t p = 0; p < P; ++p) s += x[p * C + c];
        y[c] = static_cast<float>(s / static_cast<double>(P));
      }
      return;
    }
    case LayerKind::Add:
      for (std::size_t i = 0, n = count(os); i < n; ++i) y[i] = x[i] + in[1][i];
      return;
    case LayerKind::Flatten:
      std::copy(x, x + count(os), y);  // NHWC is already the flattened order
      return;
    case LayerKind::Mul: return;  // run_layer's
    case LayerKind::Affine:
      for (std::size_t i = 0, n = count(os); i < n; ++i) {
        float v = static_cast<float>(l.alpha * static_cast<double>(x[i]) + l.beta);
        if (l.unit_range) v = std::min(std::max(v, 0.0f), 1.0f);
        y[i] = v;
      }
      return;
    case LayerKind::Upsample:  // nearest: (oy, ox) reads (oy / s_h, ox / s_w)
      for (std::size_t oy = 0; oy < os[0]; ++oy)
        for (std::size_t ox = 0; ox < os[1]; ++ox)
          std::copy_n(x + ((oy / l.stride_h) * is[1] + ox / l.stride_w) * is[2], is[2], y + (oy * os[1] + ox) * is[2]);
      return;
    case LayerKind::LayerNorm: {  // over the last axis, in double; no affine
      const std::size_t d = is.back();
      for (std::size_t t0 = 0, n = count(os); t0 < n; t0 += d) {
        double mean = 0.0, var = 0.0;
        for (std::size_t k = 0; k < d; ++k) mean += x[t0 + k];
        mean /= static_cast<double>(d);
        for (std::size_t k = 0; k < d; ++k) var += (x[t0 + k] - mean) * (x[t0 + k] - mean);
        const double inv = 1.0 / std::sqrt(var / static_cast<double>(d) + l.eps);
        for (std::size_t k = 0; k < d; ++k) y[t0 + k] = static_cast<float>((x[t0 + k] - mean) * inv);
      }
      return;
    }
    case LayerKind::Gelu:  // the exact form: x (1 + erf(x / sqrt 2)) / 2
      for (std::size_t i = 0, n = count(os); i < n; ++i) {
        const double v = x[i];
        y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
      }
      return;
    case LayerKind::TokenBias: {  // prefix_tokens zero tokens, then x, plus the bias
      const std::size_t front = l.prefix_tokens * os[2];
      for (std::size_t i = 0, n = count(os); i < n; ++i) y[i] = (i < front ? 0.0f : x[i - front]) + l.bias[i];
      return;
    }
    case LayerKind::Dense:
    case LayerKind::Conv2d:
    case LayerKind::Concat: return;  // run_layer's
    // --- attention ---
    case LayerKind::MatMul: return;  // run_layer's
    case LayerKind::Softmax: {  // over the last axis, in double, from the maximum
      const std::size_t c = os.back(), n = count(os);
      for (std::size_t t = 0; t < n; t += c) {
        const float m = *std::max_element(x + t, x + t + c);
        double sum = 0.0;
        for (std::size_t i = 0; i < c; ++i) sum += std::exp(static_cast<double>(x[t + i] - m));
        for (std::size_t i = 0; i < c; ++i) y[t + i] = static_cast<float>(std::exp(static_cast<double>(x[t + i] - m)) / sum);
      }
      return;
    }
  }
}

// Layer `l` on `n` samples: `in` the whole chunks of its inputs, `y` its output's.
void run_layer(const FloatLayer& l, const std::vector<Shape>& shapes, const Shape& os,
               const std::vector<const float*>& in, float* y, std::size_t n, unsigned threads) {
  const Shape& is = shapes[l.inputs[0]];
  const float* bias = l.bias.empty() ? nullptr : l.bias.data();
  if (l.kind == LayerKind::Dense && l.inputs.size() == 1 && l.pixel < 0) {
    dense_rows(in[0], n, l.weight_shape[0], l.weight_shape[1], l.weights.data(), bias, y, threads);
  } else if (l.kind == LayerKind::Dense) {
    // Several inputs, or one pixel of a map: each sample's K features gathered first.
    const std::size_t k = l.weight_shape[0];
    std::vector<float> rows(n * k);
    for (std::size_t s = 0; s < n; ++s) {
      std::size_t at = 0;
      for (std::size_t j = 0; j < l.inputs.size(); ++j) {
        const Shape& xs = shapes[l.inputs[j]];
        const std::size_t kj = j == 0 && l.pixel >= 0 ? xs.back() : count(xs);
        const float* from = in[j] + s * count(xs) + (j == 0 && l.pixel >= 0 ? static_cast<std::size_t>(l.pixel) * kj : 0);
        std::copy(from, from + kj, rows.data() + s * k + at);
        at += kj;
      }
    }
    dense_rows(rows.data(), n, k, l.weight_shape[1], l.weights.data(), bias, y, threads);
  } else if (l.kind == LayerKind::Conv2d) {
    conv2d_nhwc(conv_geom(l, is, os), in[0], l.weights.data(), bias, y, threads, n);
  } else if (l.kind == LayerKind::Mul) {
    // b the same shape as a, or one value per channel of each sample.
    const std::size_t per_a = count(os), per_b = count(shapes[l.inputs[1]]), c = os.back();
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t i = 0; i < per_a; ++i)
        y[s * per_a + i] = in[0][s * per_a + i] * in[1][s * per_b + (per_b == per_a ? i : i % c)];
  } else if (l.kind == LayerKind::MatMul) {
    // --- attention: y[i][j] = alpha * sum_f a[i][f] * B[f][j] in double, B[f][j] token j's feature f
    // (transpose_b) or token f's feature j ---
    const std::size_t tokens = is[0] * is[1], k = is[2], cols = os.back(), per_b = count(shapes[l.inputs[1]]);
    for (std::size_t s = 0; s < n; ++s)
      for (std::size_t i = 0; i < tokens; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          double acc = 0.0;
          for (std::size_t f = 0; f < k; ++f)
            acc += static_cast<double>(in[0][s * tokens * k + i * k + f]) *
                   in[1][s * per_b + (l.transpose_b ? j * k + f : f * cols + j)];
          y[(s * tokens + i) * cols + j] = static_cast<float>(l.alpha * acc);
        }
  } else if (l.kind == LayerKind::Concat) {
    // Row r of every input (all axes but the last) side by side.
    const std::size_t c_out = os.back(), rows = n * (count(os) / c_out);
    std::size_t at = 0;
    for (std::size_t k = 0; k < l.inputs.size(); ++k) {
      const std::size_t ck = shapes[l.inputs[k]].back();
      for (std::size_t r = 0; r < rows; ++r) std::copy(in[k] + r * ck, in[k] + (r + 1) * ck, y + r * c_out + at);
      at += ck;
    }
  } else {
    parallel_rows(n, threads, 1, [&](std::size_t first, std::size_t count_n) {
      for (std::size_t s = first; s < first + count_n; ++s) {
        std::vector<const float*> ins;
        for (std::size_t k = 0; k < in.size(); ++k) ins.push_back(in[k] + s * count(shapes[l.inputs[k]]));
        run_sample(l, is, os, ins, y + s * count(os));
      }
    });
  }
  const bool activates = l.kind == LayerKind::Dense || l.kind == LayerKind::Conv2d || l.kind == LayerKind::Add ||
                         l.kind == LayerKind::Mul || l.kind == LayerKind::Affine;
  if (!activates || (l.act == model::ActFunction::None)) return;
  parallel_rows(n * count(os), threads, 1 << 16, [&](std::size_t first, std::size_t len) {
    for (std::size_t i = first; i < first + len; ++i) y[i] = activate(l, y[i]);
  });
}

// The range of `len` values, over threads.
Range range_of(const float* v, std::size_t len, unsigned threads) {
  std::vector<Range> parts(std::max(1u, threads ? threads : model::default_gemm_threads()));
  std::size_t next = 0;
  std::mutex lock;
  parallel_rows(len, static_cast<unsigned>(parts.size()), 1 << 16, [&](std::size_t first, std::size_t n) {
    Range r;
    for (std::size_t i = first; i < first + n; ++i) r.add(v[i]);
    const std::lock_guard<std::mutex> hold(lock);
    parts[next++] = r;
  });
  Range all;
  for (const Range& r : parts) all.merge(r);
  return all;
}

// Per tensor id, the last layer that reads it (the output: past the end).
std::vector<std::size_t> last_readers(const FloatNet& net) {
  std::vector<std::size_t> last(net.layers.size() + 1, 0);
  for (std::size_t i = 0; i < net.layers.size(); ++i)
    for (std::size_t t : net.layers[i].inputs) last[t] = i;
  last.back() = net.layers.size();
  return last;
}

// The samples a chunk holds: the budget over one sample's peak of live tensors.
std::size_t chunk_samples(const FloatNet& net, const std::vector<Shape>& shapes, std::size_t batch,
                          std::size_t budget) {
  const std::vector<std::size_t> last = last_readers(net);
  std::size_t live = count(shapes[0]), peak = live;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    live += count(shapes[i + 1]);
    peak = std::max(peak, live);
    for (std::size_t t = 0; t <= i; ++t)
      if (last[t] == i) live -= count(shapes[t]);
  }
  const std::size_t per_sample = std::max<std::size_t>(peak * sizeof(float), 1);
  return std::clamp<std::size_t>(budget / per_sample, 1, batch);
}

}  // namespace

std::vector<std::vector<std::size_t>> float_shapes(const FloatNet& net) {
  std::vector<Shape> shapes{net.input_shape};
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    for (std::size_t t : net.layers[i].inputs)
      if (t > i) fail(net.layers[i], "reads a tensor that is not computed before it");
    shapes.push_back(float_layer_shape(net.layers[i], shapes));
  }
  return shapes;
}

FloatRun run_float(const FloatNet& net, const std::vector<float>& input, std::size_t batch,
                   const FloatOptions& options) {
  if (net.layers.empty()) throw CompileError("the network has no layers");
  const std::vector<Shape> shapes = float_shapes(net);
  const std::size_t in_count = count(net.input_shape);
  if (input.size() != batch * in_count) throw CompileError("the input does not match the network's input shape");
  FloatRun run;
  run.output_shape = shapes.back();
  const std::size_t out_count = count(run.output_shape);
  run.output.resize(batch * out_count);
  run.ranges.resize(shapes.size());
  const std::vector<std::size_t> last = last_readers(net);
  const std::size_t chunk = chunk_samples(net, shapes, batch, options.memory_budget);
  const std::size_t layers = net.layers.size();
  std::vector<std::vector<float>> t(shapes.size());
  for (std::size_t first = 0; first < batch; first += chunk) {
    const std::size_t n = std::min(chunk, batch - first);
    t[0].assign(input.begin() + static_cast<std::ptrdiff_t>(first * in_count),
                input.begin() + static_cast<std::ptrdiff_t>((first + n) * in_count));
    run.ranges[0].merge(range_of(t[0].data(), t[0].size(), options.threads));
    for (std::size_t i = 0; i < layers; ++i) {
      const FloatLayer& l = net.layers[i];
      std::vector<const float*> in;
      for (std::size_t id : l.inputs) in.push_back(t[id].data());
      t[i + 1].resize(n * count(shapes[i + 1]));
      run_layer(l, shapes, shapes[i + 1], in, t[i + 1].data(), n, options.threads);
      run.ranges[i + 1].merge(range_of(t[i + 1].data(), t[i + 1].size(), options.threads));
      for (std::size_t id = 0; id <= i; ++id)
        if (last[id] == i) std::vector<float>().swap(t[id]);  // its last reader has run
      if (options.progress) options.progress(first, n, batch, i, layers);
    }
    std::copy(t.back().begin(), t.back().end(), run.output.begin() + static_cast<std::ptrdiff_t>(first * out_count));
  }
  return run;
}

}  // namespace tpu::onnximport
