// The ONNX importer's first pass (onnx_validate.h): everything a model states
// about sizes and windows, checked with overflow-checked arithmetic before
// libonnx's checker and shape inference read it.
#include <onnx/onnx_pb.h>  // first: see onnx_import.cpp

#include "onnx/onnx_validate.h"

#include <fmt/format.h>

#include <set>
#include <string_view>

#include "common/file_io.h"
#include "onnx/onnx_import.h"

namespace tpu::onnximport {
namespace {

using onnx::TensorProto;

// Names and other text from the file may hold line breaks.
std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw FileError(one_line(fmt::format("{}: {}", where, what)));
}

// How a tensor type keeps its elements: bytes per element in raw_data (0:
// raw_data is not allowed, strings), and the typed field with how many of its
// values make one element.
enum class Field { Float, Int32, Int64, Uint64, Double, String };
struct Layout {
  std::uint64_t raw_bytes;
  Field field;
  std::uint64_t per_element;
};

bool layout_of(int type, Layout& l) {
  switch (type) {
    case TensorProto::FLOAT: l = {4, Field::Float, 1}; return true;
    case TensorProto::UINT8:
    case TensorProto::INT8:
    case TensorProto::BOOL: l = {1, Field::Int32, 1}; return true;
    case TensorProto::UINT16:
    case TensorProto::INT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: l = {2, Field::Int32, 1}; return true;
    case TensorProto::INT32: l = {4, Field::Int32, 1}; return true;
    case TensorProto::INT64: l = {8, Field::Int64, 1}; return true;
    case TensorProto::UINT32: l = {4, Field::Uint64, 1}; return true;
    case TensorProto::UINT64: l = {8, Field::Uint64, 1}; return true;
    case TensorProto::DOUBLE: l = {8, Field::Double, 1}; return true;
    case TensorProto::COMPLEX64: l = {8, Field::Float, 2}; return true;
    case TensorProto::COMPLEX128: l = {16, Field::Double, 2}; return true;
    case TensorProto::STRING: l = {0, Field::String, 1}; return true;
    default: return false;
  }
}

std::uint64_t typed_values(const TensorProto& t, Field f) {
  switch (f) {
    case Field::Float: return static_cast<std::uint64_t>(t.float_data_size());
    case Field::Int32: return static_cast<std::uint64_t>(t.int32_data_size());
    case Field::Int64: return static_cast<std::uint64_t>(t.int64_data_size());
    case Field::Uint64: return static_cast<std::uint64_t>(t.uint64_data_size());
    case Field::Double: return static_cast<std::uint64_t>(t.double_data_size());
    case Field::String: return static_cast<std::uint64_t>(t.string_data_size());
  }
  return 0;
}

// A tensor: its dims and the length of its data agree.
void check_tensor(const TensorProto& t, const std::string& what, const std::string& where) {
  if (t.data_location() == TensorProto::EXTERNAL || t.external_data_size() > 0)
    fail(where, fmt::format("{} '{}' keeps its data in an external file, which tpu-sim does not read", what,
                            t.name()));
  if (t.has_segment()) fail(where, fmt::format("{} '{}' is a segment of a tensor, which tpu-sim does not read",
                                               what, t.name()));
  const std::uint64_t count = tensor_element_count(t, what, where);
  Layout l{};
  if (!layout_of(t.data_type(), l))
    fail(where, fmt::format("{} '{}' has data type {}, which is not an ONNX tensor type", what, t.name(),
                            t.data_type()));
  if (t.has_raw_data()) {
    std::uint64_t bytes = 0;
    if (l.raw_bytes == 0)
      fail(where, fmt::format("{} '{}' holds strings in raw_data (ONNX keeps strings in string_data)", what,
                              t.name()));
    if (__builtin_mul_overflow(count, l.raw_bytes, &bytes) || bytes != t.raw_data().size())
      fail(where, fmt::format("{} '{}' has {} bytes of data for {} elements", what, t.name(), t.raw_data().size(),
                              count));
    return;
  }
  std::uint64_t values = 0;
  const std::uint64_t got = typed_values(t, l.field);
  if (__builtin_mul_overflow(count, l.per_element, &values) || values != got)
    fail(where, fmt::format("{} '{}' has {} values for {} elements", what, t.name(), got, count));
}

// A value's declared shape (graph inputs, outputs, value_info).
void check_value_info(const onnx::ValueInfoProto& v, const std::string& where) {
  if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
  for (const auto& d : v.type().tensor_type().shape().dim())
    if (d.has_dim_value() && d.dim_value() < 0)
      fail(where, fmt::format("value '{}' has a negative dimension {}", v.name(), d.dim_value()));
}

// The window attributes of any node; libonnx's shape inference divides by
// strides and trusts the rest.
void check_window_attribute(const onnx::NodeProto& n, const onnx::AttributeProto& a, const std::string& where) {
  static const std::set<std::string_view> kPositive = {"strides", "dilations", "kernel_shape"};
  const std::string node = fmt::format("node '{}' ({})", n.name(), n.op_type());
  if (kPositive.count(a.name()) || a.name() == "pads") {
    // Pad's own pads (attributes before opset 11) may be negative in ONNX (a
    // crop); the importer refuses them later with its own message.
    const std::int64_t lo = kPositive.count(a.name()) ? 1 : n.op_type() == "Pad" ? -kWindowLimit : 0;
    if (a.type() != onnx::AttributeProto::INTS)
      fail(where, fmt::format("{}: attribute '{}' must be a list of integers", node, a.name()));
    for (std::int64_t v : a.ints())
      if (v < lo || v > kWindowLimit)
        fail(where, fmt::format("{}: {} [{}] are not supported (each {} to {})", node, a.name(),
                                fmt::join(a.ints(), ", "), lo, kWindowLimit));
  } else if (a.name() == "group") {
    if (a.type() != onnx::AttributeProto::INT)
      fail(where, fmt::format("{}: attribute 'group' must be an integer", node));
    if (a.i() < 1 || a.i() > kWindowLimit)
      fail(where, fmt::format("{}: group {} is not supported (1 to {})", node, a.i(), kWindowLimit));
  }
}

void check_node(const onnx::NodeProto& n, const std::string& where) {
  const std::string node = fmt::format("node '{}' ({})", n.name(), n.op_type());
  if (const std::string why = node_operator_error(n.domain(), n.op_type()); !why.empty())
    fail(where, fmt::format("{}: {}", node, why));
  for (const auto& a : n.attribute()) {
    if (a.has_g() || a.graphs_size() > 0 || a.has_sparse_tensor() || a.sparse_tensors_size() > 0 || a.has_tp() ||
        a.type_protos_size() > 0)
      fail(where, fmt::format("{}: attribute '{}' holds a graph, sparse tensor or type, which no operator tpu-sim "
                              "imports takes", node, a.name()));
    check_window_attribute(n, a, where);
    if (a.has_t()) check_tensor(a.t(), fmt::format("{}: attribute '{}': tensor", node, a.name()), where);
    for (const auto& t : a.tensors())
      check_tensor(t, fmt::format("{}: attribute '{}': tensor", node, a.name()), where);
  }
}

void check_opsets(const onnx::ModelProto& m, const std::string& where) {
  for (const auto& o : m.opset_import()) {
    if (!o.domain().empty() && o.domain() != "ai.onnx") continue;  // nodes of other domains are refused
    if (o.version() < 1 || o.version() > kMaxOpset)
      fail(where, fmt::format("opset {} is not supported (tpu-sim imports opsets 1 to {} of the ONNX domain)",
                              o.version(), kMaxOpset));
  }
}

}  // namespace

