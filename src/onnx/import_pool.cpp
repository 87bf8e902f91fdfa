// Pools (importer.h): MaxPool and AveragePool -> the 2-D pools (a pending
// Pad folded in where it keeps the result), GlobalAveragePool and
// ReduceMean over H and W -> the global average pool (ReduceMean with
// keepdims 0 followed by a flatten of its 1 x 1 x C map).
#include "onnx/importer.h"

#include <algorithm>

namespace tpu::onnximport::detail {

Value Importer::global_pool(const onnx::NodeProto& n, const Value& x) {
  FloatLayer l;
  l.kind = LayerKind::GlobalAvgPool2d;
  l.inputs = {x.tensor};
  return add_value(n, std::move(l));
}

void Importer::global_average_pool(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value x = need_input(n, 0);
  if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  set_output(n, global_pool(n, x));
}

// The mean over H and W: a global average pool, then (keepdims 0) a flatten
// of its 1 x 1 x C map, a view (docs/onnx.md).
void Importer::reduce_mean(const onnx::NodeProto& n) {
  only_attrs(n, {"axes", "keepdims"});
  const Value x = need_input(n, 0);
  if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  std::vector<std::int64_t> axes = attr_ints(n, "axes", {});
  for (std::int64_t& a : axes)
    if (a < 0) a += one_d_ ? 3 : 4;
  std::sort(axes.begin(), axes.end());
  if (one_d_ && axes != std::vector<std::int64_t>{2})
    fail(n, "only the mean over L (axes [2]) of a 1-D map is supported: a global average pool");
  if (!one_d_ && axes != std::vector<std::int64_t>{2, 3})
    fail(n, "only the mean over H and W (axes [2, 3]) is supported: a global average pool");
  const std::int64_t keep = attr_int(n, "keepdims", 1);
  if (qdq_ && keep == 0)
    fail(n, "keepdims 0 is not supported in a QDQ model (use keepdims 1 and a Flatten)");
  Value out = global_pool(n, x);
  if (keep == 0) {
    FloatLayer f;
    f.kind = LayerKind::Flatten;
    f.inputs = {out.tensor};
    out.tensor = add_layer(n, std::move(f));
  }
  set_output(n, out);
}

void Importer::window_pool(const onnx::NodeProto& n) {
  const bool max = n.op_type() == "MaxPool";
  if (max) only_attrs(n, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order"});
  else only_attrs(n, {"kernel_shape", "strides", "pads", "ceil_mode", "auto_pad", "count_include_pad"});
  if (max) no_extra_outputs(n, 1);
  const Value x = need_input(n, 0, true);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  FloatLayer l;
  l.kind = max ? LayerKind::MaxPool2d : LayerKind::AvgPool2d;
  l.inputs = {x.tensor};
  const auto ks = window_ints(n, "kernel_shape", {});
  if (ks.size() != 2) fail(n, one_d_ ? "needs a 1-D kernel_shape" : "needs a 2-D kernel_shape");  // each 1 to kWindowLimit (validate_model)
  l.kernel_h = static_cast<unsigned>(ks[0]);
  l.kernel_w = static_cast<unsigned>(ks[1]);
  if (x.padded) {
    // A Pad's zeros are values of the map: the average counts them (as the
    // TPU counts padded positions); a maximum matches only where the map is
    // never negative (after a ReLU), since the TPU's padding never wins.
    const FloatLayer* src = x.tensor ? &net_.layers[x.tensor - 1] : nullptr;
    if (max && !(src && (src->act == model::ActFunction::Relu || src->act == model::ActFunction::Sigmoid)))
      fail(n, fmt::format("reads Pad '{}' on a map that may be negative: zero padding before a max is not "
                          "supported there", x.pad_node));
    take_pad(x, l);
  }
  const auto own = window_ints(n, "pads", {0, 0, 0, 0});
  const bool own_pad = std::any_of(own.begin(), own.end(), [](std::int64_t p) { return p != 0; });
  if (!max && own_pad && attr_int(n, "count_include_pad", 0) == 0)
    fail(n, "count_include_pad = 0 with padding is not supported (the TPU's average counts padded positions)");
  window(n, l, in, true);
  Value out;
  out.tensor = add_layer(n, std::move(l));
  if (max && x.state == QState::Deq) {  // the maximum of dequantized values is dequantized
    out.state = QState::Deq;
    out.q = x.q;
    out.qtype = x.qtype;
  }
  set_output(n, out);
}

}  // namespace tpu::onnximport::detail
