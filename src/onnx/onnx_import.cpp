// The ONNX headers come first: <sys/mman.h>, which SystemC pulls in through
// compiler/network.h, defines a MAP_TYPE macro that breaks onnx/defs/parser.h.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx/onnx_import.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "common/file_io.h"
#include "onnx/float_exec.h"

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
};

// A tensor computed by the network: a tpu tensor id, possibly with a pending
// constant padding (a Pad node waiting for its Conv or pool) or, for a
// flattened map, the permutation from the model's feature order to tpu-sim's.
struct Value {
  std::size_t tensor = 0;
  bool padded = false;
  std::string pad_node;
  unsigned pad[4] = {0, 0, 0, 0};  // top, bottom, left, right
  std::vector<std::size_t> perm;   // perm[model index] = tpu index; empty: identity
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
  Value need_value(const onnx::NodeProto& n, int i, bool allow_pad = false) const {
    if (i >= n.input_size() || n.input(i).empty()) fail(n, fmt::format("input {} is missing", i));
    const auto it = values_.find(n.input(i));
    if (it == values_.end()) {
      if (is_const(n.input(i)))
        fail(n, fmt::format("input '{}' is a constant; tpu-sim computes only on the network's input", n.input(i)));
      fail(n, fmt::format("input '{}' is not produced by an earlier node", n.input(i)));
    }
    if (it->second.padded && !allow_pad)
      fail(n, fmt::format("reads the output of Pad '{}': a Pad can only feed a Conv, MaxPool or AveragePool",
                          it->second.pad_node));
    return it->second;
  }
  const Shape& shape(const Value& v) const { return shapes_.at(v.tensor); }
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
  void pool(const onnx::NodeProto& n);
  void add(const onnx::NodeProto& n);
  void flatten(const onnx::NodeProto& n);
  void pad(const onnx::NodeProto& n);
  void node(const onnx::NodeProto& n);

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
};

