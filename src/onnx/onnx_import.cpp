// The ONNX importer (onnx_import.h): validation, the graph walk that maps
// nodes onto layers, folding and layout.
//
// The ONNX headers come first: <sys/mman.h>, which SystemC pulls in through
// compiler/network.h, defines a MAP_TYPE macro that breaks onnx/defs/parser.h.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx/onnx_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "common/file_io.h"
#include "compiler/quant.h"
#include "onnx/float_exec.h"
#include "onnx/import_resize.h"
#include "onnx/onnx_validate.h"

namespace tpu::onnximport {
namespace {

using compiler::LayerKind;
using Shape = std::vector<std::size_t>;

// Error messages are one line: names and the checker's text come from the
// file and may hold line breaks or other control characters.
std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

// A constant: an initializer or a Constant node's value (any numeric type,
// held as double: float32 is exact, int64 shapes and pads are small).
struct Const {
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  int type = onnx::TensorProto::FLOAT;  // the ONNX element type
  // A DequantizeLinear of integer constants (QDQ weights and biases):
  // `values` are the real values (q - zero) * scale, from these.
  bool dequantized = false;
  std::string dq_node;              // the DequantizeLinear
  int qtype = 0;                    // the integers' type (INT8, UINT8, INT32)
  std::vector<double> scales, zeros;  // one (per tensor) or one per index of `axis`
  std::size_t axis = 0;
};

// Where a computed tensor stands in a QDQ graph: as computed (float), as the
// integers of a QuantizeLinear, or as their DequantizeLinear (float again,
// every value on the int8 grid).
enum class QState { Float, Int, Deq };

// A tensor computed by the network: a tpu tensor id, possibly with a pending
// constant padding (a Pad node waiting for its Conv or pool) or, for a
// flattened map, the permutation from the model's feature order to tpu-sim's.
struct Value {
  std::size_t tensor = 0;
  bool padded = false;
  std::string pad_node;
  unsigned pad[4] = {0, 0, 0, 0};  // top, bottom, left, right
  std::vector<std::size_t> perm;   // perm[model index] = tpu index; empty: identity
  QState state = QState::Float;
  // A channel shuffle in progress: a Reshape of a map's C channels to
  // (g, C / g) (shuffle_groups g), then its Transpose to (C / g, g).
  unsigned shuffle_groups = 0;
  bool shuffle_transposed = false;
  compiler::QuantParams q;  // Int, Deq: the quantization (int8 terms)
  int qtype = 0;            // Int: the integers' ONNX type (INT8 or UINT8)
};

class Importer {
 public:
  Importer(const onnx::GraphProto& g, std::string where) : g_(g), where_(std::move(where)) {}

  FloatNet run();

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(one_line(fmt::format("{}: {}", where_, what)));
  }
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& what) const {
    throw FileError(one_line(fmt::format("{}: node '{}' ({}): {}", where_, n.name(), n.op_type(), what)));
  }

  // Attributes.
  void only_attrs(const onnx::NodeProto& n, std::set<std::string> known) const {
    for (const auto& a : n.attribute())
      if (!known.count(a.name())) fail(n, fmt::format("attribute '{}' is not supported", a.name()));
  }
  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) const {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t def) const {
    const auto* a = attr(n, name);
    return a ? a->i() : def;
  }
  float attr_float(const onnx::NodeProto& n, const std::string& name, float def) const {
    const auto* a = attr(n, name);
    return a ? a->f() : def;
  }
  std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& def) const {
    const auto* a = attr(n, name);
    return a ? a->s() : def;
  }
  std::vector<std::int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name,
                                      std::vector<std::int64_t> def) const {
    const auto* a = attr(n, name);
    if (!a) return def;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  }

  Const read_tensor(const onnx::TensorProto& t, const std::string& what) const;

  bool is_const(const std::string& name) const { return consts_.count(name) > 0; }
  const Const& need_const(const onnx::NodeProto& n, int i, const std::string& what) const {
    if (i >= n.input_size() || n.input(i).empty()) fail(n, fmt::format("needs {}", what));
    const auto it = consts_.find(n.input(i));
    if (it == consts_.end())
      fail(n, fmt::format("{} ('{}') must be a constant (an initializer)", what, n.input(i)));
    return it->second;
  }
  // A computed input; a pending Pad only where `allow_pad` (Conv and pools).
  Value need_value(const onnx::NodeProto& n, int i, bool allow_pad = false, bool allow_int = false) const {
    if (i >= n.input_size() || n.input(i).empty()) fail(n, fmt::format("input {} is missing", i));
    const auto it = values_.find(n.input(i));
    if (it == values_.end()) {
      if (is_const(n.input(i)))
        fail(n, fmt::format("input '{}' is a constant; tpu-sim computes only on the network's input", n.input(i)));
      fail(n, fmt::format("input '{}' is not produced by an earlier node", n.input(i)));
    }
    if (it->second.shuffle_groups)
      fail(n, "reads a map reshaped to 5 dimensions: only the channel shuffle (Reshape to (N, g, C/g, H, W), "
              "Transpose (0, 2, 1, 3, 4), Reshape back to (N, C, H, W)) is supported");
    if (it->second.padded && !allow_pad)
      fail(n, fmt::format("reads the output of Pad '{}': a Pad can only feed a Conv, MaxPool or AveragePool",
                          it->second.pad_node));
    if (it->second.state == QState::Int && !allow_int)
      fail(n, fmt::format("reads the integers of a QuantizeLinear ('{}'): only a DequantizeLinear (or a Cast to "
                          "their own type) may read them", n.input(i)));
    return it->second;
  }
  const Shape& shape(const Value& v) const { return shapes_.at(v.tensor); }
  // An input of a layer (Conv, Gemm, MatMul, pools, Add, Flatten): in a QDQ
  // model, the DequantizeLinear of a quantized tensor.
  Value need_input(const onnx::NodeProto& n, int i, bool allow_pad = false) const {
    Value v = need_value(n, i, allow_pad);
    if (qdq_ && v.state != QState::Deq)
      fail(n, fmt::format("input '{}' is not quantized: in a QDQ model every Conv, Gemm, MatMul, pool, Add and "
                          "Flatten must read a DequantizeLinear (tpu-sim computes in int8)", n.input(i)));
    return v;
  }
  // The layer that computes `v` when a node may fold into it: `v` its output
  // as computed (no pending pad, no permutation), read by this node alone.
  FloatLayer* foldable(const onnx::NodeProto& n, const Value& v, const std::string& what);
  void no_extra_outputs(const onnx::NodeProto& n, int keep) const {
    for (int i = keep; i < n.output_size(); ++i)
      if (!n.output(i).empty() && uses_.count(n.output(i)))
        fail(n, fmt::format("output {} ('{}') is used; tpu-sim computes only the first", i, n.output(i)));
  }

  std::size_t add_layer(const onnx::NodeProto& n, FloatLayer l);
  void set_output(const onnx::NodeProto& n, Value v) { bind(n.output(0), std::move(v)); }
  // Names `name` as `v`. Readers are counted per tensor, over every name it
  // has: a node that only renames or folds into a tensor (Identity, a fused
  // activation, BN, Pad) passes its own read on to its output's readers.
  void bind(const std::string& name, Value v) {
    reads_[v.tensor] += uses_[name];
    if (v.tensor < first_new_tensor_) ++renames_[v.tensor];
    values_[name] = std::move(v);
  }
  std::string layer_name(const onnx::NodeProto& n);
  void window(const onnx::NodeProto& n, FloatLayer& l, const Shape& in, bool is_pool) const;

  void conv(const onnx::NodeProto& n);
  void gemm(const onnx::NodeProto& n, bool matmul);
  void batchnorm(const onnx::NodeProto& n);
  void activation(const onnx::NodeProto& n);
  // The vector unit's layers (docs/quantization.md, "Layers on the vector unit").
  Value affine(const onnx::NodeProto& n, const Value& x, double alpha, double beta, model::ActFunction act,
               bool unit_range, float clip_hi = std::numeric_limits<float>::infinity());
  Value multiply(const onnx::NodeProto& n, const Value& a, const Value& b);
  void mul(const onnx::NodeProto& n);
  void hard_sigmoid(const onnx::NodeProto& n);
  void pool(const onnx::NodeProto& n);
  void add(const onnx::NodeProto& n);
  void concat(const onnx::NodeProto& n);
  // Channel selections and permutations, and constant shape arithmetic.
  Value select_channels(const onnx::NodeProto& n, const Value& x, const std::vector<std::size_t>& from,
                        const std::string& name);
  void slice(const onnx::NodeProto& n);
  void split(const onnx::NodeProto& n);
  void transpose(const onnx::NodeProto& n);
  void shape_op(const onnx::NodeProto& n);
  void gather(const onnx::NodeProto& n);
  void const_arith(const onnx::NodeProto& n);
  void flatten(const onnx::NodeProto& n);
  void pad(const onnx::NodeProto& n);
  void resize(const onnx::NodeProto& n);
  void const_slice(const onnx::NodeProto& n);
  void node(const onnx::NodeProto& n);
  // QDQ (docs/onnx.md, "QDQ models").
  void quantize_linear(const onnx::NodeProto& n);
  void dequantize_linear(const onnx::NodeProto& n);
  void cast(const onnx::NodeProto& n);
  void constant_of_shape(const onnx::NodeProto& n);
  compiler::QuantParams act_quant(const onnx::NodeProto& n, int& type) const;
  Const qdq_weights(const onnx::NodeProto& n, const Const& w, std::size_t out_axis, double& scale);
  void finish_qdq();
  void warn(const std::string& what) { net_.warnings.push_back(one_line(fmt::format("{}: {}", where_, what))); }
  void warn(const onnx::NodeProto& n, const std::string& what) {
    warn(fmt::format("node '{}' ({}): {}", n.name(), n.op_type(), what));
  }

  const onnx::GraphProto& g_;
  std::string where_;
  std::map<std::string, Const> consts_;
  std::map<std::string, Value> values_;
  std::map<std::string, int> uses_;  // readers of each value name (a graph output counts)
  std::map<std::size_t, int> reads_, renames_;  // per tensor id: see bind()
  std::size_t first_new_tensor_ = 0;  // the first tensor id the current node may create
  std::set<std::string> names_;
  std::vector<Shape> shapes_;  // per tensor id, tpu layout
  FloatNet net_;
  bool qdq_ = false;  // the model has QuantizeLinear or DequantizeLinear nodes
  // The input is (N, C, L): every map is 1-D, held as H = 1, W = L (a Conv1d
  // net; docs/onnx.md, "1-D models"). Window attributes have one entry per
  // axis of L, and pads two.
  bool one_d_ = false;
  // A window attribute ("strides", "dilations", "kernel_shape": one value
  // per spatial axis; "pads": begin values, then end values) as 2-D: a 1-D
  // model's gets the trivial H entries (1 for sizes, 0 for pads) in front.
  std::vector<std::int64_t> window_ints(const onnx::NodeProto& n, const std::string& name,
                                        std::vector<std::int64_t> def) const {
    std::vector<std::int64_t> v = attr_ints(n, name, {});
    if (!attr(n, name)) return def;
    if (!one_d_) return v;
    if (name == "pads") {
      if (v.size() != 2) fail(n, "a 1-D window needs 2 pads (begin, end of L)");
      return {0, v[0], 0, v[1]};
    }
    if (v.size() != 1) fail(n, fmt::format("a 1-D window needs one '{}' value", name));
    return {1, v[0]};
  }
  std::map<std::size_t, compiler::QuantParams> tq_;  // QDQ: per tensor id, its quantization
  std::vector<std::string> layer_op_;  // per layer, the ONNX operator that made it
};

