// The vector unit's layers (importer.h; docs/quantization.md, "Layers on
// the vector unit"): affine (alpha x + beta with an activation: a standalone
// Relu, Sigmoid or Tanh, HardSigmoid), Mul of two computed tensors (the same
// shape, or a map by a per-channel vector), and HardSwish as both. None is
// supported in a QDQ model.
#include "onnx/importer.h"

namespace tpu::onnximport::detail {

Value Importer::affine(const onnx::NodeProto& n, const Value& x, double alpha, double beta, model::ActFunction act,
                       bool unit_range, float clip_hi) {
  if (qdq_) fail(n, "is not supported in a QDQ model (only fused into the Conv, Gemm or MatMul before it)");
  FloatLayer l;
  l.kind = LayerKind::Affine;
  l.inputs = {x.tensor};
  l.alpha = alpha;
  l.beta = beta;
  l.act = act;
  l.unit_range = unit_range;
  l.clip_hi = clip_hi;
  return add_value(n, std::move(l), x.perm);
}

// a * b: the same shape, or a map and a per-channel vector (either order:
// the map becomes operand A).
Value Importer::multiply(const onnx::NodeProto& n, const Value& a0, const Value& b0) {
  if (qdq_) fail(n, "is not supported in a QDQ model");
  Value a = a0, b = b0;
  if (shape(a).size() == 3 && shape(b).size() == 3 && shape(a)[0] * shape(a)[1] < shape(b)[0] * shape(b)[1])
    std::swap(a, b);
  const Shape sa = shape(a), sb = shape(b);
  const bool broadcast = sa.size() == 3 && sb.size() == 3 && sb[0] == 1 && sb[1] == 1 && sb[2] == sa[2];
  if (sa != sb && !broadcast) {
    const auto model_shape = [](const Shape& s) { return s.size() == 3 ? Shape{s[2], s[0], s[1]} : s; };
    fail(n, fmt::format("multiplies tensors of shapes [{}] and [{}] per sample (only the same shape, or a map "
                        "(C, H, W) by a per-channel (C, 1, 1))",
                        fmt::join(model_shape(sa), ", "), fmt::join(model_shape(sb), ", ")));
  }
  if (a.perm != b.perm) fail(n, "multiplies a flattened map by a tensor of another layout");
  FloatLayer l;
  l.kind = LayerKind::Mul;
  l.inputs = {a.tensor, b.tensor};
  return add_value(n, std::move(l), a.perm);
}

// Mul: of two computed tensors a layer; of constants, shape arithmetic.
void Importer::mul(const onnx::NodeProto& n) {
  if (n.input_size() != 2 || is_const(n.input(0)) || is_const(n.input(1))) {
    const_arith(n);
    return;
  }
  only_attrs(n, {});
  set_output(n, multiply(n, need_value(n, 0), need_value(n, 1)));
}

// HardSigmoid: max(0, min(1, alpha x + beta)), ONNX defaults 0.2 and 0.5;
// HardSwish: x * HardSigmoid(x) at alpha 1/6, beta 1/2.
void Importer::hard_sigmoid(const onnx::NodeProto& n) {
  const bool swish = n.op_type() == "HardSwish";
  if (swish) only_attrs(n, {});
  else only_attrs(n, {"alpha", "beta"});
  const Value x = need_value(n, 0);
  const double alpha = swish ? 1.0 / 6.0 : attr_float(n, "alpha", 0.2f);
  const double beta = swish ? 0.5 : attr_float(n, "beta", 0.5f);
  if (!std::isfinite(alpha) || !std::isfinite(beta)) fail(n, "alpha and beta must be finite");
  const Value hs = affine(n, x, alpha, beta, model::ActFunction::None, true);
  set_output(n, swish ? multiply(n, x, hs) : hs);
}

}  // namespace tpu::onnximport::detail
