// QDQ nodes (importer.h; docs/onnx.md, "QDQ models"): QuantizeLinear and
// DequantizeLinear of constants are folded into Consts (the weights' and
// biases' integers stay recoverable); of computed tensors they set the
// tensor's quantization (tq_, the model's scale and zero point, uint8 as
// int8 - 128) and move its Value through QState Float -> Int -> Deq. A Cast
// of the integers to their own type passes them on. qdq_weights gives a
// Conv, Gemm or MatMul its weights as tpu-sim computes with them.
#include "onnx/importer.h"

#include <algorithm>
#include <cfloat>

namespace tpu::onnximport::detail {
namespace {

// A zero point in the model's own terms (uint8: 0..255).
std::int32_t model_zero(const compiler::QuantParams& q, int type) {
  return type == onnx::TensorProto::UINT8 ? q.zero_point + 128 : q.zero_point;
}

bool same_quant(const compiler::QuantParams& a, const compiler::QuantParams& b) {
  return a.zero_point == b.zero_point && std::fabs(a.scale - b.scale) <= 1e-6 * b.scale;
}

// Element i's index into `count` scales along an axis whose elements are
// `inner` apart (one scale: per tensor).
std::size_t scale_index(std::size_t i, std::size_t inner, std::size_t count) {
  return count == 1 ? 0 : (i / inner) % count;
}

constexpr const char* kPerAxisActivation =
    "per-axis quantization of a computed tensor is not supported (tpu-sim quantizes an activation with one scale "
    "and zero point)";

}  // namespace

compiler::QuantParams Importer::act_quant(const onnx::NodeProto& n, int& type) const {
  const Const& s = need_const(n, 1, "the scale");
  if (s.values.size() != 1) fail(n, kPerAxisActivation);
  compiler::QuantParams q;
  q.scale = s.values[0];
  if (!(std::isfinite(q.scale) && q.scale > 0))
    fail(n, fmt::format("scale {} is not supported (a positive finite number)", q.scale));
  double z = 0.0;
  if (has_input(n, 2)) {
    const Const& zc = need_const(n, 2, "the zero point");
    if (zc.values.size() != 1) fail(n, kPerAxisActivation);
    type = zc.type;
    z = zc.values[0];
  }
  if (type == onnx::TensorProto::UINT8) z -= 128;  // the same real values on tpu-sim's int8 grid
  else if (type != onnx::TensorProto::INT8)
    fail(n, fmt::format("{} activations are not supported (int8 or uint8)", type_name(type)));
  if (!(z >= -128 && z <= 127)) fail(n, "the zero point is out of its type's range");
  q.zero_point = static_cast<std::int32_t>(z);
  return q;
}

// Per-axis scales of a constant `x`: the axis (the node's, 1 by default)
// must have `scales` entries; returns the distance between its elements.
std::size_t Importer::scale_axis_inner(const onnx::NodeProto& n, const Const& x, std::size_t scales,
                                       std::size_t& axis_out) const {
  std::int64_t axis = attr_int(n, "axis", 1);
  const auto rank = static_cast<std::int64_t>(x.dims.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || x.dims[static_cast<std::size_t>(axis)] != static_cast<std::int64_t>(scales))
    fail(n, fmt::format("{} scales do not match axis {} of a constant of shape [{}]", scales,
                        attr_int(n, "axis", 1), fmt::join(x.dims, ", ")));
  axis_out = static_cast<std::size_t>(axis);
  std::size_t inner = 1;
  for (std::size_t d = axis_out + 1; d < x.dims.size(); ++d) inner *= static_cast<std::size_t>(x.dims[d]);
  return inner;
}

void Importer::fail_keeps_quant(const onnx::NodeProto& n, std::size_t tensor, const compiler::QuantParams& q,
                                int type, const compiler::QuantParams& in, int in_type) const {
  fail(n, fmt::format("quantizes the output of {} '{}' with scale {} and zero point {}, its input with {} and "
                      "{}: tpu-sim's max-pool and flatten keep their input's quantization",
                      layer_op_.at(tensor - 1), net_.layers[tensor - 1].name, q.scale, model_zero(q, type), in.scale,
                      model_zero(in, in_type)));
}

void Importer::quantize_linear(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  if (n.input_size() < 2) fail(n, "needs an input and a scale");
  if (is_const(n.input(0))) quantize_const(n);
  else quantize_value(n);
}

// Float weights quantized in the graph: folded, as the ONNX operator
// computes it (x / scale in float32, rounded to even, saturated).
void Importer::quantize_const(const onnx::NodeProto& n) {
  const Const x = consts_.at(n.input(0));
  const std::vector<double> scales = need_const(n, 1, "the scale").values;
  std::vector<double> zeros;
  int type = onnx::TensorProto::UINT8;
  if (has_input(n, 2)) {
    const Const& z = need_const(n, 2, "the zero point");
    zeros = z.values;
    type = z.type;
  } else {
    zeros.assign(scales.size(), 0.0);
  }
  if (type != onnx::TensorProto::INT8 && type != onnx::TensorProto::UINT8)
    fail(n, fmt::format("quantizing to {} is not supported (int8 or uint8)", type_name(type)));
  if (scales.empty() || zeros.size() != scales.size()) fail(n, "the scale and the zero point differ in size");
  std::size_t axis = 0, inner = 1;
  if (scales.size() > 1) inner = scale_axis_inner(n, x, scales.size(), axis);
  const double lo = type == onnx::TensorProto::INT8 ? -128.0 : 0.0;
  Const q;
  q.dims = x.dims;
  q.type = type;
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    const std::size_t c = scale_index(i, inner, scales.size());
    if (!(std::fabs(x.values[i]) <= FLT_MAX && scales[c] > 0 && scales[c] <= FLT_MAX))
      fail(n, "quantizes a value that is not a finite float, or with a scale that is not a positive float");
    const double v = static_cast<float>(x.values[i]) / static_cast<float>(scales[c]);
    q.values.push_back(std::clamp(round_even(v) + zeros[c], lo, lo + 255.0));
  }
  consts_[n.output(0)] = std::move(q);
}