Const Importer::read_tensor(const onnx::TensorProto& t, const std::string& what) const {
  // validate_model has checked the dims and the data's length (and refused
  // external data); the count is checked again here, as read_tensor trusts it.
  Const c;
  c.type = t.data_type();
  const std::size_t count = tensor_element_count(t, what, where_);
  c.dims.assign(t.dims().begin(), t.dims().end());
  const std::string& raw = t.raw_data();
  const auto from_raw = [&](auto zero) {
    using T = decltype(zero);
    if (raw.size() != count * sizeof(T))
      fail(fmt::format("{} '{}' has {} bytes of data for {} elements", what, t.name(), raw.size(), count));
    for (std::size_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));  // ONNX raw data is little-endian, as the host
      c.values.push_back(static_cast<double>(v));
    }
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (t.has_raw_data()) from_raw(0.0f);
      else c.values.assign(t.float_data().begin(), t.float_data().end());
      break;
    case onnx::TensorProto::DOUBLE:
      if (t.has_raw_data()) from_raw(0.0);
      else c.values.assign(t.double_data().begin(), t.double_data().end());
      break;
    case onnx::TensorProto::INT64:
      if (t.has_raw_data()) from_raw(std::int64_t{0});
      else c.values.assign(t.int64_data().begin(), t.int64_data().end());
      break;
    case onnx::TensorProto::INT32:
      if (t.has_raw_data()) from_raw(std::int32_t{0});
      else c.values.assign(t.int32_data().begin(), t.int32_data().end());
      break;
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::UINT8:
      if (t.has_raw_data()) from_raw(std::uint8_t{0});
      else c.values.assign(t.int32_data().begin(), t.int32_data().end());
      break;
    case onnx::TensorProto::INT8:
      if (t.has_raw_data()) from_raw(std::int8_t{0});
      else c.values.assign(t.int32_data().begin(), t.int32_data().end());
      break;
    default:
      fail(fmt::format("{} '{}' has data type {}, which tpu-sim does not read (float, double, int8, uint8, int32, "
                       "int64, bool)",
                       what, t.name(), onnx::TensorProto::DataType_Name(t.data_type())));
  }
  if (c.values.size() != count)
    fail(fmt::format("{} '{}' has {} values for {} elements", what, t.name(), c.values.size(), count));
  if (c.type == onnx::TensorProto::INT8 || c.type == onnx::TensorProto::UINT8) {
    const double lo = c.type == onnx::TensorProto::INT8 ? -128 : 0;
    for (double v : c.values)
      if (v < lo || v > lo + 255)
        fail(fmt::format("{} '{}' holds {}, outside its type {}", what, t.name(), v,
                         onnx::TensorProto::DataType_Name(t.data_type())));
  }
  return c;
}

