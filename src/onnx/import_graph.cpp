// Reading the graph (importer.h): tensors (initializers, tensor attributes)
// into Consts, node attributes, a node's inputs as constants or computed
// Values, and the FloatNet's layers and names, with the count of each
// tensor's readers that decides what may fold into what.
#include "onnx/importer.h"

#include <cstring>

#include "common/file_io.h"
#include "onnx/float_exec.h"
#include "onnx/onnx_validate.h"

namespace tpu::onnximport::detail {

std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

std::string type_name(int t) {
  return onnx::TensorProto::DataType_IsValid(t)
             ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t))
             : fmt::format("type {}", t);
}

Const Importer::read_tensor(const onnx::TensorProto& t, const std::string& what) const {
  // validate_model has checked the dims and the data's length (and refused
  // external data); the count is checked again here, as read_tensor trusts it.
  Const c;
  c.type = t.data_type();
  const std::size_t count = tensor_element_count(t, what, where_);
  c.dims.assign(t.dims().begin(), t.dims().end());
  const std::string& raw = t.raw_data();
  // The values of element type T: from the raw bytes, or from the typed
  // field that holds that type.
  const auto read = [&](auto zero, const auto& typed) {
    using T = decltype(zero);
    if (!t.has_raw_data()) {
      c.values.assign(typed.begin(), typed.end());
      return;
    }
    if (raw.size() != count * sizeof(T))
      fail(fmt::format("{} '{}' has {} bytes of data for {} elements", what, t.name(), raw.size(), count));
    for (std::size_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));  // ONNX raw data is little-endian, as the host
      c.values.push_back(static_cast<double>(v));
    }
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: read(0.0f, t.float_data()); break;
    case onnx::TensorProto::DOUBLE: read(0.0, t.double_data()); break;
    case onnx::TensorProto::INT64: read(std::int64_t{0}, t.int64_data()); break;
    case onnx::TensorProto::INT32: read(std::int32_t{0}, t.int32_data()); break;
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::UINT8: read(std::uint8_t{0}, t.int32_data()); break;
    case onnx::TensorProto::INT8: read(std::int8_t{0}, t.int32_data()); break;
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

// ---- Attributes ----

void Importer::only_attrs(const onnx::NodeProto& n, std::set<std::string> known) const {
  for (const auto& a : n.attribute())
    if (!known.count(a.name())) fail(n, fmt::format("attribute '{}' is not supported", a.name()));
}

const onnx::AttributeProto* Importer::attr(const onnx::NodeProto& n, const std::string& name) const {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t Importer::attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t def) const {
  const auto* a = attr(n, name);
  return a ? a->i() : def;
}

float Importer::attr_float(const onnx::NodeProto& n, const std::string& name, float def) const {
  const auto* a = attr(n, name);
  return a ? a->f() : def;
}

std::string Importer::attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& def) const {
  const auto* a = attr(n, name);
  return a ? a->s() : def;
}

std::vector<std::int64_t> Importer::attr_ints(const onnx::NodeProto& n, const std::string& name,
                                              std::vector<std::int64_t> def) const {
  const auto* a = attr(n, name);
  if (!a) return def;
  return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<std::int64_t> Importer::window_ints(const onnx::NodeProto& n, const std::string& name,
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

// ---- Inputs ----

const Const& Importer::need_const(const onnx::NodeProto& n, int i, const std::string& what) const {
  if (i >= n.input_size() || n.input(i).empty()) fail(n, fmt::format("needs {}", what));
  const auto it = consts_.find(n.input(i));
  if (it == consts_.end())
    fail(n, fmt::format("{} ('{}') must be a constant (an initializer)", what, n.input(i)));
  return it->second;
}

Value Importer::need_value(const onnx::NodeProto& n, int i, bool allow_pad, bool allow_int) const {
  if (i >= n.input_size() || n.input(i).empty()) fail(n, fmt::format("input {} is missing", i));
  const auto it = values_.find(n.input(i));
  if (it == values_.end()) {
    if (is_const(n.input(i)))
      fail(n, fmt::format("input '{}' is a constant; tpu-sim computes only on the network's input", n.input(i)));
    fail(n, fmt::format("input '{}' is not produced by an earlier node", n.input(i)));
  }
  if (!it->second.seq_axes.empty())
    fail(n, fmt::format("reads the sequence '{}' whole: only LSTM, GRU, Transpose, Squeeze and a Gather of one time "
                        "step read sequences (docs/onnx.md, \"Recurrent layers\")", n.input(i)));
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

Value Importer::need_input(const onnx::NodeProto& n, int i, bool allow_pad) const {
  Value v = need_value(n, i, allow_pad);
  if (qdq_ && v.state != QState::Deq)
    fail(n, fmt::format("input '{}' is not quantized: in a QDQ model every Conv, Gemm, MatMul, pool, Add and "
                        "Flatten must read a DequantizeLinear (tpu-sim computes in int8)", n.input(i)));
  return v;
}

void Importer::no_extra_outputs(const onnx::NodeProto& n, int keep) const {
  for (int i = keep; i < n.output_size(); ++i)
    if (!n.output(i).empty() && uses_.count(n.output(i)))
      fail(n, fmt::format("output {} ('{}') is used; tpu-sim computes only the first", i, n.output(i)));
}

// ---- Layers, names and readers ----

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

Value Importer::add_value(const onnx::NodeProto& n, FloatLayer l, std::vector<std::size_t> perm) {
  Value out;
  out.tensor = add_layer(n, std::move(l));
  out.perm = std::move(perm);
  return out;
}

FloatLayer* Importer::foldable(const onnx::NodeProto& n, const Value& v, const std::string& what) {
  if (v.tensor == 0 || !v.perm.empty())
    fail(n, fmt::format("must follow {}", what));
  FloatLayer& l = net_.layers[v.tensor - 1];
  if (!read_once(v.tensor))
    fail(n, "folds into the layer before it, whose output other nodes read too");
  return &l;
}

void Importer::bind(const std::string& name, Value v) {
  reads_[v.tensor] += uses_[name];
  if (v.tensor < first_new_tensor_) ++renames_[v.tensor];
  values_[name] = std::move(v);
}

}  // namespace tpu::onnximport::detail
