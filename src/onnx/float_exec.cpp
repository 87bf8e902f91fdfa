#include "onnx/float_exec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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
    case LayerKind::Dense:
      if (in.size() != 1 || l.weight_shape.size() != 2 || l.weight_shape[0] != in[0])
        fail(l, "dense weights do not match the input");
      return {l.weight_shape[1]};
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

// One sample of a conv2d, NHWC in and out, weights HWIO; the innermost loop
// runs over output channels, contiguous in both weights and accumulators.
void conv(const FloatLayer& l, const Shape& is, const float* x, const Shape& os, float* y) {
  const std::size_t H = is[0], W = is[1], C = is[2], OH = os[0], OW = os[1], CO = os[2];
  const bool dw = l.groups != 1;
  std::vector<float> acc(CO);
  for (std::size_t oy = 0; oy < OH; ++oy)
    for (std::size_t ox = 0; ox < OW; ++ox) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (unsigned dy = 0; dy < l.kernel_h; ++dy) {
        const long iy = static_cast<long>(oy * l.stride_h + dy) - l.pad_top;
        if (iy < 0 || iy >= static_cast<long>(H)) continue;
        for (unsigned dx = 0; dx < l.kernel_w; ++dx) {
          const long ix = static_cast<long>(ox * l.stride_w + dx) - l.pad_left;
          if (ix < 0 || ix >= static_cast<long>(W)) continue;
          const float* px = x + (static_cast<std::size_t>(iy) * W + static_cast<std::size_t>(ix)) * C;
          const float* wt = l.weights.data() + (dy * l.kernel_w + dx) * (dw ? 1 : C) * CO;
          if (dw) {
            for (std::size_t c = 0; c < CO; ++c) acc[c] += px[c] * wt[c];
          } else {
            for (std::size_t ci = 0; ci < C; ++ci) {
              const float v = px[ci];
              const float* wr = wt + ci * CO;
              for (std::size_t co = 0; co < CO; ++co) acc[co] += v * wr[co];
            }
          }
        }
      }
      float* out = y + (oy * OW + ox) * CO;
      for (std::size_t co = 0; co < CO; ++co)
        out[co] = activate(l, acc[co] + (l.bias.empty() ? 0.0f : l.bias[co]));
    }
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

void run_layer(const FloatLayer& l, const std::vector<Shape>& shapes, const Shape& os,
               const std::vector<const float*>& in, float* y) {
  const Shape& is = shapes[l.inputs[0]];
  const float* x = in[0];
  switch (l.kind) {
    case LayerKind::Dense: {
      const std::size_t K = l.weight_shape[0], N = l.weight_shape[1];
      std::vector<float> acc(N, 0.0f);
      for (std::size_t k = 0; k < K; ++k) {
        const float v = x[k];
        const float* wr = l.weights.data() + k * N;
        for (std::size_t n = 0; n < N; ++n) acc[n] += v * wr[n];
      }
      for (std::size_t n = 0; n < N; ++n) y[n] = activate(l, acc[n] + (l.bias.empty() ? 0.0f : l.bias[n]));
      return;
    }
    case LayerKind::Conv2d: conv(l, is, x, os, y); return;
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
      for (std::size_t i = 0, n = count(os); i < n; ++i) y[i] = activate(l, x[i] + in[1][i]);
      return;
    case LayerKind::Flatten:
      std::copy(x, x + count(os), y);  // NHWC is already the flattened order
      return;
  }
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

FloatRun run_float(const FloatNet& net, const std::vector<float>& input, std::size_t batch) {
  if (net.layers.empty()) throw CompileError("the network has no layers");
  const std::vector<Shape> shapes = float_shapes(net);
  const std::size_t in_count = count(net.input_shape);
  if (input.size() != batch * in_count) throw CompileError("the input does not match the network's input shape");
  FloatRun run;
  run.output_shape = shapes.back();
  const std::size_t out_count = count(run.output_shape);
  run.output.resize(batch * out_count);
  run.ranges.resize(shapes.size());
  // One sample at a time: every tensor of one sample stays in memory.
  std::vector<std::vector<float>> t(shapes.size());
  for (std::size_t n = 0; n < batch; ++n) {
    t[0].assign(input.begin() + static_cast<std::ptrdiff_t>(n * in_count),
                input.begin() + static_cast<std::ptrdiff_t>((n + 1) * in_count));
    for (std::size_t i = 0; i < net.layers.size(); ++i) {
      const FloatLayer& l = net.layers[i];
      std::vector<const float*> in;
      for (std::size_t id : l.inputs) in.push_back(t[id].data());
      t[i + 1].assign(count(shapes[i + 1]), 0.0f);
      run_layer(l, shapes, shapes[i + 1], in, t[i + 1].data());
    }
    for (std::size_t id = 0; id < t.size(); ++id)
      for (float v : t[id]) run.ranges[id].add(v);
    std::copy(t.back().begin(), t.back().end(), run.output.begin() + static_cast<std::ptrdiff_t>(n * out_count));
  }
  return run;
}

}  // namespace tpu::onnximport
