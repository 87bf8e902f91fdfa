// The quantizer (quantize_float.h): a FloatNet and its calibrated ranges
// (or a QDQ model's own quantization) -> compiler::Network, layer by layer,
// with the tensors a concat joins sharing one quantization.
#include "onnx/quantize_float.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "compiler/attention.h"

namespace tpu::onnximport {
namespace {

using compiler::LayerKind;
using compiler::QuantParams;

// Round half to even (the default rounding mode), as NumPy's np.round.
double round_even(double v) { return std::nearbyint(v); }

}  // namespace

QuantParams activation_quant(double lo, double hi) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  QuantParams q;
  q.scale = hi > lo ? (hi - lo) / 255.0 : 1.0;
  q.zero_point = static_cast<std::int32_t>(std::clamp(round_even(-128.0 - lo / q.scale), -128.0, 127.0));
  return q;
}

std::vector<std::int8_t> quantize_weights(const std::vector<float>& w, double& scale) {
  double m = 0.0;
  for (float v : w) {
    // A NaN or infinity would make every rounding below meaningless (and its
    // conversion to int8 undefined).
    if (!std::isfinite(v)) throw compiler::CompileError("the weights are not all finite");
    m = std::max(m, std::fabs(static_cast<double>(v)));
  }
  scale = m > 0.0 ? m / 127.0 : 1.0;
  std::vector<std::int8_t> q(w.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    q[i] = static_cast<std::int8_t>(std::clamp(round_even(static_cast<double>(w[i]) / scale), -127.0, 127.0));
  return q;
}

namespace {

// Concat groups (docs/onnx.md, "Calibration"): the tensors a concat joins
// (its inputs and output) and those a layer keeping its input's
// quantization joins (max-pool, flatten, average pools without their own)
// share one quantization, from the range over all of them, so that every
// concat copies exactly (all factors 127). Only groups holding a concat,
// and only when each member's quantization can be chosen (not the network
// input, not a sigmoid or tanh output); otherwise each tensor its own.
class QuantGroups {
 public:
  QuantGroups(const FloatNet& fnet, const std::vector<Range>& ranges);

  // The range shared by tensor t's group; nullptr when t has its own.
  const Range* shared_range(std::size_t t) {
    const auto it = range_.find(find(t));
    return it != range_.end() ? &it->second : nullptr;
  }

 private:
  std::size_t find(std::size_t t) {
    while (parent_[t] != t) t = parent_[t] = parent_[parent_[t]];
    return t;
  }
  void unite(std::size_t a, std::size_t b) { parent_[find(a)] = find(b); }

  std::vector<std::size_t> parent_;  // union-find over tensor ids
  std::map<std::size_t, Range> range_;  // per root of a group that shares its quantization
};

QuantGroups::QuantGroups(const FloatNet& fnet, const std::vector<Range>& ranges) {
  const std::size_t tensors = fnet.layers.size() + 1;
  parent_.resize(tensors);
  for (std::size_t t = 0; t < tensors; ++t) parent_[t] = t;
  if (!fnet.qdq) {
    for (std::size_t i = 0; i < fnet.layers.size(); ++i) {
      const FloatLayer& f = fnet.layers[i];
      const bool keeps = f.keep_quant || f.kind == LayerKind::MaxPool2d || f.kind == LayerKind::Flatten ||
                         f.kind == LayerKind::Upsample ||
                         f.kind == LayerKind::AvgPool2d || f.kind == LayerKind::GlobalAvgPool2d;
      if (f.kind == LayerKind::Concat)
        for (std::size_t t : f.inputs) unite(t, i + 1);
      else if (keeps)
        unite(f.inputs.at(0), i + 1);
    }
    for (const std::vector<std::size_t>& group : fnet.tied)
      for (std::size_t t : group) unite(t, group.front());
  }
  std::map<std::size_t, bool> has_concat, settable;
  if (!fnet.qdq)
    for (const std::vector<std::size_t>& group : fnet.tied)
      if (!group.empty()) has_concat[find(group.front())] = true;  // shared like a concat's
  for (std::size_t t = 0; t < tensors; ++t) {
    const std::size_t r = find(t);
    bool ok = t > 0;
    if (ok) {
      const FloatLayer& f = fnet.layers[t - 1];
      if (f.kind == LayerKind::Concat) has_concat[r] = true;
      if (f.act == model::ActFunction::Sigmoid || f.act == model::ActFunction::Tanh || f.unit_range) ok = false;
      if (f.kind == LayerKind::Softmax) ok = false;  // fixed output (attention.h)
      if ((f.kind == LayerKind::Conv2d || f.kind == LayerKind::Dense) && t == fnet.layers.size() &&
          f.act == model::ActFunction::None)
        ok = false;  // int32 logits
    }
    settable.emplace(r, true);
    settable[r] = settable[r] && ok;
  }
  for (std::size_t t = 0; t < tensors; ++t) {
    const std::size_t r = find(t);
    if (!has_concat[r] || !settable[r]) continue;
    const Range& x = ranges.at(t);
    if (!x.all_finite) continue;  // range_quant reports it
    Range& g = range_[r];
    if (!x.seen) continue;
    if (!g.seen) g = x;
    g.lo = std::min(g.lo, x.lo);
    g.hi = std::max(g.hi, x.hi);
  }
}

// The fields a layer keeps from its float form: everything but the
// weights, biases and quantization.
compiler::Layer layer_fields(const FloatLayer& f) {
  compiler::Layer l;
  l.kind = f.kind;
  l.name = f.name;
  l.inputs = f.inputs;
  l.pixel = f.pixel;
  l.act = f.act;
  l.eps = f.eps;
  l.kernel_h = f.kernel_h;
  l.kernel_w = f.kernel_w;
  l.stride_h = f.stride_h;
  l.stride_w = f.stride_w;
  l.pad_top = f.pad_top;
  l.pad_bottom = f.pad_bottom;
  l.pad_left = f.pad_left;
  l.pad_right = f.pad_right;
  l.groups = f.groups;
  l.alpha = f.alpha;
  l.beta = f.beta;
  l.transpose_b = f.transpose_b;
  l.prefix_tokens = f.prefix_tokens;
  return l;
}

// A dense or conv2d layer's int8 weights (a QDQ model's: its integers back
// from scale * q) and int32 biases at the accumulator scale in.scale *
// weight_scale; returns that scale.
// A dense layer of several inputs (docs/quantization.md, "Recurrent layers"):
// one accumulator scale S = max over inputs j of max|W_j| * s_j / 127, input
// j's weight rows quantized at S / s_j (so that the largest is 127), and
// weight_scale S / s_0. `rows` and `scales` per input; returns S.
double quantize_joined_weights(const FloatLayer& f, const std::vector<std::size_t>& rows,
                               const std::vector<double>& scales, compiler::Layer& l) {
  const std::size_t nout = f.weight_shape[1];
  double acc = 0.0;
  for (std::size_t j = 0, k0 = 0; j < rows.size(); k0 += rows[j], ++j)
    for (std::size_t k = k0 * nout; k < (k0 + rows[j]) * nout; ++k) {
      if (!std::isfinite(f.weights[k])) throw compiler::CompileError("the weights are not all finite");
      acc = std::max(acc, std::fabs(static_cast<double>(f.weights[k])) * scales[j] / 127.0);
    }
  if (!(acc > 0.0)) acc = scales[0];
  l.weights.resize(f.weights.size());
  for (std::size_t j = 0, k0 = 0; j < rows.size(); k0 += rows[j], ++j) {
    const double wscale = acc / scales[j];
    for (std::size_t k = k0 * nout; k < (k0 + rows[j]) * nout; ++k)
      l.weights[k] = static_cast<std::int8_t>(
          std::clamp(round_even(static_cast<double>(f.weights[k]) / wscale), -127.0, 127.0));
  }
  l.weight_scale = acc / scales[0];
  return acc;
}

double quantize_gemm_layer(const FloatLayer& f, const QuantParams& in, compiler::Layer& l,
                           const std::vector<std::size_t>& rows, const std::vector<double>& scales) {
  l.weight_shape = f.weight_shape;
  try {
    if (rows.size() > 1) {
      if (f.weight_scale > 0.0) throw compiler::CompileError("a dense layer of several inputs needs float weights");
      quantize_joined_weights(f, rows, scales, l);
    } else if (f.weight_scale > 0.0) {
      l.weight_scale = f.weight_scale;
      l.weights.resize(f.weights.size());
      for (std::size_t k = 0; k < f.weights.size(); ++k)
        l.weights[k] = static_cast<std::int8_t>(
            std::clamp(round_even(static_cast<double>(f.weights[k]) / f.weight_scale), -128.0, 127.0));
    } else {
      l.weights = quantize_weights(f.weights, l.weight_scale);
    }
  } catch (const compiler::CompileError& e) {
    throw compiler::CompileError(fmt::format("layer '{}': {}", f.name, e.what()));
  }
  const double acc_scale = in.scale * l.weight_scale;
  for (float b : f.bias) {
    if (!std::isfinite(b))
      throw compiler::CompileError(fmt::format("layer '{}': the biases are not all finite", f.name));
    l.bias.push_back(static_cast<std::int32_t>(
        std::clamp(round_even(static_cast<double>(b) / acc_scale), -2147483648.0, 2147483647.0)));
  }
  return acc_scale;
}

}  // namespace

compiler::Network quantize_float(const FloatNet& fnet, const std::vector<Range>& ranges) {
  compiler::Network net;
  net.name = fnet.name;
  net.input_shape = fnet.input_shape;
  const auto range_quant = [&](std::size_t id, bool relu) {
    if (fnet.qdq) return fnet.tensor_quant.at(id).quant;  // the model's own
    const Range& r = ranges.at(id);
    if (!r.all_finite)
      throw compiler::CompileError(fmt::format(
          "the calibration set gives {} values that are not finite",
          id == 0 ? std::string("the input") : fmt::format("layer '{}'", fnet.layers[id - 1].name)));
    return activation_quant(relu ? 0.0 : r.lo, r.hi);
  };
  net.input = range_quant(0, false);
  QuantGroups groups(fnet, ranges);
  // --- attention: the tensors a matmul reads as B ---
  std::set<std::size_t> symmetric;
  for (const FloatLayer& f : fnet.layers)
    if (f.kind == LayerKind::MatMul && f.inputs.size() == 2) symmetric.insert(f.inputs[1]);
  // Every tensor's shape, for the K rows of dense layers of several inputs only.
  std::vector<std::vector<std::size_t>> shapes;
  std::vector<QuantParams> quant{net.input};  // per tensor id
  for (std::size_t i = 0; i < fnet.layers.size(); ++i) {
    const FloatLayer& f = fnet.layers[i];
    compiler::Layer l = layer_fields(f);
    const QuantParams in = quant.at(f.inputs.at(0));
    const bool relu = f.act == model::ActFunction::Relu;
    const bool table = f.act == model::ActFunction::Sigmoid || f.act == model::ActFunction::Tanh;
    QuantParams out = in;
    // A layer whose output only a concat reads gets the concat's output
    // quantization, so that the concat copies it exactly (docs/onnx.md).
    const auto output_quant = [&](bool act_relu) {
      const Range* shared = groups.shared_range(i + 1);
      // --- attention: a matmul's second operand is symmetric (max|x| / 127, zero point 0) ---
      if (!fnet.qdq && symmetric.count(i + 1)) {
        const Range& r = shared ? *shared : ranges.at(i + 1);
        const double m = std::max(std::fabs(static_cast<double>(r.lo)), std::fabs(static_cast<double>(r.hi)));
        return QuantParams{m > 0.0 ? m / 127.0 : 1.0, 0};
      }
      return shared ? activation_quant(shared->lo, shared->hi) : range_quant(i + 1, act_relu);
    };
    switch (f.kind) {
      case LayerKind::Dense:
      case LayerKind::Conv2d: {
        std::vector<std::size_t> rows{f.weight_shape.empty() ? 0 : f.weight_shape[0]};
        std::vector<double> scales{in.scale};
        if (f.kind == LayerKind::Dense && f.inputs.size() > 1) {
          if (shapes.empty()) shapes = float_shapes(fnet);
          rows.clear();
          scales.clear();
          for (std::size_t j = 0; j < f.inputs.size(); ++j) {
            const auto& shape = shapes[f.inputs[j]];
            rows.push_back(j == 0 && f.pixel >= 0 ? shape.back() : shape[0]);
            scales.push_back(quant.at(f.inputs[j]).scale);
          }
        }
        const double acc_scale = quantize_gemm_layer(f, in, l, rows, scales);
        if (f.keep_quant) {
          out = in;  // 0/1 weights at scale 1/127: m = 1/127 on 127 * (x - z), an exact copy
        } else if (fnet.qdq ? !fnet.tensor_quant.at(i + 1).set
                     : i + 1 == fnet.layers.size() && f.act == model::ActFunction::None) {
          l.int32_output = true;
          out = {acc_scale, 0};
        } else if (table) {
          out = {compiler::kSigmoidTanhOutputScale, 0};
        } else {
          out = output_quant(relu);
        }
        l.output = out;
        break;
      }
      case LayerKind::AvgPool2d:
      case LayerKind::GlobalAvgPool2d:
        if (fnet.qdq) {
          out = range_quant(i + 1, false);
          l.output = out;
        } else {
          l.output_is_input = true;
        }
        break;
      case LayerKind::Add:
        out = output_quant(relu);
        l.output = out;
        break;
      case LayerKind::Concat:
        out = output_quant(false);
        l.output = out;
        break;
      case LayerKind::Mul:
      case LayerKind::Affine:
        if (table)
          out = {compiler::kSigmoidTanhOutputScale, 0};
        else if (f.unit_range)
          out = {1.0 / 255.0, -128};  // [0, 1]: the saturation at both ends is the clamp
        else
          out = output_quant(relu);
        l.output = out;
        break;
      case LayerKind::MaxPool2d:
      case LayerKind::Upsample:
      case LayerKind::Flatten:
        break;
      // --- attention ---
      case LayerKind::Softmax:
        out = compiler::kSoftmaxOutput;
        l.output = out;
        break;
      case LayerKind::MatMul:
        out = output_quant(false);
        l.output = out;
        break;
      case LayerKind::LayerNorm:  // the activation unit's (docs/quantization.md, "Transformer layers")
      case LayerKind::Gelu:
        out = output_quant(false);
        l.output = out;
        break;
      case LayerKind::TokenBias:  // the constants at the input's scale (docs/quantization.md)
        for (float b : f.bias) {
          const double v = std::round(static_cast<double>(b) / in.scale);
          if (!(std::fabs(v) <= double(1 << 30)))
            throw compiler::CompileError(fmt::format(
                "layer '{}': a constant of {} is past 2^30 steps of the input's scale {} (docs/quantization.md, "
                "\"Constant tokens and positions\")", f.name, b, in.scale));
          l.bias.push_back(static_cast<std::int32_t>(v));
        }
        out = output_quant(false);
        l.output = out;
        break;
    }
    quant.push_back(out);
    net.layers.push_back(std::move(l));
  }
  return net;
}

}  // namespace tpu::onnximport
