// Folding into the layer before (importer.h): a BatchNormalization into the
// weights and bias of the Conv, Gemm or MatMul before it (standalone: a
// depthwise 1x1 conv2d), Relu, Clip(0, hi), Sigmoid and Tanh into its
// activation (Relu and Clip also into an Add's; standalone: an affine layer),
// and an Add of a constant into its bias. A node folds only into a layer
// whose output it alone reads (fold_target).
#include "onnx/importer.h"

namespace tpu::onnximport::detail {

FloatLayer* Importer::fold_target(const Value& x) {
  if (x.tensor == 0 || !x.perm.empty() || !read_once(x.tensor)) return nullptr;
  return &net_.layers[x.tensor - 1];
}

// y = scale * (x - mean) / sqrt(var + eps) + bias, per channel: a = scale /
// sqrt(var + eps) and the constants it is applied with.
struct Importer::BatchNorm {
  std::vector<double> a;
  const Const* bias = nullptr;
  const Const* mean = nullptr;
};

Importer::BatchNorm Importer::batchnorm_params(const onnx::NodeProto& n, std::size_t C) const {
  const Const& scale = need_const(n, 1, "the scale");
  const Const& bias = need_const(n, 2, "the bias");
  const Const& mean = need_const(n, 3, "the mean");
  const Const& var = need_const(n, 4, "the variance");
  for (const Const* c : {&scale, &bias, &mean, &var})
    if (c->values.size() != C) fail(n, fmt::format("parameters of {} values for {} channels", c->values.size(), C));
  const double eps = attr_float(n, "epsilon", 1e-5f);
  BatchNorm bn;
  bn.bias = &bias;
  bn.mean = &mean;
  for (std::size_t c = 0; c < C; ++c) bn.a.push_back(scale.values[c] / std::sqrt(var.values[c] + eps));
  return bn;
}

void Importer::batchnorm(const onnx::NodeProto& n) {
  only_attrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
  if (attr_int(n, "training_mode", 0) != 0) fail(n, "training_mode = 1 is not supported (inference only)");
  if (attr_int(n, "spatial", 1) != 1) fail(n, "spatial = 0 is not supported");
  no_extra_outputs(n, 1);
  if (qdq_)
    fail(n, "cannot be folded in a QDQ model: it would change the quantized weights (fold it before quantizing, as "
            "torch.ao.quantization does)");
  const Value x = need_value(n, 0);
  const FloatLayer* t = fold_target(x);
  const bool can_fold = t && (t->kind == LayerKind::Conv2d || t->kind == LayerKind::Dense) &&
                        t->act == model::ActFunction::None;
  if (!can_fold && x.perm.empty() && shape(x).size() == 3) {
    // Standalone (after a Concat, as in DenseNet, or on a map other nodes
    // read too): a depthwise 1 x 1 convolution with weight a and bias
    // beta - mean * a per channel (docs/onnx.md).
    const std::size_t C = shape(x)[2];
    const BatchNorm bn = batchnorm_params(n, C);
    FloatLayer d;
    d.kind = LayerKind::Conv2d;
    d.inputs = {x.tensor};
    d.groups = static_cast<unsigned>(C);
    d.weight_shape = {1, 1, 1, C};
    for (std::size_t c = 0; c < C; ++c) {
      d.weights.push_back(static_cast<float>(bn.a[c]));
      d.bias.push_back(static_cast<float>(bn.bias->values[c] - bn.mean->values[c] * bn.a[c]));
    }
    set_output(n, add_value(n, std::move(d)));
    return;
  }
  FloatLayer* l = foldable(n, x, "a Conv, Gemm or MatMul (batch normalization is folded into it)");
  if ((l->kind != LayerKind::Conv2d && l->kind != LayerKind::Dense) || l->act != model::ActFunction::None)
    fail(n, "must follow a Conv, Gemm or MatMul without activation (batch normalization is folded into it)");
  const std::size_t C = l->weight_shape.back();
  const BatchNorm bn = batchnorm_params(n, C);
  // With x = W.in + b: W' = W * a, b' = (b - mean) * a + bias, per output.
  if (l->bias.empty()) l->bias.assign(C, 0.0f);
  for (std::size_t c = 0; c < C; ++c) {
    for (std::size_t i = c; i < l->weights.size(); i += C)
      l->weights[i] = static_cast<float>(l->weights[i] * bn.a[c]);
    l->bias[c] = static_cast<float>((l->bias[c] - bn.mean->values[c]) * bn.a[c] + bn.bias->values[c]);
  }
  set_output(n, x);
}

void Importer::activation(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Clip") only_attrs(n, {"min", "max"});
  else only_attrs(n, {});
  if (qdq_ && (op == "Sigmoid" || op == "Tanh"))
    fail(n, "is not supported in a QDQ model: tpu-sim's sigmoid and tanh tables give a fixed output quantization "
            "(scale 1/127), not the model's");
  const Value x = need_value(n, 0);
  // Clip is a ReLU with an upper bound (clip_hi).
  const model::ActFunction f = op == "Sigmoid" ? model::ActFunction::Sigmoid
                               : op == "Tanh"  ? model::ActFunction::Tanh
                                               : model::ActFunction::Relu;
  if (!qdq_ && !x.padded) {
    // Fused into the layer before it when that is a Conv, Gemm or MatMul (an
    // Add for ReLU) without activation that only this node reads; otherwise
    // a standalone affine layer on the vector unit.
    const FloatLayer* p = fold_target(x);
    const bool fuses = p && p->act == model::ActFunction::None &&
                       (p->kind == LayerKind::Conv2d || p->kind == LayerKind::Dense ||
                        (p->kind == LayerKind::Add && (op == "Relu" || op == "Clip")));
    if (!fuses && op != "Clip") {
      set_output(n, affine(n, x, 1.0, 0.0, f, false));
      return;
    }
  }
  FloatLayer* l = foldable(n, x, "a Conv, Gemm, MatMul or Add (the activation is fused into it)");
  const bool gemm_like = l->kind == LayerKind::Conv2d || l->kind == LayerKind::Dense;
  if (!(gemm_like || (l->kind == LayerKind::Add && (op == "Relu" || op == "Clip"))) ||
      l->act != model::ActFunction::None)
    fail(n, fmt::format("must follow a Conv, Gemm or MatMul{} without activation (the activation is fused into it)",
                        op == "Relu" || op == "Clip" ? " or an Add" : ""));
  l->act = f;
  if (op == "Clip") {  // bounds as inputs (opset 11+) or attributes (before)
    double lo = -INFINITY, hi = INFINITY;
    const auto bound = [&](int i, const char* name, double& v) {
      if (has_input(n, i)) {
        const Const& c = need_const(n, i, fmt::format("the {} bound", name));
        if (c.values.size() != 1) fail(n, fmt::format("the {} bound must be a scalar", name));
        v = c.values[0];
      } else if (attr(n, name)) {
        v = attr_float(n, name, 0.0f);
      }
    };
    bound(1, "min", lo);
    bound(2, "max", hi);
    if (lo != 0.0 || !(hi > 0.0))
      fail(n, fmt::format("Clip({}, {}) is not supported (only Clip(0, max > 0): ReLU, ReLU6)", lo, hi));
    l->clip_hi = static_cast<float>(hi);
  }
  set_output(n, x);
}

// An Add of a constant: a scalar or per-channel bias of the Conv, Gemm or
// MatMul before it.
void Importer::fold_bias(const onnx::NodeProto& n) {
  const int vi = is_const(n.input(0)) ? 1 : 0;
  const Value x = need_value(n, vi);
  if (x.state != QState::Float)
    fail(n, "adds a constant to a quantized tensor: only a bias before the QuantizeLinear is supported (folded into "
            "the Conv, Gemm or MatMul)");
  const Const& b = consts_.at(n.input(1 - vi));
  if (!fold_target(x))
    fail(n, "an Add of a constant must follow a Conv, Gemm or MatMul that only it reads (it is folded into the bias)");
  FloatLayer& l = net_.layers[x.tensor - 1];
  if ((l.kind != LayerKind::Conv2d && l.kind != LayerKind::Dense) || l.act != model::ActFunction::None)
    fail(n, "an Add of a constant must follow a Conv, Gemm or MatMul without activation (it is folded into the bias)");
  const std::size_t C = l.weight_shape.back();
  // A scalar, or one value per channel broadcast over the rest: the one
  // dimension above 1 is the channels' (last for (N, F), third from last
  // for (N, C, H, W), as NumPy aligns shapes from the right).
  bool per_channel = b.values.size() == 1;
  if (!per_channel && b.values.size() == C) {
    const std::size_t at = l.kind == LayerKind::Dense || x.tokens ? 1 : one_d_ ? 2 : 3;
    per_channel = b.dims.size() >= at;
    for (std::size_t i = 0; i < b.dims.size(); ++i)
      if (b.dims[i] != 1 && i != b.dims.size() - at) per_channel = false;
  }
  if (!per_channel)
    fail(n, fmt::format("a constant of shape [{}] is not a per-channel bias for {} channels", fmt::join(b.dims, ", "), C));
  if (l.bias.empty()) l.bias.assign(C, 0.0f);
  for (std::size_t c = 0; c < C; ++c) l.bias[c] = static_cast<float>(l.bias[c] + b.values[b.values.size() == 1 ? 0 : c]);
  set_output(n, x);
}

}  // namespace tpu::onnximport::detail