std::string Importer::layer_name(const onnx::NodeProto& n) {
  std::string base = n.name().empty() ? fmt::format("{}_{}", n.op_type(), net_.layers.size()) : n.name();
  std::string name = base;
  for (int k = 2; name == "input" || names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
  names_.insert(name);
  return name;
}

std::size_t Importer::add_layer(const onnx::NodeProto& n, FloatLayer l) {
  l.name = layer_name(n);
  Shape out;
  try {
    out = float_layer_shape(l, shapes_);
  } catch (const compiler::CompileError& e) {
    fail(n, e.what());
  }
  if (!within_tensor_limit(out)) {
    const Shape model = out.size() == 3 ? Shape{out[2], out[0], out[1]} : out;  // (C, H, W), as the model has it
    fail(n, fmt::format("its output, of shape [{}] per sample, has more than {} elements (tpu-sim's limit)",
                        fmt::join(model, ", "), kMaxTensorElements));
  }
  shapes_.push_back(std::move(out));
  net_.layers.push_back(std::move(l));
  layer_op_.push_back(n.op_type());
  return net_.layers.size();  // the new tensor's id
}

FloatLayer* Importer::foldable(const onnx::NodeProto& n, const Value& v, const std::string& what) {
  if (v.tensor == 0 || !v.perm.empty())
    fail(n, fmt::format("must follow {}", what));
  FloatLayer& l = net_.layers[v.tensor - 1];
  if (reads_[v.tensor] - renames_[v.tensor] != 1)
    fail(n, "folds into the layer before it, whose output other nodes read too");
  return &l;
}

// A pending Pad's amounts become the layer's padding.
void take_pad(const Value& x, FloatLayer& l) {
  if (!x.padded) return;
  l.pad_top = x.pad[0];
  l.pad_bottom = x.pad[1];
  l.pad_left = x.pad[2];
  l.pad_right = x.pad[3];
}

// Kernel, strides and pads of a Conv or pool, with a pending Pad folded in.
void Importer::window(const onnx::NodeProto& n, FloatLayer& l, const Shape& in, bool is_pool) const {
  const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    fail(n, fmt::format("auto_pad '{}' is not supported (NOTSET with explicit pads, or VALID)", auto_pad));
  const auto strides = window_ints(n, "strides", {1, 1});
  const auto pads = window_ints(n, "pads", {0, 0, 0, 0});
  const auto dil = window_ints(n, "dilations", {1, 1});
  if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2)
    fail(n, "only 2-D windows are supported (strides, pads and dilations of a 2-D map)");
  if (dil[0] != 1 || dil[1] != 1)
    fail(n, fmt::format("dilations [{}, {}] are not supported (tpu-sim's convolutions and pools are not dilated)",
                        dil[0], dil[1]));
  // validate_model has bounded strides (1 up) and pads (0 up) by kWindowLimit.
  l.stride_h = static_cast<unsigned>(strides[0]);
  l.stride_w = static_cast<unsigned>(strides[1]);
  // ONNX pads: [top, left, bottom, right].
  l.pad_top += static_cast<unsigned>(pads[0]);
  l.pad_left += static_cast<unsigned>(pads[1]);
  l.pad_bottom += static_cast<unsigned>(pads[2]);
  l.pad_right += static_cast<unsigned>(pads[3]);
  if (is_pool && attr_int(n, "ceil_mode", 0) != 0 && in.size() == 3) {
    // ceil_mode 1: the output size rounds (size + pads - k) / s up. A max-pool
    // gets the extra cells of its last window as padding at the bottom and
    // right, which never wins (docs/quantization.md, "Max-pool with
    // ceil_mode"); an average pool would have to leave them out of its
    // count, which the TPU's average (a fixed window) does not.
    const auto extra = [](std::size_t size, unsigned k, unsigned s, unsigned a, unsigned b) -> unsigned {
      const std::size_t padded = size + a + b;
      if (padded < k) return 0;  // float_layer_shape reports the window larger than the input
      const std::size_t out = (padded - k + s - 1) / s + 1;
      return static_cast<unsigned>((out - 1) * s + k - padded);
    };
    const unsigned eh = extra(in[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom);
    const unsigned ew = extra(in[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right);
    if ((eh != 0 || ew != 0) && n.op_type() != "MaxPool")
      fail(n, "ceil_mode 1 is not supported where it changes the output size (ONNX leaves the extra cells of the last "
              "window out of the average's count; tpu-sim's average divides by the whole window)");
    if ((eh != 0 && l.pad_bottom + eh >= l.kernel_h) || (ew != 0 && l.pad_right + ew >= l.kernel_w))
      fail(n, "ceil_mode 1 with this padding gives a last window entirely in the padding, which is not supported");
    l.pad_bottom += eh;
    l.pad_right += ew;
  }
  if (is_pool) {
    if (l.pad_top >= l.kernel_h || l.pad_bottom >= l.kernel_h || l.pad_left >= l.kernel_w ||
        l.pad_right >= l.kernel_w)
      fail(n, fmt::format("padding [{}, {}, {}, {}] (top, bottom, left, right) must be smaller than the {}x{} window",
                          l.pad_top, l.pad_bottom, l.pad_left, l.pad_right, l.kernel_h, l.kernel_w));
  }
}

void Importer::conv(const onnx::NodeProto& n) {
  only_attrs(n, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  const Value x = need_input(n, 0, true);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 3) fail(n, "needs a 4-D (N, C, H, W) or 3-D (N, C, L) input");
  const Const& w1 = need_const(n, 1, "the weights");
  if (one_d_ && w1.dims.size() != 3) fail(n, "a 1-D convolution needs 3-D weights (O, I, K)");
  if (!one_d_ && w1.dims.size() != 4) fail(n, "only 2-D convolutions (4-D weights) and 1-D ones are supported");
  Const w0 = w1;
  if (one_d_) w0.dims.insert(w0.dims.begin() + 2, 1);  // (O, I, K) -> (O, I, 1, K)
  double weight_scale = 0.0;
  const Const w = qdq_ ? qdq_weights(n, w0, 0, weight_scale) : w0;
  const auto O = static_cast<std::size_t>(w.dims[0]), I = static_cast<std::size_t>(w.dims[1]),
             KH = static_cast<std::size_t>(w.dims[2]), KW = static_cast<std::size_t>(w.dims[3]);
  const std::int64_t group = attr_int(n, "group", 1);
  const std::size_t C = in[2];
  FloatLayer l;
  l.kind = LayerKind::Conv2d;
  l.inputs = {x.tensor};
  l.weight_scale = weight_scale;
  // A grouped convolution other than depthwise becomes a dense one whose
  // weights are block-diagonal: output channel o of group o / (O / group)
  // reads only that group's input channels, the rest of its weights are zero
  // (docs/quantization.md, "Grouped convolution").
  std::size_t G = 1;
  if (group < 1 || static_cast<std::size_t>(group) > C || C % static_cast<std::size_t>(group) != 0 ||
      O % static_cast<std::size_t>(group) != 0)
    fail(n, fmt::format("group {} does not divide the {} input and {} output channels", group, C, O));
  if (group == 1 && I != C) fail(n, fmt::format("weights for {} input channels on {}", I, C));
  if (I * static_cast<std::size_t>(group) != C)
    fail(n, fmt::format("weights for {} input channels per group on {} channels in {} groups", I, C, group));
  if (group > 1 && static_cast<std::size_t>(group) == C && O == C) l.groups = static_cast<unsigned>(C);  // depthwise
  else G = static_cast<std::size_t>(group);
  const auto ks = window_ints(n, "kernel_shape", {w.dims[2], w.dims[3]});
  if (ks.size() != 2 || ks[0] != w.dims[2] || ks[1] != w.dims[3]) fail(n, "kernel_shape does not match the weights");
  l.kernel_h = static_cast<unsigned>(KH);
  l.kernel_w = static_cast<unsigned>(KW);
  take_pad(x, l);
  window(n, l, in, false);
  // (O, I, KH, KW) -> (KH, KW, I, O); grouped: (KH, KW, C, O), input
  // channel i of output o's group g at g * I + i, zeros elsewhere.
  const std::size_t I_out = G > 1 ? C : I;
  l.weight_shape = {KH, KW, I_out, O};
  l.weights.assign(KH * KW * I_out * O, 0.0f);
  for (std::size_t o = 0; o < O; ++o) {
    const std::size_t first = G > 1 ? o / (O / G) * I : 0;
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t y = 0; y < KH; ++y)
        for (std::size_t z = 0; z < KW; ++z)
          l.weights[((y * KW + z) * I_out + first + i) * O + o] =
              static_cast<float>(w.values[((o * I + i) * KH + y) * KW + z]);
  }
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Const& b = need_const(n, 2, "the bias");
    if (b.values.size() != O) fail(n, fmt::format("{} biases for {} outputs", b.values.size(), O));
    l.bias.assign(b.values.begin(), b.values.end());
  }
  Value out;
  out.tensor = add_layer(n, std::move(l));
  set_output(n, out);
}

