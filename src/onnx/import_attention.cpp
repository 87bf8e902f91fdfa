// Attention's operators (importer.h; docs/quantization.md, "Softmax and
// attention"): Softmax over the last axis as a softmax layer (SMAX). MatMul
// of two computed tensors and the MultiheadAttention pattern are not
// imported yet (gemm() refuses a MatMul whose weights are not constant).
#include "onnx/importer.h"

namespace tpu::onnximport::detail {

// Softmax: over the features of a vector (model (N, C), axis 1 or -1), or over
// the channels of a map with one pixel (model (N, C, 1, 1) or (N, C, 1), axis 1:
// the same in every opset). Softmax over a map's channels with more pixels
// (opset 13's axis 1 of (N, C, H, W); before opset 13 axis 1 coerces C*H*W
// into one axis) and over other axes are refused.
void Importer::softmax(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  no_extra_outputs(n, 1);
  if (qdq_) fail(n, "is not supported in a QDQ model");
  const Value x = need_value(n, 0);
  const Shape& s = shape(x);
  const std::size_t rank = s.size() == 1 ? 2 : (one_d_ ? 3 : 4);
  std::int64_t axis = attr_int(n, "axis", -1);
  if (axis < 0) axis += static_cast<std::int64_t>(rank);
  const bool features = s.size() == 1 && axis == 1;
  const bool channels = s.size() == 3 && s[0] * s[1] == 1 && axis == 1;
  if (!features && !channels)
    fail(n, fmt::format("softmax over axis {} of a rank-{} tensor: only over the features of (N, C), or the "
                        "channels of a map of one pixel, is supported (docs/onnx.md)",
                        attr_int(n, "axis", -1), rank));
  FloatLayer l;
  l.kind = LayerKind::Softmax;
  l.inputs = {x.tensor};
  set_output(n, add_value(n, std::move(l), x.perm));
}

}  // namespace tpu::onnximport::detail