std::uint64_t tensor_element_count(const TensorProto& t, const std::string& what, const std::string& where) {
  std::uint64_t count = 1;
  for (std::int64_t d : t.dims()) {
    if (d < 0) fail(where, fmt::format("{} '{}' has a negative dimension {}", what, t.name(), d));
    if (static_cast<std::uint64_t>(d) > UINT32_MAX)
      fail(where, fmt::format("{} '{}' has a dimension of {}, more than {}", what, t.name(), d, UINT32_MAX));
  }
  for (std::int64_t d : t.dims())
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count))
      fail(where, fmt::format("{} '{}' has dimensions [{}] whose product is past 2^64", what, t.name(),
                              fmt::join(t.dims(), ", ")));
  return count;
}

bool within_tensor_limit(const std::vector<std::size_t>& shape) {
  std::uint64_t count = 1;
  for (std::size_t d : shape)
    if (__builtin_mul_overflow(count, static_cast<std::uint64_t>(d), &count)) return false;
  return count <= kMaxTensorElements;
}

std::string node_operator_error(const std::string& domain, const std::string& op) {
  static const std::set<std::string_view> kQOperator = {
      "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger", "QLinearAdd", "QLinearMul",
      "QLinearAveragePool", "QLinearGlobalAveragePool", "QGemm"};
  if (!domain.empty() && domain != "ai.onnx") return fmt::format("operator domain '{}' is not supported", domain);
  if (imports_operator(op)) return {};
  if (kQOperator.count(op))
    return "the QOperator form is not supported: tpu-sim imports quantized models in QDQ form (QuantizeLinear and "
           "DequantizeLinear around float Conv, Gemm, MatMul)";
  if (op == "DynamicQuantizeLinear")
    return "dynamic quantization is not supported (tpu-sim takes static QDQ models: QuantizeLinear with constant "
           "scales and zero points)";
  return "operator not supported (docs/onnx.md lists the supported ones)";
}

void validate_model(const onnx::ModelProto& m, const std::string& where) {
  check_opsets(m, where);
  const onnx::GraphProto& g = m.graph();
  if (g.sparse_initializer_size() > 0)
    fail(where, fmt::format("sparse initializer '{}' is not supported", g.sparse_initializer(0).values().name()));
  for (const auto& t : g.initializer()) check_tensor(t, "initializer", where);
  for (const auto* values : {&g.input(), &g.output(), &g.value_info()})
    for (const auto& v : *values) check_value_info(v, where);
  for (const auto& n : g.node()) check_node(n, where);
}

}  // namespace tpu::onnximport
