#include "onnx/quantize_float.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

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
  // Tensors read by one concat alone (and by nothing else), not in a QDQ
  // model: tensor id -> the concat's tensor id.
  std::map<std::size_t, std::size_t> concat_of;
  if (!fnet.qdq) {
    std::map<std::size_t, int> readers;
    for (const FloatLayer& f : fnet.layers)
      for (std::size_t t : f.inputs) ++readers[t];
    for (std::size_t i = 0; i < fnet.layers.size(); ++i)
      if (fnet.layers[i].kind == LayerKind::Concat)
        for (std::size_t t : fnet.layers[i].inputs)
          if (t > 0 && readers[t] == 1) concat_of[t] = i + 1;
  }
  std::vector<QuantParams> quant{net.input};  // per tensor id
  for (std::size_t i = 0; i < fnet.layers.size(); ++i) {
    const FloatLayer& f = fnet.layers[i];
    compiler::Layer l;
    l.kind = f.kind;
    l.name = f.name;
    l.inputs = f.inputs;
    l.act = f.act;
    l.kernel_h = f.kernel_h;
    l.kernel_w = f.kernel_w;
    l.stride_h = f.stride_h;
    l.stride_w = f.stride_w;
    l.pad_top = f.pad_top;
    l.pad_bottom = f.pad_bottom;
    l.pad_left = f.pad_left;
    l.pad_right = f.pad_right;
    l.groups = f.groups;
    const QuantParams in = quant.at(f.inputs.at(0));
    const bool relu = f.act == model::ActFunction::Relu;
    QuantParams out = in;
    // A layer whose output only a concat reads gets the concat's output
    // quantization, so that the concat copies it exactly (docs/onnx.md).
    const auto output_quant = [&](bool act_relu) {
      const auto it = concat_of.find(i + 1);
      return it != concat_of.end() ? range_quant(it->second, false) : range_quant(i + 1, act_relu);
    };
    switch (f.kind) {
      case LayerKind::Dense:
      case LayerKind::Conv2d: {
        l.weight_shape = f.weight_shape;
        try {
          if (f.weight_scale > 0.0) {
            // A QDQ model's weights: the integers back from scale * q.
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
        if (fnet.qdq ? !fnet.tensor_quant.at(i + 1).set
                     : i + 1 == fnet.layers.size() && f.act == model::ActFunction::None) {
          l.int32_output = true;
          out = {acc_scale, 0};
        } else if (f.act == model::ActFunction::Sigmoid || f.act == model::ActFunction::Tanh) {
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
        out = range_quant(i + 1, false);
        l.output = out;
        break;
      case LayerKind::MaxPool2d:
      case LayerKind::Flatten:
        break;
    }
    quant.push_back(out);
    net.layers.push_back(std::move(l));
  }
  return net;
}

}  // namespace tpu::onnximport