void Importer::gemm(const onnx::NodeProto& n, bool matmul) {
  if (matmul) only_attrs(n, {});
  else only_attrs(n, {"alpha", "beta", "transA", "transB"});
  const Value x = need_input(n, 0);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 1) fail(n, "needs a 2-D (N, features) input: flatten the map first");
  const Const& b0 = need_const(n, 1, "the weights (B)");
  if (b0.dims.size() != 2) fail(n, "the weights must be a matrix");
  if (!matmul && attr_int(n, "transA", 0) != 0) fail(n, "transA = 1 is not supported");
  const bool trans_b = !matmul && attr_int(n, "transB", 0) != 0;
  const double alpha = matmul ? 1.0 : attr_float(n, "alpha", 1.0f);
  double weight_scale = 0.0;
  const Const b = qdq_ ? qdq_weights(n, b0, trans_b ? 0 : 1, weight_scale) : b0;
  if (qdq_ && alpha != 1.0) fail(n, fmt::format("alpha {} with quantized weights is not supported", alpha));
  const double beta = matmul ? 1.0 : attr_float(n, "beta", 1.0f);
  const auto K = static_cast<std::size_t>(trans_b ? b.dims[1] : b.dims[0]);
  const auto N = static_cast<std::size_t>(trans_b ? b.dims[0] : b.dims[1]);
  if (K != in[0]) fail(n, fmt::format("weights for {} inputs on {}", K, in[0]));
  FloatLayer l;
  l.kind = LayerKind::Dense;
  l.inputs = {x.tensor};
  l.weight_scale = weight_scale;
  l.weight_shape = {K, N};
  l.weights.resize(K * N);
  for (std::size_t k = 0; k < K; ++k) {
    // Row k of the model's input is row perm[k] of tpu-sim's.
    const std::size_t row = x.perm.empty() ? k : x.perm[k];
    for (std::size_t j = 0; j < N; ++j)
      l.weights[row * N + j] = static_cast<float>(alpha * b.values[trans_b ? j * K + k : k * N + j]);
  }
  if (!matmul && n.input_size() > 2 && !n.input(2).empty()) {
    const Const& c = need_const(n, 2, "the bias (C)");
    if (c.values.size() != N && c.values.size() != 1)
      fail(n, fmt::format("a bias C of {} values for {} outputs is not supported", c.values.size(), N));
    for (std::size_t j = 0; j < N; ++j)
      l.bias.push_back(static_cast<float>(beta * c.values[c.values.size() == 1 ? 0 : j]));
  }
  Value out;
  out.tensor = add_layer(n, std::move(l));
  set_output(n, out);
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
  const bool can_fold = x.tensor != 0 && x.perm.empty() && reads_[x.tensor] - renames_[x.tensor] == 1 &&
                        (net_.layers[x.tensor - 1].kind == LayerKind::Conv2d ||
                         net_.layers[x.tensor - 1].kind == LayerKind::Dense) &&
                        net_.layers[x.tensor - 1].act == model::ActFunction::None;
  if (!can_fold && x.perm.empty() && shape(x).size() == 3) {
    // Standalone (after a Concat, as in DenseNet, or on a map other nodes
    // read too): a depthwise 1 x 1 convolution with weight a and bias
    // beta - mean * a per channel (docs/onnx.md).
    const std::size_t C = shape(x)[2];
    const Const& scale = need_const(n, 1, "the scale");
    const Const& bias = need_const(n, 2, "the bias");
    const Const& mean = need_const(n, 3, "the mean");
    const Const& var = need_const(n, 4, "the variance");
    for (const Const* c : {&scale, &bias, &mean, &var})
      if (c->values.size() != C) fail(n, fmt::format("parameters of {} values for {} channels", c->values.size(), C));
    const double eps = attr_float(n, "epsilon", 1e-5f);
    FloatLayer d;
    d.kind = LayerKind::Conv2d;
    d.inputs = {x.tensor};
    d.groups = static_cast<unsigned>(C);
    d.weight_shape = {1, 1, 1, C};
    for (std::size_t c = 0; c < C; ++c) {
      const double a = scale.values[c] / std::sqrt(var.values[c] + eps);
      d.weights.push_back(static_cast<float>(a));
      d.bias.push_back(static_cast<float>(bias.values[c] - mean.values[c] * a));
    }
    Value out;
    out.tensor = add_layer(n, std::move(d));
    set_output(n, out);
    return;
  }
  FloatLayer* l = foldable(n, x, "a Conv, Gemm or MatMul (batch normalization is folded into it)");
  if ((l->kind != LayerKind::Conv2d && l->kind != LayerKind::Dense) || l->act != model::ActFunction::None)
    fail(n, "must follow a Conv, Gemm or MatMul without activation (batch normalization is folded into it)");
  const std::size_t C = l->weight_shape.back();
  const Const& scale = need_const(n, 1, "the scale");
  const Const& bias = need_const(n, 2, "the bias");
  const Const& mean = need_const(n, 3, "the mean");
  const Const& var = need_const(n, 4, "the variance");
  for (const Const* c : {&scale, &bias, &mean, &var})
    if (c->values.size() != C) fail(n, fmt::format("parameters of {} values for {} channels", c->values.size(), C));
  const double eps = attr_float(n, "epsilon", 1e-5f);
  // y = scale * (x - mean) / sqrt(var + eps) + bias with x = W.in + b:
  // W' = W * a, b' = (b - mean) * a + bias, a = scale / sqrt(var + eps), per output.
  if (l->bias.empty()) l->bias.assign(C, 0.0f);
  for (std::size_t c = 0; c < C; ++c) {
    const double a = scale.values[c] / std::sqrt(var.values[c] + eps);
    for (std::size_t i = c; i < l->weights.size(); i += C)
      l->weights[i] = static_cast<float>(l->weights[i] * a);
    l->bias[c] = static_cast<float>((l->bias[c] - mean.values[c]) * a + bias.values[c]);
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
  if (!qdq_ && !x.padded) {
    // Fused into the layer before it when that is a Conv, Gemm or MatMul (an
    // Add for ReLU) without activation that only this node reads; otherwise
    // a standalone affine layer on the vector unit.
    const FloatLayer* p = x.tensor == 0 ? nullptr : &net_.layers[x.tensor - 1];
    const bool fuses = p && x.perm.empty() && reads_[x.tensor] - renames_[x.tensor] == 1 &&
                       p->act == model::ActFunction::None &&
                       (p->kind == LayerKind::Conv2d || p->kind == LayerKind::Dense ||
                        (p->kind == LayerKind::Add && (op == "Relu" || op == "Clip")));
    if (!fuses && op != "Clip") {
      const model::ActFunction f = op == "Relu"      ? model::ActFunction::Relu
                                   : op == "Sigmoid" ? model::ActFunction::Sigmoid
                                                     : model::ActFunction::Tanh;
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
  if (op == "Relu") {
    l->act = model::ActFunction::Relu;
  } else if (op == "Sigmoid") {
    l->act = model::ActFunction::Sigmoid;
  } else if (op == "Tanh") {
    l->act = model::ActFunction::Tanh;
  } else {  // Clip: bounds as inputs (opset 11+) or attributes (before)
    double lo = -INFINITY, hi = INFINITY;
    const auto bound = [&](int i, const char* name, double& v) {
      if (n.input_size() > i && !n.input(i).empty()) {
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
    l->act = model::ActFunction::Relu;
    l->clip_hi = static_cast<float>(hi);
  }
  set_output(n, x);
}

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
  Value out;
  out.tensor = add_layer(n, std::move(l));
  out.perm = x.perm;
  return out;
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
  Value out;
  out.tensor = add_layer(n, std::move(l));
  out.perm = a.perm;
  return out;
}

void Importer::mul(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (n.input_size() != 2) fail(n, "needs two inputs");
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

void Importer::pool(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "GlobalAveragePool") {
    only_attrs(n, {});
    const Value x = need_input(n, 0);
    if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
    FloatLayer l;
    l.kind = LayerKind::GlobalAvgPool2d;
    l.inputs = {x.tensor};
    Value out;
    out.tensor = add_layer(n, std::move(l));
    set_output(n, out);
    return;
  }
  if (op == "ReduceMean") {
    // The mean over H and W: a global average pool, then (keepdims 0) a
    // flatten of its 1 x 1 x C map, a view (docs/onnx.md).
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
    FloatLayer l;
    l.kind = LayerKind::GlobalAvgPool2d;
    l.inputs = {x.tensor};
    Value out;
    out.tensor = add_layer(n, std::move(l));
    if (keep == 0) {
      FloatLayer f;
      f.kind = LayerKind::Flatten;
      f.inputs = {out.tensor};
      out.tensor = add_layer(n, std::move(f));
    }
    set_output(n, out);
    return;
  }
  const bool max = op == "MaxPool";
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

void Importer::add(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (n.input_size() != 2) fail(n, "needs two inputs");
  const bool c0 = is_const(n.input(0)), c1 = is_const(n.input(1));
  if (c0 && c1) {
    const_arith(n);  // shape arithmetic
    return;
  }
  if (c0 || c1) {
    // A bias: folded into the Conv, Gemm or MatMul before it.
    const int vi = c0 ? 1 : 0;
    const Value x = need_value(n, vi);
    if (x.state != QState::Float)
      fail(n, "adds a constant to a quantized tensor: only a bias before the QuantizeLinear is supported (folded into "
              "the Conv, Gemm or MatMul)");
    const Const& b = consts_.at(n.input(1 - vi));
    if (x.tensor == 0 || !x.perm.empty() || reads_[x.tensor] - renames_[x.tensor] != 1)
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
      const std::size_t at = l.kind == LayerKind::Dense ? 1 : one_d_ ? 2 : 3;
      per_channel = b.dims.size() >= at;
      for (std::size_t i = 0; i < b.dims.size(); ++i)
        if (b.dims[i] != 1 && i != b.dims.size() - at) per_channel = false;
    }
    if (!per_channel)
      fail(n, fmt::format("a constant of shape [{}] is not a per-channel bias for {} channels", fmt::join(b.dims, ", "), C));
    if (l.bias.empty()) l.bias.assign(C, 0.0f);
    for (std::size_t c = 0; c < C; ++c) l.bias[c] = static_cast<float>(l.bias[c] + b.values[b.values.size() == 1 ? 0 : c]);
    set_output(n, x);
    return;
  }
  const Value a = need_input(n, 0), b = need_input(n, 1);
  if (shape(a) != shape(b)) fail(n, "adds tensors of different shapes (broadcasting is not supported)");
  if (a.perm != b.perm) fail(n, "adds a flattened map to a tensor of another layout");
  FloatLayer l;
  l.kind = LayerKind::Add;
  l.inputs = {a.tensor, b.tensor};
  Value out;
  out.tensor = add_layer(n, std::move(l));
  out.perm = a.perm;
  set_output(n, out);
}

void Importer::concat(const onnx::NodeProto& n) {
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
  Value out;
  out.tensor = add_layer(n, std::move(l));
  set_output(n, out);
}

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
  Value out;
  out.tensor = add_layer(named, std::move(l));
  return out;
}

// The channel range [begin, end) of a Slice or Split on axis 1 of a map.
void Importer::slice(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (qdq_) fail(n, "is not supported in a QDQ model");
  const Value x = need_input(n, 0);
  if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  const std::size_t C = shape(x)[2];
  const Const& starts = need_const(n, 1, "starts");
  const Const& ends = need_const(n, 2, "ends");
  std::vector<double> axes{1};
  if (n.input_size() > 3 && !n.input(3).empty()) axes = need_const(n, 3, "axes").values;
  if (n.input_size() > 4 && !n.input(4).empty())
    for (double s : need_const(n, 4, "steps").values)
      if (s != 1) fail(n, "steps other than 1 are not supported");
  const double neg_c = one_d_ ? -2 : -3;  // the channels counted from the end
  if (axes.size() != 1 || !(axes[0] == 1 || axes[0] == neg_c) || starts.values.size() != 1 || ends.values.size() != 1)
    fail(n, "only a slice of the channels (axis 1) is supported");
  const auto clampc = [&](double v) {
    if (std::isnan(v)) fail(n, "starts and ends must be numbers");
    if (v < 0) v += static_cast<double>(C);
    return static_cast<std::size_t>(std::clamp(v, 0.0, static_cast<double>(C)));
  };
  const std::size_t b = clampc(starts.values[0]), e = clampc(ends.values[0]);
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
  if (n.input_size() > 1 && !n.input(1).empty()) parts = need_const(n, 1, "split").values;
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

// Shape of a computed tensor: the model's layout, batch 1 (as PyTorch's
// export traced it), a constant for the shape arithmetic that follows.
void Importer::shape_op(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Value x = need_value(n, 0);
  const Shape& s = shape(x);
  Const c;
  c.type = onnx::TensorProto::INT64;
  c.values.push_back(1.0);
  if (s.size() == 3 && one_d_) c.values.insert(c.values.end(), {double(s[2]), double(s[1])});  // (1, C, L)
  else if (s.size() == 3) c.values.insert(c.values.end(), {double(s[2]), double(s[0]), double(s[1])});
  else for (std::size_t d : s) c.values.push_back(static_cast<double>(d));
  c.dims = {static_cast<std::int64_t>(c.values.size())};
  consts_[n.output(0)] = std::move(c);
}

void Importer::gather(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  const Const& data = need_const(n, 0, "the data (tpu-sim gathers only from constants, such as a Shape)");
  const Const& idx = need_const(n, 1, "the indices");
  if (data.dims.size() != 1 || attr_int(n, "axis", 0) != 0) fail(n, "only a gather from a 1-D constant is supported");
  Const c;
  c.type = data.type;
  c.dims = idx.dims;
  const auto size = static_cast<double>(data.values.size());
  for (double i : idx.values) {
    const double k = i < 0 ? i + size : i;
    if (!(k >= 0 && k < size) || k != std::floor(k)) fail(n, fmt::format("index {} is outside the {} values", i, data.values.size()));
    c.values.push_back(data.values[static_cast<std::size_t>(k)]);
  }
  consts_[n.output(0)] = std::move(c);
}

// Add, Mul, Div of two constants (shape arithmetic), element-wise or with a
// scalar; integer division truncates.
void Importer::const_arith(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const std::string& op = n.op_type();
  if (n.input_size() != 2 || !is_const(n.input(0)) || !is_const(n.input(1)))
    fail(n, fmt::format("{} of computed tensors is not supported (only of constants, such as shape arithmetic)", op));
  const Const& a = consts_.at(n.input(0));
  const Const& b = consts_.at(n.input(1));
  const bool ints = a.type != onnx::TensorProto::FLOAT && a.type != onnx::TensorProto::DOUBLE;
  const std::size_t len = std::max(a.values.size(), b.values.size());
  if (!((a.values.size() == len || a.values.size() == 1) && (b.values.size() == len || b.values.size() == 1)))
    fail(n, "constants of different sizes (only element-wise or with a scalar)");
  Const c;
  c.type = a.type;
  c.dims = a.values.size() == len ? a.dims : b.dims;
  for (std::size_t i = 0; i < len; ++i) {
    const double x = a.values[a.values.size() == 1 ? 0 : i], y = b.values[b.values.size() == 1 ? 0 : i];
    double v = op == "Add" ? x + y : op == "Mul" ? x * y : 0.0;
    if (op == "Div") {
      if (y == 0) fail(n, "divides by zero");
      v = ints ? std::trunc(x / y) : x / y;
    }
    c.values.push_back(v);
  }
  consts_[n.output(0)] = std::move(c);
}

void Importer::flatten(const onnx::NodeProto& n) {
  if (n.op_type() == "Reshape" && n.input_size() == 2 && is_const(n.input(1))) {
    // The channel shuffle: Reshape (N, C, H, W) -> (N, g, C/g, H, W), Transpose
    // (0, 2, 1, 3, 4), Reshape back to (N, C, H, W): output channel j reads
    // input channel (j % g) * (C / g) + j / g (docs/onnx.md).
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
      return;
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
      return;
    }
  }
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

void Importer::pad(const onnx::NodeProto& n) {
  only_attrs(n, {"mode", "pads", "value"});
  const std::string mode = attr_string(n, "mode", "constant");
  if (mode != "constant") fail(n, fmt::format("mode '{}' is not supported (only constant zero padding)", mode));
  Value x = need_value(n, 0);
  if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  std::vector<double> pads;
  if (n.input_size() > 1 && !n.input(1).empty()) pads = need_const(n, 1, "the pads").values;
  else for (std::int64_t p : attr_ints(n, "pads", {})) pads.push_back(static_cast<double>(p));
  double value = attr_float(n, "value", 0.0f);
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Const& v = need_const(n, 2, "the constant value");
    value = v.values.empty() ? 0.0 : v.values[0];
  }
  if (n.input_size() > 3 && !n.input(3).empty()) fail(n, "the axes input is not supported");
  if (value != 0.0) fail(n, fmt::format("padding with {} is not supported (only zeros)", value));
  if (one_d_ && pads.size() == 6) pads = {0, 0, 0, pads[2], 0, 0, 0, pads[5]};  // (N, C, L): L as W
  // [n, c, h, w begin; n, c, h, w end]: only h and w, not negative.
  if (pads.size() != 8 || pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0)
    fail(n, "only padding of H and W of a 4-D map is supported");
  for (double p : pads)
    if (p < 0 || p > 65536) fail(n, fmt::format("pad {} is not supported", p));
  x.padded = true;
  x.pad_node = n.name();
  x.pad[0] += static_cast<unsigned>(pads[2]);
  x.pad[1] += static_cast<unsigned>(pads[6]);
  x.pad[2] += static_cast<unsigned>(pads[3]);
  x.pad[3] += static_cast<unsigned>(pads[7]);
  set_output(n, x);
}

// ---- QDQ models (docs/onnx.md, "QDQ models") ----

namespace {

double round_even(double v) { return std::nearbyint(v); }  // the default rounding mode: ties to even

std::string type_name(int t) {
  return onnx::TensorProto::DataType_IsValid(t)
             ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
             : fmt::format("type {}", t);
}

// A zero point in the model's own terms (uint8: 0..255).
std::int32_t model_zero(const compiler::QuantParams& q, int type) {
  return type == onnx::TensorProto::UINT8 ? q.zero_point + 128 : q.zero_point;
}

bool same_quant(const compiler::QuantParams& a, const compiler::QuantParams& b) {
  return a.zero_point == b.zero_point && std::fabs(a.scale - b.scale) <= 1e-6 * b.scale;
}

// Scales and zero points of a QuantizeLinear or DequantizeLinear on a
// constant: per tensor, or one per index of `axis`.
struct AxisQuant {
  std::vector<double> scales, zeros;
  int type = onnx::TensorProto::UINT8;
  std::size_t axis = 0, inner = 1;
  std::size_t channel(std::size_t i) const { return scales.size() == 1 ? 0 : (i / inner) % scales.size(); }
};

}  // namespace

compiler::QuantParams Importer::act_quant(const onnx::NodeProto& n, int& type) const {
  const Const& s = need_const(n, 1, "the scale");
  if (s.values.size() != 1)
    fail(n, "per-axis quantization of a computed tensor is not supported (tpu-sim quantizes an activation with one "
            "scale and zero point)");
  compiler::QuantParams q;
  q.scale = s.values[0];
  if (!(std::isfinite(q.scale) && q.scale > 0))
    fail(n, fmt::format("scale {} is not supported (a positive finite number)", q.scale));
  double z = 0.0;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    const Const& zc = need_const(n, 2, "the zero point");
    if (zc.values.size() != 1)
      fail(n, "per-axis quantization of a computed tensor is not supported (tpu-sim quantizes an activation with one "
              "scale and zero point)");
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

void Importer::quantize_linear(const onnx::NodeProto& n) {
  only_attrs(n, {"axis"});
  if (n.input_size() < 2) fail(n, "needs an input and a scale");
  if (is_const(n.input(0))) {
    // Float weights quantized in the graph: folded, as the ONNX operator
    // computes it (x / scale in float32, rounded to even, saturated).
    const Const x = consts_.at(n.input(0));
    const Const& s = need_const(n, 1, "the scale");
    AxisQuant a;
    a.scales = s.values;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const Const& z = need_const(n, 2, "the zero point");
      a.zeros = z.values;
      a.type = z.type;
    } else {
      a.zeros.assign(a.scales.size(), 0.0);
    }
    if (a.type != onnx::TensorProto::INT8 && a.type != onnx::TensorProto::UINT8)
      fail(n, fmt::format("quantizing to {} is not supported (int8 or uint8)", type_name(a.type)));
    if (a.scales.empty() || a.zeros.size() != a.scales.size()) fail(n, "the scale and the zero point differ in size");
    if (a.scales.size() > 1) {
      std::int64_t axis = attr_int(n, "axis", 1);
      const auto rank = static_cast<std::int64_t>(x.dims.size());
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank || x.dims[static_cast<std::size_t>(axis)] != static_cast<std::int64_t>(a.scales.size()))
        fail(n, fmt::format("{} scales do not match axis {} of a constant of shape [{}]", a.scales.size(),
                            attr_int(n, "axis", 1), fmt::join(x.dims, ", ")));
      a.axis = static_cast<std::size_t>(axis);
      for (std::size_t d = a.axis + 1; d < x.dims.size(); ++d) a.inner *= static_cast<std::size_t>(x.dims[d]);
    }
    const double lo = a.type == onnx::TensorProto::INT8 ? -128.0 : 0.0;
    Const q;
    q.dims = x.dims;
    q.type = a.type;
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      const std::size_t c = a.channel(i);
      if (!(std::fabs(x.values[i]) <= FLT_MAX && a.scales[c] > 0 && a.scales[c] <= FLT_MAX))
        fail(n, "quantizes a value that is not a finite float, or with a scale that is not a positive float");
      const double v = static_cast<float>(x.values[i]) / static_cast<float>(a.scales[c]);
      q.values.push_back(std::clamp(round_even(v) + a.zeros[c], lo, lo + 255.0));
    }
    consts_[n.output(0)] = std::move(q);
    return;
  }
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
      if (keeps)
        fail(n, fmt::format("quantizes the output of {} '{}' with scale {} and zero point {}, its input with {} and "
                            "{}: tpu-sim's max-pool and flatten keep their input's quantization",
                            layer_op_.at(x.tensor - 1), l->name, q.scale, model_zero(q, type), x.q.scale,
                            model_zero(x.q, x.qtype)));
      if (!l || reads_[x.tensor] - renames_[x.tensor] != 1)
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
        fail(n, fmt::format("quantizes the output of {} '{}' with scale {} and zero point {}, its input with {} and "
                            "{}: tpu-sim's max-pool and flatten keep their input's quantization",
                            layer_op_.at(x.tensor - 1), l.name, q.scale, model_zero(q, type), in->second.scale,
                            model_zero(in->second, type)));
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
    // Quantized weights or biases: their real values, (q - zero) * scale in
    // float32 as the operator computes them; the integers stay recoverable.
    const Const& x = consts_.at(n.input(0));
    if (x.type != onnx::TensorProto::INT8 && x.type != onnx::TensorProto::UINT8 && x.type != onnx::TensorProto::INT32)
      fail(n, fmt::format("dequantizes {} values (int8, uint8 or int32 are supported)", type_name(x.type)));
    Const d;
    d.dims = x.dims;
    d.dequantized = true;
    d.dq_node = n.name();
    d.qtype = x.type;
    d.scales = need_const(n, 1, "the scale").values;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const Const& z = need_const(n, 2, "the zero point");
      if (z.type != x.type)
        fail(n, fmt::format("the zero point is {}, the values {}", type_name(z.type), type_name(x.type)));
      d.zeros = z.values;
    } else {
      d.zeros.assign(d.scales.size(), 0.0);
    }
    if (d.scales.empty() || d.zeros.size() != d.scales.size()) fail(n, "the scale and the zero point differ in size");
    std::size_t inner = 1;
    if (d.scales.size() > 1) {
      std::int64_t axis = attr_int(n, "axis", 1);
      const auto rank = static_cast<std::int64_t>(x.dims.size());
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank || x.dims[static_cast<std::size_t>(axis)] != static_cast<std::int64_t>(d.scales.size()))
        fail(n, fmt::format("{} scales do not match axis {} of a constant of shape [{}]", d.scales.size(),
                            attr_int(n, "axis", 1), fmt::join(x.dims, ", ")));
      d.axis = static_cast<std::size_t>(axis);
      for (std::size_t k = d.axis + 1; k < x.dims.size(); ++k) inner *= static_cast<std::size_t>(x.dims[k]);
    }
    for (double s : d.scales)
      if (!(s > 0 && s <= FLT_MAX)) fail(n, fmt::format("scale {} is not supported (a positive finite number)", s));
    for (std::size_t i = 0; i < x.values.size(); ++i) {
      const std::size_t c = d.scales.size() == 1 ? 0 : (i / inner) % d.scales.size();
      const float v = static_cast<float>(x.values[i] - d.zeros[c]) * static_cast<float>(d.scales[c]);
      d.values.push_back(v);
    }
    consts_[n.output(0)] = std::move(d);
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