// A computed tensor quantized: its quantization, checked against what it
// already has (a tensor is quantized once; max-pool and flatten keep their
// input's).
void Importer::quantize_value(const onnx::NodeProto& n) {
  Value x = need_value(n, 0);
  int type = onnx::TensorProto::UINT8;
  const compiler::QuantParams q = act_quant(n, type);
  if (x.state == QState::Deq) {
    if (!same_quant(q, x.q)) {
      // Layer -> Q1 -> DQ [-> Relu] -> Q2, as PyTorch exports a ReLU it could
      // not fuse (quantized::linear_relu has no ONNX export in 1.13): the
      // layer requantizes its accumulators once, to Q2. Only where Q1's
      // values go nowhere else.
      const FloatLayer* l = x.tensor > 0 ? &net_.layers[x.tensor - 1] : nullptr;
      const bool keeps = l && (l->kind == LayerKind::MaxPool2d || l->kind == LayerKind::Flatten);
      if (keeps) fail_keeps_quant(n, x.tensor, q, type, x.q, x.qtype);
      if (!l || !read_once(x.tensor))
        fail(n, fmt::format("requantizes a quantized tensor from scale {} and zero point {} to {} and {}: not "
                            "supported (tpu-sim requantizes only in a Conv, Gemm, MatMul, Add or AveragePool, once)",
                            x.q.scale, model_zero(x.q, x.qtype), q.scale, model_zero(q, type)));
      warn(n, fmt::format("requantizes the output of {} '{}'{} from scale {:.6g} and zero point {} to {:.6g} and {}: "
                          "tpu-sim requantizes the layer's accumulators once, to the second, without the first "
                          "rounding (values may differ by one)",
                          layer_op_.at(x.tensor - 1), l->name, l->act == model::ActFunction::Relu ? " after its Relu" : "",
                          x.q.scale, model_zero(x.q, x.qtype), q.scale, model_zero(q, type)));
      tq_[x.tensor] = q;
    }
  } else {
    const auto it = tq_.find(x.tensor);
    if (it != tq_.end() && !same_quant(q, it->second))
      fail(n, fmt::format("quantizes with scale {} and zero point {} a tensor already quantized with {} and {}", q.scale,
                          model_zero(q, type), it->second.scale, model_zero(it->second, type)));
    if (x.tensor > 0) {
      const FloatLayer& l = net_.layers[x.tensor - 1];
      const auto in = tq_.find(l.inputs.at(0));
      if ((l.kind == LayerKind::MaxPool2d || l.kind == LayerKind::Flatten) && in != tq_.end() &&
          !same_quant(q, in->second))
        fail_keeps_quant(n, x.tensor, q, type, in->second, type);
    }
    tq_[x.tensor] = q;
  }
  x.state = QState::Int;
  x.q = q;
  x.qtype = type;
  bind(n.output(0), x);
}

void Importer::dequantize_linear(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  if (n.input_size() < 2) fail(n, "needs an input and a scale");
  if (is_const(n.input(0))) {
    dequantize_const(n);
    return;
  }
  Value x = need_value(n, 0, false, true);
  if (x.state != QState::Int)
    fail(n, "dequantizes a computed tensor that no QuantizeLinear quantized (tpu-sim takes a float input and "
            "quantizes it)");
  int type = x.qtype;
  const compiler::QuantParams q = act_quant(n, type);
  if (type != x.qtype || !same_quant(q, x.q))
    fail(n, fmt::format("dequantizes with scale {} and zero point {} ({}) what a QuantizeLinear quantized with {} and "
                        "{} ({}): not supported",
                        q.scale, model_zero(q, type), type_name(type), x.q.scale, model_zero(x.q, x.qtype),
                        type_name(x.qtype)));
  x.state = QState::Deq;
  bind(n.output(0), x);
}