Const Importer::read_tensor(const onnx::TensorProto& t, const std::string& what) const {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    fail(fmt::format("{} '{}' keeps its data in an external file, which tpu-sim does not read", what, t.name()));
  Const c;
  std::size_t count = 1;
  for (std::int64_t d : t.dims()) {
    if (d < 0) fail(fmt::format("{} '{}' has a negative dimension", what, t.name()));
    c.dims.push_back(d);
    count *= static_cast<std::size_t>(d);
  }
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
      if (t.has_raw_data()) from_raw(std::uint8_t{0});
      else c.values.assign(t.int32_data().begin(), t.int32_data().end());
      break;
    default:
      fail(fmt::format("{} '{}' has data type {}, which tpu-sim does not read (float, double, int32, int64, bool)",
                       what, t.name(), onnx::TensorProto::DataType_Name(t.data_type())));
  }
  if (c.values.size() != count)
    fail(fmt::format("{} '{}' has {} values for {} elements", what, t.name(), c.values.size(), count));
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
  try {
    shapes_.push_back(float_layer_shape(l, shapes_));
  } catch (const compiler::CompileError& e) {
    fail(n, e.what());
  }
  net_.layers.push_back(std::move(l));
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
  const auto strides = attr_ints(n, "strides", {1, 1});
  const auto pads = attr_ints(n, "pads", {0, 0, 0, 0});
  const auto dil = attr_ints(n, "dilations", {1, 1});
  if (strides.size() != 2 || pads.size() != 4 || dil.size() != 2)
    fail(n, "only 2-D windows are supported (strides, pads and dilations of a 2-D map)");
  if (dil[0] != 1 || dil[1] != 1)
    fail(n, fmt::format("dilations [{}, {}] are not supported (tpu-sim's convolutions and pools are not dilated)",
                        dil[0], dil[1]));
  for (std::int64_t s : strides)
    if (s < 1 || s > 65536) fail(n, fmt::format("stride {} is not supported", s));
  for (std::int64_t p : pads)
    if (p < 0 || p > 65536) fail(n, fmt::format("pad {} is not supported", p));
  l.stride_h = static_cast<unsigned>(strides[0]);
  l.stride_w = static_cast<unsigned>(strides[1]);
  // ONNX pads: [top, left, bottom, right].
  l.pad_top += static_cast<unsigned>(pads[0]);
  l.pad_left += static_cast<unsigned>(pads[1]);
  l.pad_bottom += static_cast<unsigned>(pads[2]);
  l.pad_right += static_cast<unsigned>(pads[3]);
  if (is_pool) {
    if (l.pad_top >= l.kernel_h || l.pad_bottom >= l.kernel_h || l.pad_left >= l.kernel_w ||
        l.pad_right >= l.kernel_w)
      fail(n, fmt::format("padding [{}, {}, {}, {}] (top, bottom, left, right) must be smaller than the {}x{} window",
                          l.pad_top, l.pad_bottom, l.pad_left, l.pad_right, l.kernel_h, l.kernel_w));
    if (attr_int(n, "ceil_mode", 0) != 0) {
      // Supported when rounding up gives the same output size.
      const auto same = [](std::size_t size, unsigned k, unsigned s, unsigned a, unsigned b) {
        const std::size_t span = size + a + b - k;
        return span % s == 0;
      };
      if (in.size() == 3 && !(same(in[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom) &&
                              same(in[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right)))
        fail(n, "ceil_mode 1 is not supported where it changes the output size");
    }
  }
}

void Importer::conv(const onnx::NodeProto& n) {
  only_attrs(n, {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"});
  const Value x = need_value(n, 0, true);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  const Const& w = need_const(n, 1, "the weights");
  if (w.dims.size() != 4) fail(n, "only 2-D convolutions (4-D weights) are supported");
  const auto O = static_cast<std::size_t>(w.dims[0]), I = static_cast<std::size_t>(w.dims[1]),
             KH = static_cast<std::size_t>(w.dims[2]), KW = static_cast<std::size_t>(w.dims[3]);
  const std::int64_t group = attr_int(n, "group", 1);
  const std::size_t C = in[2];
  FloatLayer l;
  l.kind = LayerKind::Conv2d;
  l.inputs = {x.tensor};
  if (group == 1) {
    if (I != C) fail(n, fmt::format("weights for {} input channels on {}", I, C));
  } else if (!(static_cast<std::size_t>(group) == C && O == C && I == 1)) {
    fail(n, fmt::format("group {} is not supported (1, or depthwise: group = input channels = output "
                        "channels = {})", group, C));
  } else {
    l.groups = static_cast<unsigned>(C);
  }
  const auto ks = attr_ints(n, "kernel_shape", {w.dims[2], w.dims[3]});
  if (ks.size() != 2 || ks[0] != w.dims[2] || ks[1] != w.dims[3]) fail(n, "kernel_shape does not match the weights");
  l.kernel_h = static_cast<unsigned>(KH);
  l.kernel_w = static_cast<unsigned>(KW);
  take_pad(x, l);
  window(n, l, in, false);
  // (O, I, KH, KW) -> (KH, KW, I, O).
  l.weight_shape = {KH, KW, I, O};
  l.weights.resize(w.values.size());
  for (std::size_t o = 0; o < O; ++o)
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t y = 0; y < KH; ++y)
        for (std::size_t z = 0; z < KW; ++z)
          l.weights[((y * KW + z) * I + i) * O + o] =
              static_cast<float>(w.values[((o * I + i) * KH + y) * KW + z]);
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
  const Value x = need_value(n, 0);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 1) fail(n, "needs a 2-D (N, features) input: flatten the map first");
  const Const& b = need_const(n, 1, "the weights (B)");
  if (b.dims.size() != 2) fail(n, "the weights must be a matrix");
  if (!matmul && attr_int(n, "transA", 0) != 0) fail(n, "transA = 1 is not supported");
  const bool trans_b = !matmul && attr_int(n, "transB", 0) != 0;
  const double alpha = matmul ? 1.0 : attr_float(n, "alpha", 1.0f);
  const double beta = matmul ? 1.0 : attr_float(n, "beta", 1.0f);
  const auto K = static_cast<std::size_t>(trans_b ? b.dims[1] : b.dims[0]);
  const auto N = static_cast<std::size_t>(trans_b ? b.dims[0] : b.dims[1]);
  if (K != in[0]) fail(n, fmt::format("weights for {} inputs on {}", K, in[0]));
  FloatLayer l;
  l.kind = LayerKind::Dense;
  l.inputs = {x.tensor};
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
  const Value x = need_value(n, 0);
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
  const Value x = need_value(n, 0);
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

void Importer::pool(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "GlobalAveragePool") {
    only_attrs(n, {});
    const Value x = need_value(n, 0);
    if (shape(x).size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
    FloatLayer l;
    l.kind = LayerKind::GlobalAvgPool2d;
    l.inputs = {x.tensor};
    Value out;
    out.tensor = add_layer(n, std::move(l));
    set_output(n, out);
    return;
  }
  const bool max = op == "MaxPool";
  if (max) only_attrs(n, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order"});
  else only_attrs(n, {"kernel_shape", "strides", "pads", "ceil_mode", "auto_pad", "count_include_pad"});
  if (max) no_extra_outputs(n, 1);
  const Value x = need_value(n, 0, true);
  const Shape in = shape(x);  // a copy: add_layer grows shapes_
  if (in.size() != 3) fail(n, "needs a 4-D (N, C, H, W) input");
  FloatLayer l;
  l.kind = max ? LayerKind::MaxPool2d : LayerKind::AvgPool2d;
  l.inputs = {x.tensor};
  const auto ks = attr_ints(n, "kernel_shape", {});
  if (ks.size() != 2 || ks[0] < 1 || ks[1] < 1 || ks[0] > 65536 || ks[1] > 65536)
    fail(n, "needs a 2-D kernel_shape");
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
  const auto own = attr_ints(n, "pads", {0, 0, 0, 0});
  const bool own_pad = std::any_of(own.begin(), own.end(), [](std::int64_t p) { return p != 0; });
  if (!max && own_pad && attr_int(n, "count_include_pad", 0) == 0)
    fail(n, "count_include_pad = 0 with padding is not supported (the TPU's average counts padded positions)");
  window(n, l, in, true);
  Value out;
  out.tensor = add_layer(n, std::move(l));
  set_output(n, out);
}

void Importer::add(const onnx::NodeProto& n) {
  only_attrs(n, {});
  if (n.input_size() != 2) fail(n, "needs two inputs");
  const bool c0 = is_const(n.input(0)), c1 = is_const(n.input(1));
  if (c0 && c1) fail(n, "adds two constants");
  if (c0 || c1) {
    // A bias: folded into the Conv, Gemm or MatMul before it.
    const int vi = c0 ? 1 : 0;
    const Value x = need_value(n, vi);
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
      const std::size_t at = l.kind == LayerKind::Dense ? 1 : 3;
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
  const Value a = need_value(n, 0), b = need_value(n, 1);
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

void Importer::flatten(const onnx::NodeProto& n) {
  const Value x = need_value(n, 0);
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

void Importer::node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    fail(n, fmt::format("operator domain '{}' is not supported", n.domain()));
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
    else bind(n.output(0), need_value(n, 0, true));
  } else if (op == "Conv") {
    conv(n);
  } else if (op == "Gemm" || op == "MatMul") {
    gemm(n, op == "MatMul");
  } else if (op == "BatchNormalization") {
    batchnorm(n);
  } else if (op == "Relu" || op == "Clip" || op == "Sigmoid" || op == "Tanh") {
    activation(n);
  } else if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool") {
    pool(n);
  } else if (op == "Add") {
    add(n);
  } else if (op == "Flatten" || op == "Reshape") {
    flatten(n);
  } else if (op == "Pad") {
    pad(n);
  } else {
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
  if (dims.size() == 3) {
    net_.model_input_shape = dims;
    net_.input_shape = {dims[1], dims[2], dims[0]};
  } else if (dims.size() == 1) {
    net_.model_input_shape = net_.input_shape = dims;
  } else {
    fail(fmt::format("input '{}' must be (N, C, H, W) or (N, features), not of rank {}", input->name(),
                     tt.shape().dim_size()));
  }
  shapes_.push_back(net_.input_shape);
  for (const auto& n : g_.node())
    for (const auto& i : n.input()) ++uses_[i];
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
  net_.model_output_shape = s.size() == 3 ? Shape{s[2], s[0], s[1]} : s;
  net_.output_perm = out.perm;
  return std::move(net_);
}

}  // namespace

FloatNet import_onnx_model(onnx::ModelProto model, const std::string& where) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw FileError(one_line(fmt::format("{}: the ONNX checker rejects the model: {}", where, e.what())));
  }
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    throw FileError(one_line(fmt::format("{}: ONNX shape inference fails: {}", where, e.what())));
  }
  return Importer(model.graph(), where).run();
}

FloatNet import_onnx(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  onnx::ModelProto model;
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw FileError(fmt::format("{}: not an ONNX model (the protobuf does not parse)", path));
  return import_onnx_model(std::move(model), path);
}

}  // namespace tpu::onnximport
