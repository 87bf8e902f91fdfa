// Layout and channel selections (importer.h): Flatten and Reshape to
// (N, features) -> flatten, with the permutation from the model's (c, h, w)
// feature order to tpu-sim's (h, w, c) carried by the Value (the dense layer
// reading it permutes its weight rows); the channel shuffle (Reshape to 5-D,
// Transpose, Reshape back), a Slice or Split of the channels -> 1x1 conv2d
// layers of 0/1 weights that select channels.
#include "onnx/importer.h"

#include <algorithm>

namespace tpu::onnximport::detail {

// Output channel j of a 1x1 conv of 0/1 weights reads input channel from[j];
// its output keeps the input's quantization (an exact copy on chip).
Value Importer::select_channels(const onnx::NodeProto& n, const Value& x, const std::vector<std::size_t>& from,
                                const std::string& name) {
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  FloatLayer l;
  l.kind = LayerKind::Conv2d;
  l.inputs = {x.tensor};
  l.keep_quant = true;
  l.weight_shape = {1, 1, in[2], from.size()};
  l.weights.assign(in[2] * from.size(), 0.0f);
  for (std::size_t j = 0; j < from.size(); ++j) l.weights[from[j] * from.size() + j] = 1.0f;
  onnx::NodeProto named = n;
  if (!name.empty()) named.set_name(name);
  return add_value(named, std::move(l));
}

// The channel range [begin, end) of a Slice or Split on axis 1 of a map.
void Importer::slice(const onnx::NodeProto& n) {
  if (n.input_size() > 0 && is_const(n.input(0))) {
    const_slice(n);  // shape arithmetic
    return;
  }
  only_attrs(n, {});
  if (qdq_) fail(n, "is not supported in a QDQ model");
  const Value x = need_input(n, 0);
  if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  const std::size_t C = shape(x)[2];
  const Const& starts = need_const(n, 1, "starts");
  const Const& ends = need_const(n, 2, "ends");
  std::vector<double> axes{1};
  if (has_input(n, 3)) axes = need_const(n, 3, "axes").values;
  unit_steps(n);
  const double neg_c = one_d_ ? -2 : -3;  // the channels counted from the end
  if (axes.size() != 1 || !(axes[0] == 1 || axes[0] == neg_c) || starts.values.size() != 1 || ends.values.size() != 1)
    fail(n, "only a slice of the channels (axis 1) is supported");
  const std::size_t b = slice_bound(n, starts.values[0], static_cast<double>(C));
  const std::size_t e = slice_bound(n, ends.values[0], static_cast<double>(C));
  if (e <= b) fail(n, fmt::format("selects no channel ({} to {} of {})", b, e, C));
  std::vector<std::size_t> from;
  for (std::size_t c = b; c < e; ++c) from.push_back(c);
  set_output(n, from.size() == C ? x : select_channels(n, x, from, ""));
}

void Importer::split(const onnx::NodeProto& n) {
  only_attrs(n, {"axis", "split"});
  if (qdq_) fail(n, "is not supported in a QDQ model");
  const Value x = need_input(n, 0);
  if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  const std::size_t C = shape(x)[2];
  const std::int64_t axis = attr_int(n, "axis", 0);
  if (axis != 1 && axis != (one_d_ ? -2 : -3)) fail(n, fmt::format("axis {} is not supported (only the channels, axis 1)", axis));
  std::vector<double> parts;
  if (has_input(n, 1)) parts = need_const(n, 1, "split").values;
  else for (std::int64_t p : attr_ints(n, "split", {})) parts.push_back(static_cast<double>(p));
  const auto outs = static_cast<std::size_t>(n.output_size());
  if (parts.empty()) {
    if (C % outs != 0) fail(n, fmt::format("{} channels do not split into {} equal parts", C, outs));
    parts.assign(outs, static_cast<double>(C / outs));
  }
  double total = 0;
  for (double p : parts) total += p;
  if (parts.size() != outs || total != static_cast<double>(C) ||
      std::any_of(parts.begin(), parts.end(), [](double p) { return !(p >= 1) || p != std::floor(p); }))
    fail(n, fmt::format("the split of {} channels into {} outputs does not add up", C, outs));
  std::size_t at = 0;
  for (std::size_t k = 0; k < outs; ++k) {
    const auto len = static_cast<std::size_t>(parts[k]);
    if (!n.output(static_cast<int>(k)).empty() && uses_.count(n.output(static_cast<int>(k)))) {
      std::vector<std::size_t> from;
      for (std::size_t c = at; c < at + len; ++c) from.push_back(c);
      const std::string name = fmt::format("{}_{}", n.name().empty() ? "Split" : n.name(), k);
      bind(n.output(static_cast<int>(k)), select_channels(n, x, from, name));
    }
    at += len;
  }
}

void Importer::transpose(const onnx::NodeProto& n) {
  if (seq_transpose(n)) return;
  only_attrs(n, {"perm"});
  const auto it = values_.find(n.input_size() > 0 ? n.input(0) : std::string());
  if (it == values_.end() || !it->second.shuffle_groups || it->second.shuffle_transposed ||
      attr_ints(n, "perm", {}) != std::vector<std::int64_t>{0, 2, 1, 3, 4})
    fail(n, "only the channel shuffle's Transpose (perm (0, 2, 1, 3, 4) of a map reshaped to (N, g, C/g, H, W)) is "
            "supported");
  Value v = it->second;
  v.shuffle_transposed = true;
  bind(n.output(0), v);
}

// The channel shuffle: Reshape (N, C, H, W) -> (N, g, C/g, H, W), Transpose
// (0, 2, 1, 3, 4), Reshape back to (N, C, H, W): output channel j reads
// input channel (j % g) * (C / g) + j / g (docs/onnx.md). Whether `n` is
// one of its Reshapes (then imported).
bool Importer::shuffle_reshape(const onnx::NodeProto& n) {
  if (n.input_size() != 2 || !is_const(n.input(1))) return false;
  const auto it = values_.find(n.input(0));
  const Const& s = consts_.at(n.input(1));
  if (it != values_.end() && !it->second.shuffle_groups && s.values.size() == 5 && it->second.perm.empty() &&
      shape(it->second).size() == 3) {
    only_attrs(n, {"allowzero"});
    const Shape& in = shape(it->second);
    if (!(s.values[1] >= 1) || s.values[1] != std::floor(s.values[1]) ||
        s.values[2] * s.values[1] != static_cast<double>(in[2]) ||
        s.values[3] != static_cast<double>(in[0]) || s.values[4] != static_cast<double>(in[1]))
      fail(n, "only a Reshape of (N, C, H, W) to (N, g, C/g, H, W) (a channel shuffle) is supported to 5 dimensions");
    Value v = need_input(n, 0);
    v.shuffle_groups = static_cast<unsigned>(s.values[1]);
    bind(n.output(0), v);
    return true;
  }
  if (it != values_.end() && it->second.shuffle_groups) {
    only_attrs(n, {"allowzero"});
    Value v = it->second;
    const Shape in = shape(v);  // a copy
    const bool back = s.values.size() == 4 && (s.values[1] == -1 || s.values[1] == static_cast<double>(in[2])) &&
                      s.values[2] == static_cast<double>(in[0]) && s.values[3] == static_cast<double>(in[1]);
    if (!v.shuffle_transposed || !back)
      fail(n, "only the channel shuffle (Reshape to (N, g, C/g, H, W), Transpose (0, 2, 1, 3, 4), Reshape back to "
              "(N, C, H, W)) is supported on a map reshaped to 5 dimensions");
    const std::size_t g = v.shuffle_groups, C = in[2];
    std::vector<std::size_t> from(C);
    for (std::size_t j = 0; j < C; ++j) from[j] = (j % g) * (C / g) + j / g;
    v.shuffle_groups = 0;
    v.shuffle_transposed = false;
    if (qdq_) fail(n, "the channel shuffle is not supported in a QDQ model");
    set_output(n, select_channels(n, v, from, ""));
    return true;
  }
  return false;
}

void Importer::flatten(const onnx::NodeProto& n) {
  if (n.op_type() == "Reshape" && shuffle_reshape(n)) return;
  const Value x = need_input(n, 0);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  const std::size_t rank = in.size() + 1;  // with the batch
  if (n.op_type() == "Flatten") {
    only_attrs(n, {"axis"});
    std::int64_t axis = attr_int(n, "axis", 1);
    if (axis < 0) axis += static_cast<std::int64_t>(rank);
    if (axis != 1) fail(n, fmt::format("axis {} is not supported (only 1: (N, features))", attr_int(n, "axis", 1)));
  } else {
    only_attrs(n, {"allowzero"});
    const Const& s = need_const(n, 1, "the shape");
    std::size_t features = 1;
    for (std::size_t d : in) features *= d;
    const bool ok = s.values.size() == 2 && (s.values[1] == -1 || s.values[1] == static_cast<double>(features));
    if (!ok) fail(n, "only a Reshape to (N, features) is supported (a flatten)");
  }
  if (in.size() == 1) {
    set_output(n, x);
    return;
  }
  FloatLayer l;
  l.kind = LayerKind::Flatten;
  l.inputs = {x.tensor};
  Value out;
  out.tensor = add_layer(n, std::move(l));
  out.perm = x.perm;
  out.state = x.state;  // a view: a dequantized map stays dequantized
  out.q = x.q;
  out.qtype = x.qtype;
  // The model flattens (C, H, W) as c*H*W + h*W + w; tpu-sim NHWC as (h*W + w)*C + c.
  const std::size_t H = in[0], W = in[1], C = in[2];
  if (H * W > 1) {
    out.perm.resize(H * W * C);
    for (std::size_t c = 0; c < C; ++c)
      for (std::size_t p = 0; p < H * W; ++p) out.perm[c * H * W + p] = p * C + c;
  }
  set_output(n, out);
}

}  // namespace tpu::onnximport::detail