// Quantized weights or biases: their real values, (q - zero) * scale in
// float32 as the operator computes them; the integers stay recoverable.
void Importer::dequantize_const(const onnx::NodeProto& n) {
  const Const& x = consts_.at(n.input(0));
  if (x.type != onnx::TensorProto::INT8 && x.type != onnx::TensorProto::UINT8 && x.type != onnx::TensorProto::INT32)
    fail(n, fmt::format("dequantizes {} values (int8, uint8 or int32 are supported)", type_name(x.type)));
  Const d;
  d.dims = x.dims;
  d.dequantized = true;
  d.dq_node = n.name();
  d.qtype = x.type;
  d.scales = need_const(n, 1, "the scale").values;
  if (has_input(n, 2)) {
    const Const& z = need_const(n, 2, "the zero point");
    if (z.type != x.type)
      fail(n, fmt::format("the zero point is {}, the values {}", type_name(z.type), type_name(x.type)));
    d.zeros = z.values;
  } else {
    d.zeros.assign(d.scales.size(), 0.0);
  }
  if (d.scales.empty() || d.zeros.size() != d.scales.size()) fail(n, "the scale and the zero point differ in size");
  std::size_t inner = 1;
  if (d.scales.size() > 1) inner = scale_axis_inner(n, x, d.scales.size(), d.axis);
  for (double s : d.scales)
    if (!(s > 0 && s <= FLT_MAX)) fail(n, fmt::format("scale {} is not supported (a positive finite number)", s));
  for (std::size_t i = 0; i < x.values.size(); ++i) {
    const std::size_t c = scale_index(i, inner, d.scales.size());
    const float v = static_cast<float>(x.values[i] - d.zeros[c]) * static_cast<float>(d.scales[c]);
    d.values.push_back(v);
  }
  consts_[n.output(0)] = std::move(d);
}

void Importer::cast(const onnx::NodeProto& n) {
  only_attrs(n, {"to"});
  const std::int64_t to = attr_int(n, "to", 0);
  if (n.input_size() < 1) fail(n, "needs an input");
  if (is_const(n.input(0))) {
    cast_const(n, to);
    return;
  }
  const Value x = need_value(n, 0, false, true);
  if (x.state != QState::Int || to != x.qtype)
    fail(n, fmt::format("a Cast of a computed tensor to {} is not supported (only of a QuantizeLinear's integers to "
                        "their own type)", type_name(static_cast<int>(to))));
  bind(n.output(0), x);
}

// The weights of a Conv, Gemm or MatMul in a QDQ model as tpu-sim computes
// with them: symmetric int8 at one `scale` (values scale * q). Per-channel
// scales (along `out_axis`, the output channels) are re-quantized per tensor
// with a warning: the activation unit requantizes a whole layer with one
// multiplier.
Const Importer::qdq_weights(const onnx::NodeProto& n, const Const& w, std::size_t out_axis, double& scale) {
  if (!w.dequantized)
    fail(n, "the weights are float: in a QDQ model tpu-sim takes quantized weights (a DequantizeLinear of int8 "
            "values)");
  const double zero = w.qtype == onnx::TensorProto::INT8 ? 0.0 : w.qtype == onnx::TensorProto::UINT8 ? 128.0 : -1.0;
  if (zero < 0)
    fail(n, fmt::format("{} weights (DequantizeLinear '{}') are not supported (int8, or uint8 with zero point 128)",
                        type_name(w.qtype), w.dq_node));
  for (double z : w.zeros)
    if (z != zero)
      fail(n, fmt::format("the weights (DequantizeLinear '{}', {}) have zero point {}: not supported (tpu-sim's "
                          "weights are symmetric, int8 with zero point 0 or uint8 with 128: the array has no weight "
                          "zero point)", w.dq_node, type_name(w.qtype), z));
  const auto [lo, hi] = std::minmax_element(w.scales.begin(), w.scales.end());
  if (*lo == *hi) {
    scale = w.scales[0];
    return w;
  }
  if (w.axis != out_axis)
    fail(n, fmt::format("per-channel weight scales along axis {} (DequantizeLinear '{}') are not supported (only "
                        "along the output channels, axis {})", w.axis, w.dq_node, out_axis));
  double m = 0.0;
  for (double v : w.values) m = std::max(m, std::fabs(v));
  scale = m > 0 ? m / 127.0 : 1.0;
  Const out = w;
  double change = 0.0;
  for (double& v : out.values) {
    const double q = std::clamp(round_even(v / scale), -127.0, 127.0);
    const double nv = static_cast<float>(q * scale);
    change = std::max(change, std::fabs(nv - v));
    v = nv;
  }
  if (change > 0)
    warn(n, fmt::format("per-channel weight scales ({} channels, {:.3g} to {:.3g}) re-quantized to one per-tensor "
                        "scale {:.3g} (tpu-sim requantizes a layer with one multiplier): the finest channel's step "
                        "grows {:.2g} times, weights change by up to {:.3g} (docs/onnx.md measures the effect)",
                        w.scales.size(), *lo, *hi, scale, scale / *lo, change));
  return out;
}

}  // namespace tpu::onnximport::detail