void Importer::cast(const onnx::NodeProto& n) {
  only_attrs(n, {"to"});
  const std::int64_t to = attr_int(n, "to", 0);
  if (n.input_size() < 1) fail(n, "needs an input");
  if (is_const(n.input(0))) {
    Const c = consts_.at(n.input(0));
    double lo = 0, hi = 0;
    switch (to) {
      case onnx::TensorProto::FLOAT:
        for (double& v : c.values)
          v = std::fabs(v) <= FLT_MAX || std::isnan(v) ? static_cast<double>(static_cast<float>(v))
                                                       : std::copysign(INFINITY, v);
        break;
      case onnx::TensorProto::DOUBLE:
        break;
      case onnx::TensorProto::BOOL:
        for (double& v : c.values) v = v != 0.0;
        break;
      case onnx::TensorProto::INT8: lo = -128, hi = 127; break;
      case onnx::TensorProto::UINT8: lo = 0, hi = 255; break;
      case onnx::TensorProto::INT32: lo = -2147483648.0, hi = 2147483647.0; break;
      case onnx::TensorProto::INT64: lo = -9.2e18, hi = 9.2e18; break;
      default:
        fail(n, fmt::format("a Cast of a constant to {} is not supported", type_name(static_cast<int>(to))));
    }
    if (hi > lo)
      for (double& v : c.values) {
        v = std::trunc(v);
        if (!(v >= lo && v <= hi))
          fail(n, fmt::format("casts {} to {}, out of its range", v, type_name(static_cast<int>(to))));
      }
    c.type = static_cast<int>(to);
    c.dequantized = false;
    consts_[n.output(0)] = std::move(c);
    return;
  }
  const Value x = need_value(n, 0, false, true);
  if (x.state != QState::Int || to != x.qtype)
    fail(n, fmt::format("a Cast of a computed tensor to {} is not supported (only of a QuantizeLinear's integers to "
                        "their own type)", type_name(static_cast<int>(to))));
  bind(n.output(0), x);
}

