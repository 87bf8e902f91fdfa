// Several inputs (importer.h): Add of two computed tensors of one shape and
// layout -> add; Concat of maps along the channels (or 1-D features) ->
// concat. An Add with a constant goes to fold_bias (a bias) or const_arith
// (shape arithmetic), a Concat of constants to const_concat.
#include "onnx/importer.h"

#include <algorithm>

namespace tpu::onnximport::detail {

void Importer::add(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (n.input_size() != 2) fail(n, "needs two inputs");
  const bool c0 = is_const(n.input(0)), c1 = is_const(n.input(1));
  if (c0 && c1) {
    const_arith(n);  // shape arithmetic
    return;
  }
  if (c0 || c1) {
    fold_bias(n);
    return;
  }
  const Value a = need_input(n, 0), b = need_input(n, 1);
  if (shape(a) != shape(b)) fail(n, "adds tensors of different shapes (broadcasting is not supported)");
  if (a.perm != b.perm) fail(n, "adds a flattened map to a tensor of another layout");
  FloatLayer l;
  l.kind = LayerKind::Add;
  l.inputs = {a.tensor, b.tensor};
  set_output(n, add_value(n, std::move(l), a.perm));
}

void Importer::concat(const onnx::NodeProto& n) {
  if (n.input_size() > 0 && is_const(n.input(0))) {
    const_concat(n);
    return;
  }
  only_attrs(n, {"axis"});
  if (qdq_) fail(n, "is not supported in a QDQ model");
  if (n.input_size() < 1) fail(n, "needs an input");
  std::vector<Value> xs;
  for (int i = 0; i < n.input_size(); ++i) xs.push_back(need_input(n, i));
  const Shape first = shape(xs[0]);  // a copy: add_layer grows shapes_
  // With the batch; a 1-D model's maps are (N, C, L).
  const std::int64_t rank = static_cast<std::int64_t>(first.size()) + 1 - (one_d_ && first.size() == 3 ? 1 : 0);
  std::int64_t axis = attr_int(n, "axis", 1);
  if (axis < 0) axis += rank;
  if (axis != 1)
    fail(n, fmt::format("axis {} is not supported (only the channels, axis 1)", attr_int(n, "axis", 1)));
  FloatLayer l;
  l.kind = LayerKind::Concat;
  for (const Value& x : xs) {
    if (!x.perm.empty()) fail(n, "concatenates a flattened map (only maps along channels, or 1-D features)");
    const Shape& s = shape(x);
    if (s.size() != first.size() || !std::equal(s.begin(), s.end() - 1, first.begin()))
      fail(n, "concatenates tensors whose shapes differ in more than the channels");
    l.inputs.push_back(x.tensor);
  }
  if (xs.size() == 1) {
    set_output(n, xs[0]);
    return;
  }
  set_output(n, add_value(n, std::move(l)));
}

}  // namespace tpu::onnximport::detail