void Importer::constant_of_shape(const onnx::NodeProto& n) {
  only_attrs(n, {"value"});
  const Const& shp = need_const(n, 0, "the shape");
  Const c;
  std::size_t count = 1;
  for (double d : shp.values) {
    if (!(d >= 0 && d <= 16777216.0)) fail(n, fmt::format("dimension {} is not supported", d));
    c.dims.push_back(static_cast<std::int64_t>(d));
    count *= static_cast<std::size_t>(d);
    if (count > 16777216) fail(n, "makes a constant of more than 16777216 values");
  }
  double value = 0.0;
  if (const auto* a = attr(n, "value")) {
    const Const v = read_tensor(a->t(), "the value");
    if (v.values.size() != 1) fail(n, "the value must hold one element");
    value = v.values[0];
    c.type = v.type;
  }
  c.values.assign(count, value);
  consts_[n.output(0)] = std::move(c);
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

// After the graph: every layer's output quantization, checked against what
// tpu-sim can compute; warnings where it rounds differently.
void Importer::finish_qdq() {
  net_.qdq = true;
  net_.tensor_quant.assign(net_.layers.size() + 1, TensorQuant{});
  for (const auto& [t, q] : tq_) net_.tensor_quant.at(t) = TensorQuant{true, q};
  if (!net_.tensor_quant[0].set) fail("the model's input is not quantized (no QuantizeLinear reads it)");
  bool requantizes = false;
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const FloatLayer& l = net_.layers[i];
    TensorQuant& tq = net_.tensor_quant[i + 1];
    const std::string node = fmt::format("node '{}' ({})", l.name, layer_op_.at(i));
    const bool last = i + 1 == net_.layers.size();
    switch (l.kind) {
      case LayerKind::MaxPool2d:
      case LayerKind::Flatten:
        if (!tq.set) tq = net_.tensor_quant.at(l.inputs.at(0));
        break;
      case LayerKind::Concat:
      case LayerKind::Mul:
      case LayerKind::Affine:
      case LayerKind::Upsample:  // refused at its node already
        fail(fmt::format("{}: is not supported in a QDQ model", node));
      case LayerKind::Dense:
      case LayerKind::Conv2d:
        if (!tq.set && !(last && l.act == model::ActFunction::None))
          fail(fmt::format("{}: its output is not quantized (no QuantizeLinear follows it): tpu-sim computes in int8 "
                           "(only the last layer, without activation, may give its int32 accumulators)", node));
        if (tq.set && std::isfinite(l.clip_hi)) {
          const double top = round_even(l.clip_hi / tq.quant.scale) + tq.quant.zero_point;
          if (top < 127)
            fail(fmt::format("{}: Clip at {} is inside its output's quantized range (up to {:.6g}): tpu-sim clips "
                             "only where int8 saturates", node, l.clip_hi, tq.quant.scale * (127 - tq.quant.zero_point)));
        }
        if (tq.set) {
          // The compiler's (M, S) needs m < 2^31 (docs/quantization.md, section 1).
          const double m = net_.tensor_quant.at(l.inputs.at(0)).quant.scale * l.weight_scale / tq.quant.scale;
          if (!(m < 2147483648.0))
            fail(fmt::format("{}: the requantization multiplier s_in * s_w / s_out = {:.6g} is 2^31 or more, which "
                             "tpu-sim cannot apply (check the scales)", node, m));
        }
        requantizes = requantizes || tq.set;
        break;
      case LayerKind::Add:
      case LayerKind::AvgPool2d:
      case LayerKind::GlobalAvgPool2d:
        if (!tq.set)
          fail(fmt::format("{}: its output is not quantized (no QuantizeLinear follows it): tpu-sim computes in int8",
                           node));
        requantizes = true;
        if (l.kind == LayerKind::Add) {
          const double sa = net_.tensor_quant.at(l.inputs.at(0)).quant.scale;
          const double sb = net_.tensor_quant.at(l.inputs.at(1)).quant.scale;
          const double m = std::max(sa, sb) / 127.0 / tq.quant.scale;
          if (!(m < 2147483648.0))
            fail(fmt::format("{}: the requantization multiplier (s_hi / 127) / s_out = {:.6g} is 2^31 or more, "
                             "which tpu-sim cannot apply (check the scales)", node, m));
          const compiler::AddFactors f = compiler::add_factors(sa, sb);
          // The operand of the smaller scale is weighted d_lo / 127 for s_lo / s_hi.
          const double ratio = std::min(sa, sb) / std::max(sa, sb);
          const double got = static_cast<double>(std::min(f.a, f.b)) / 127.0;
          if (got != ratio)
            warn(fmt::format("{}: the operands' scales {:.6g} and {:.6g} are matched by integer factors {} and {}: the "
                             "operand of the smaller scale is weighted {:.6g} instead of {:.6g} ({:+.2g}%)",
                             node, sa, sb, f.a, f.b, got, ratio, 100.0 * (got / ratio - 1.0)));
        }
        break;
    }
  }
  if (requantizes)
    warn("requantization: tpu-sim multiplies by a 31-bit fixed-point M / 2^S and rounds ties up, where the model's "
         "QuantizeLinear rounds a float quotient ties to even; an int8 value can differ by one (docs/onnx.md, \"QDQ "
         "models\", measures how often)");
}

// A Slice of a 1-D constant (shape arithmetic, as PyTorch's export of
// F.interpolate(size=...) slices the input's Shape).
void Importer::const_slice(const onnx::NodeProto& n) {
  only_attrs(n, {});
  const Const& x = need_const(n, 0, "the data");
  if (x.dims.size() != 1) fail(n, "only a slice of a 1-D constant or of a map's channels is supported");
  const Const& starts = need_const(n, 1, "starts");
  const Const& ends = need_const(n, 2, "ends");
  if (n.input_size() > 3 && !n.input(3).empty())
    for (double a : need_const(n, 3, "axes").values)
      if (a != 0 && a != -1) fail(n, "a slice of a 1-D constant has axes [0]");
  if (n.input_size() > 4 && !n.input(4).empty())
    for (double s : need_const(n, 4, "steps").values)
      if (s != 1) fail(n, "steps other than 1 are not supported");
  if (starts.values.size() != 1 || ends.values.size() != 1) fail(n, "a slice of a 1-D constant has one start and end");
  const double len = static_cast<double>(x.values.size());
  const auto clampi = [&](double v) {
    if (std::isnan(v)) fail(n, "starts and ends must be numbers");
    if (v < 0) v += len;
    return static_cast<std::size_t>(std::clamp(v, 0.0, len));
  };
  const std::size_t b = clampi(starts.values[0]), e = clampi(ends.values[0]);
  Const c;
  c.type = x.type;
  if (e > b) c.values.assign(x.values.begin() + static_cast<std::ptrdiff_t>(b), x.values.begin() + static_cast<std::ptrdiff_t>(e));
  c.dims = {static_cast<std::int64_t>(c.values.size())};
  consts_[n.output(0)] = std::move(c);
}

// Resize (opset 10 on) and Upsample (before): nearest upsampling by integer
// factors along H and W (L of a 1-D map), docs/onnx.md.
void Importer::resize(const onnx::NodeProto& n) {
  const bool upsample = n.op_type() == "Upsample";
  if (upsample) only_attrs(n, {"mode", "scales"});
  else only_attrs(n, {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                      "extrapolation_value"});
  if (qdq_) fail(n, "is not supported in a QDQ model");
  const Value x = need_input(n, 0);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 3) fail(n, "needs a 4-D (N, C, H, W) or 3-D (N, C, L) input");
  const std::string mode = attr_string(n, "mode", "nearest");
  if (mode != "nearest") fail(n, fmt::format("mode '{}' is not supported (only nearest)", mode));
  const std::string ctm = upsample ? "asymmetric" : attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const std::string nearest = upsample ? "floor" : attr_string(n, "nearest_mode", "round_prefer_floor");
  if (ctm == "tf_crop_and_resize") fail(n, "coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  // The model's axes: (N, C, H, W), or (N, C, L) for a 1-D model.
  const std::vector<double> model_in = one_d_ ? std::vector<double>{1, double(in[2]), double(in[1])}
                                              : std::vector<double>{1, double(in[2]), double(in[0]), double(in[1])};
  std::vector<double> factors;
  if (upsample && attr(n, "scales")) {
    for (float f : attr(n, "scales")->floats()) factors.push_back(f);
  } else {
    // Resize-10 and Upsample-9: (X, scales); Resize-11 on: (X, roi, scales, sizes).
    const int si = n.input_size() == 2 ? 1 : 2;
    const bool has_scales = n.input_size() > si && !n.input(si).empty() && !need_const(n, si, "the scales").values.empty();
    const bool has_sizes = !has_scales && n.input_size() > 3 && !n.input(3).empty();
    if (has_scales) {
      factors = need_const(n, si, "the scales").values;
    } else if (has_sizes) {
      const Const& sizes = need_const(n, 3, "the sizes");
      if (sizes.values.size() != model_in.size())
        fail(n, fmt::format("{} sizes for a {}-D input", sizes.values.size(), model_in.size()));
      for (std::size_t a = 0; a < model_in.size(); ++a) {
        if (!(sizes.values[a] >= 1) || sizes.values[a] != std::floor(sizes.values[a] / model_in[a]) * model_in[a])
          fail(n, fmt::format("sizes [{}] are not whole multiples of the input's [{}]: only integer factors are "
                              "supported", fmt::join(sizes.values, ", "), fmt::join(model_in, ", ")));
        factors.push_back(sizes.values[a] / model_in[a]);
      }
    } else {
      fail(n, "needs constant scales or sizes");
    }
  }
  if (factors.size() != model_in.size())
    fail(n, fmt::format("{} scales for a {}-D input", factors.size(), model_in.size()));
  const std::size_t sp = 2;  // the first spatial axis
  bool ok = factors[0] == 1 && factors[1] == 1;
  for (std::size_t a = sp; a < factors.size(); ++a)
    ok = ok && factors[a] >= 1 && factors[a] <= 255 && factors[a] == std::floor(factors[a]);
  if (!ok)
    fail(n, fmt::format("scales [{}] are not supported (only integer factors 1 to 255 along {}, and 1 for N and C)",
                        fmt::join(factors, ", "), one_d_ ? "L" : "H and W"));
  FloatLayer l;
  l.kind = LayerKind::Upsample;
  l.inputs = {x.tensor};
  l.stride_h = one_d_ ? 1 : static_cast<unsigned>(factors[2]);
  l.stride_w = static_cast<unsigned>(factors.back());
  Value out;
  out.tensor = add_layer(n, std::move(l));  // first: it bounds the output's size
  for (std::size_t a = sp; a < factors.size(); ++a) {
    const std::string why = resize_nearest_mismatch(ctm, nearest, static_cast<std::size_t>(model_in[a]),
                                                    static_cast<unsigned>(factors[a]));
    if (!why.empty()) fail(n, why);
  }
  set_output(n, out);
}

void Importer::node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (const std::string why = node_operator_error(n.domain(), op); !why.empty()) fail(n, why);
  if (n.output_size() < 1) fail(n, "has no output");
  if (op == "Constant") {
    only_attrs(n, {"value"});
    const auto* v = attr(n, "value");
    if (!v) fail(n, "only a Constant with a tensor 'value' is supported");
    consts_[n.output(0)] = read_tensor(v->t(), "the Constant");
  } else if (op == "Identity" || op == "Dropout") {
    if (op == "Dropout") {
      only_attrs(n, {"ratio", "seed", "is_test"});
      no_extra_outputs(n, 1);
      if (n.input_size() > 2 && !n.input(2).empty()) {
        const Const& t = need_const(n, 2, "training_mode");
        if (!t.values.empty() && t.values[0] != 0) fail(n, "training_mode = true is not supported");
      }
    } else {
      only_attrs(n, {});
    }
    if (n.input_size() < 1) fail(n, "needs an input");
    if (is_const(n.input(0))) consts_[n.output(0)] = consts_.at(n.input(0));
    else bind(n.output(0), need_value(n, 0, true, true));
  } else if (op == "Conv") {
    conv(n);
  } else if (op == "Gemm" || op == "MatMul") {
    gemm(n, op == "MatMul");
  } else if (op == "BatchNormalization") {
    batchnorm(n);
  } else if (op == "Relu" || op == "Clip" || op == "Sigmoid" || op == "Tanh") {
    activation(n);
  } else if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "ReduceMean") {
    pool(n);
  } else if (op == "Add") {
    add(n);
  } else if (op == "Concat") {
    if (n.input_size() > 0 && is_const(n.input(0))) {
      // Constants (shape arithmetic) along axis 0.
      only_attrs(n, {"axis"});
      Const c;
      c.type = onnx::TensorProto::INT64;
      for (int i = 0; i < n.input_size(); ++i) {
        const Const& p = need_const(n, i, "a part (all constants or all computed)");
        if (p.dims.size() > 1) fail(n, "only 1-D constants are concatenated");
        c.values.insert(c.values.end(), p.values.begin(), p.values.end());
      }
      c.dims = {static_cast<std::int64_t>(c.values.size())};
      consts_[n.output(0)] = std::move(c);
    } else {
      concat(n);
    }
  } else if (op == "Slice" && n.input_size() > 0 && is_const(n.input(0))) {
    const_slice(n);
  } else if (op == "Slice") {
    slice(n);
  } else if (op == "Resize" || op == "Upsample") {
    resize(n);
  } else if (op == "Split") {
    split(n);
  } else if (op == "Transpose") {
    transpose(n);
  } else if (op == "Shape") {
    shape_op(n);
  } else if (op == "Gather") {
    gather(n);
  } else if (op == "Mul" && n.input_size() == 2 && !is_const(n.input(0)) && !is_const(n.input(1))) {
    mul(n);
  } else if (op == "HardSigmoid" || op == "HardSwish") {
    hard_sigmoid(n);
  } else if (op == "Mul" || op == "Div") {
    const_arith(n);
  } else if (op == "Flatten" || op == "Reshape") {
    flatten(n);
  } else if (op == "Pad") {
    pad(n);
  } else if (op == "QuantizeLinear") {
    quantize_linear(n);
  } else if (op == "DequantizeLinear") {
    dequantize_linear(n);
  } else if (op == "Cast") {
    cast(n);
  } else if (op == "ConstantOfShape") {
    constant_of_shape(n);
  } else {  // node_operator_error lists the operators above
    fail(n, "operator not supported (docs/onnx.md lists the supported ones)");
  }
}

FloatNet Importer::run() {
  net_.name = g_.name();
  std::set<std::string> inits;
  for (const auto& t : g_.initializer()) {
    inits.insert(t.name());
    consts_[t.name()] = read_tensor(t, "initializer");
  }
  // The one real input.
  const onnx::ValueInfoProto* input = nullptr;
  for (const auto& v : g_.input()) {
    if (inits.count(v.name())) continue;
    if (input) fail("the model has more than one input; tpu-sim takes one");
    input = &v;
  }
  if (!input) fail("the model has no input");
  if (g_.output_size() != 1) fail(fmt::format("the model has {} outputs; tpu-sim takes one", g_.output_size()));
  const auto& tt = input->type().tensor_type();
  if (!input->type().has_tensor_type() || tt.elem_type() != onnx::TensorProto::FLOAT)
    fail(fmt::format("input '{}' must be a float32 tensor", input->name()));
  std::vector<std::size_t> dims;
  for (int i = 1; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (!d.has_dim_value() || d.dim_value() < 1)
      fail(fmt::format("input '{}': dimension {} must be a fixed size", input->name(), i));
    dims.push_back(static_cast<std::size_t>(d.dim_value()));
  }
  if (!within_tensor_limit(dims))
    fail(fmt::format("input '{}', of shape [{}] per sample, has more than {} elements (tpu-sim's limit)",
                     input->name(), fmt::join(dims, ", "), kMaxTensorElements));
  if (dims.size() == 3) {
    net_.model_input_shape = dims;
    net_.input_shape = {dims[1], dims[2], dims[0]};
  } else if (dims.size() == 2) {
    one_d_ = true;  // (N, C, L): H = 1, W = L
    net_.model_input_shape = dims;
    net_.input_shape = {1, dims[1], dims[0]};
  } else if (dims.size() == 1) {
    net_.model_input_shape = net_.input_shape = dims;
  } else {
    fail(fmt::format("input '{}' must be (N, C, H, W), (N, C, L) or (N, features), not of rank {}", input->name(),
                     tt.shape().dim_size()));
  }
  shapes_.push_back(net_.input_shape);
  for (const auto& n : g_.node()) {
    for (const auto& i : n.input()) ++uses_[i];
    if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear") qdq_ = true;
  }
  for (const auto& o : g_.output()) ++uses_[o.name()];
  first_new_tensor_ = 1;
  bind(input->name(), Value{});
  names_.insert("input");

  for (const auto& n : g_.node()) {
    first_new_tensor_ = net_.layers.size() + 1;
    node(n);
  }

  const std::string& out_name = g_.output(0).name();
  const auto it = values_.find(out_name);
  if (it == values_.end()) fail(fmt::format("output '{}' is not computed from the input", out_name));
  const Value& out = it->second;
  if (out.padded) fail(fmt::format("output '{}' comes from a Pad", out_name));
  if (net_.layers.empty() || out.tensor != net_.layers.size())
    fail(fmt::format("output '{}' must be the last layer's result", out_name));
  const Shape& s = shapes_.back();
  net_.model_output_shape = s.size() == 3 ? (one_d_ ? Shape{s[2], s[1]} : Shape{s[2], s[0], s[1]}) : s;
  net_.output_perm = out.perm;
  if (qdq_) finish_qdq();
  return std::move(net_);
}

}  // namespace

FloatNet import_onnx_model(onnx::ModelProto model, const std::string& where) {
  validate_model(model, where);  // first: libonnx trusts strides and dims
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw FileError(one_line(fmt::format("{}: the ONNX checker rejects the model: {}", where, e.what())));
  }
  // The importer computes every shape itself, and refuses any graph whose
  // shapes it cannot; libonnx's shape inference runs after it, as a check of
  // the shapes the model declares, since libonnx 1.12 trusts shapes: a Conv
  // reading a tensor of fewer dimensions than its weights reads past the
  // input's shape (SIGSEGV; found by fuzz_onnx).
  FloatNet net = Importer(model.graph(), where).run();
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    throw FileError(one_line(fmt::format("{}: ONNX shape inference fails: {}", where, e.what())));
  }
  return net;
}

FloatNet import_onnx(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw FileError(fmt::format("{}: not an ONNX model (the protobuf does not parse)", path));
  return import_onnx_model(std::move(model), path);
}

std::optional<bool> onnx_has_qdq_nodes(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return std::nullopt;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear") return true;
  return false;
}

}  // namespace tpu::onnximport
