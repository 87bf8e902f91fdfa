// The ONNX importer's driver (onnx_import.h): parses and checks the model
// (onnx_validate.h's own checks first, then libonnx's checker), reads the
// graph's one input, imports each node through the operator table (one
// Importer member per operator family, importer.h), checks the graph's one
// output, and runs libonnx's shape inference on the model last, as a check
// of the shapes it declares. The result is a FloatNet (float_net.h).
//
// The ONNX headers come first: <sys/mman.h>, which SystemC pulls in through
// compiler/network.h, defines a MAP_TYPE macro that breaks onnx/defs/parser.h.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx/onnx_import.h"

#include <cstdint>

#include "common/file_io.h"
#include "onnx/importer.h"
#include "onnx/onnx_validate.h"

namespace tpu::onnximport {
namespace detail {
namespace {

bool is_qdq_node(const onnx::NodeProto& n) {
  return n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear";
}

// The model in `bytes`, false when the protobuf does not parse.
bool parse_model(const std::vector<std::uint8_t>& bytes, onnx::ModelProto& model) {
  return bytes.size() <= static_cast<std::size_t>(INT32_MAX) &&
         model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

// docs/onnx.md's operator table, in its order; node_operator_error accepts
// exactly these operators.
const std::map<std::string_view, Importer::NodeImporter>& Importer::operator_table() {
  static const std::map<std::string_view, NodeImporter> table = {
      {"Conv", &Importer::conv},
      {"Gemm", &Importer::gemm},
      {"MatMul", &Importer::gemm},
      {"BatchNormalization", &Importer::batchnorm},
      {"Relu", &Importer::activation},
      {"Clip", &Importer::activation},
      {"Sigmoid", &Importer::activation},
      {"Tanh", &Importer::activation},
      {"HardSigmoid", &Importer::hard_sigmoid},
      {"HardSwish", &Importer::hard_sigmoid},
      {"MaxPool", &Importer::window_pool},
      {"AveragePool", &Importer::window_pool},
      {"GlobalAveragePool", &Importer::global_average_pool},
      {"ReduceMean", &Importer::reduce_mean},
      {"Add", &Importer::add},
      {"Mul", &Importer::mul},
      {"Div", &Importer::const_arith},
      {"Concat", &Importer::concat},
      {"Slice", &Importer::slice},
      {"Split", &Importer::split},
      {"Transpose", &Importer::transpose},
      {"Flatten", &Importer::flatten},
      {"Reshape", &Importer::flatten},
      {"Pad", &Importer::pad},
      {"Resize", &Importer::resize},
      {"Upsample", &Importer::resize},
      {"Constant", &Importer::constant},
      {"Identity", &Importer::identity},
      {"Dropout", &Importer::identity},
      {"Shape", &Importer::shape_op},
      {"Gather", &Importer::gather},
      {"ConstantOfShape", &Importer::constant_of_shape},
      {"Equal", &Importer::const_arith},
      {"Where", &Importer::const_where},
      {"QuantizeLinear", &Importer::quantize_linear},
      {"DequantizeLinear", &Importer::dequantize_linear},
      {"Cast", &Importer::cast},
      {"LSTM", &Importer::recurrent},
      {"GRU", &Importer::recurrent},
      // --- attention ---
      {"Softmax", &Importer::softmax},
      {"Squeeze", &Importer::squeeze},
      {"Unsqueeze", &Importer::unsqueeze},
      {"Expand", &Importer::expand},
      // Transformer layers (import_transformer.cpp): the rest of their patterns is above.
      {"Sub", &Importer::transformer_only},
      {"Pow", &Importer::transformer_only},
      {"Sqrt", &Importer::transformer_only},
      {"Erf", &Importer::transformer_only},
      {"LayerNormalization", &Importer::transformer_only},
  };
  return table;
}

void Importer::node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (const std::string why = node_operator_error(n.domain(), op); !why.empty()) fail(n, why);
  if (n.output_size() < 1) fail(n, "has no output");
  if (transformer_node(n)) return;
  const auto it = operator_table().find(op);
  if (it == operator_table().end())  // node_operator_error accepts only the table's operators
    fail(n, "operator not supported (docs/onnx.md lists the supported ones)");
  (this->*(it->second))(n);
}

// The initializers, and the one real input: its shape in tpu-sim's layout
// (NHWC; a 1-D model's (N, C, L) as H = 1, W = L).
const onnx::ValueInfoProto& Importer::read_input() {
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
  if (tt.shape().dim_size() > 0 && tt.shape().dim(0).has_dim_value()) input_batch_ = tt.shape().dim(0).dim_value();
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
  // A sequence read by a recurrent layer: (L, N, D), or (N, L, D) batch
  // first (a Transpose to (L, N, D) before the layer); held as 1 x L x D.
  for (const auto& n : g_.node())
    if ((n.op_type() == "LSTM" || n.op_type() == "GRU") && n.input_size() > 0) {
      seq_input_ = n.input(0) == input->name() ? "TNF" : "NTF";
      break;
    }
  if (!seq_input_.empty() && tt.shape().dim_size() == 3) {
    const auto& d0 = tt.shape().dim(0);
    if (seq_input_ == "TNF" && (!d0.has_dim_value() || d0.dim_value() < 1))
      fail(fmt::format("input '{}': the sequence length (dimension 0) must be a fixed size", input->name()));
    const std::size_t L = seq_input_ == "TNF" ? static_cast<std::size_t>(d0.dim_value()) : dims[0];
    net_.model_input_shape = {L, dims[1]};
    net_.input_shape = {1, L, dims[1]};
    net_.seq_first_input = seq_input_ == "TNF";
    net_.sequence_input = true;
  } else if (dims.size() == 3) {
    net_.model_input_shape = dims;
    net_.input_shape = {dims[1], dims[2], dims[0]};
  } else if (dims.size() == 2 && token_sequence(input->name())) {
    // (N, L, D) read by a MatMul, LayerNorm or Add: a token sequence, 1 x L x D.
    token_input_ = true;
    net_.model_input_shape = dims;
    net_.input_shape = {1, dims[0], dims[1]};
    net_.sequence_input = true;
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
  return *input;
}

// The graph's one output: the last layer's result.
void Importer::read_output() {
  const std::string& out_name = g_.output(0).name();
  const auto it = values_.find(out_name);
  if (it == values_.end()) fail(fmt::format("output '{}' is not computed from the input", out_name));
  const Value& out = it->second;
  if (!out.seq_axes.empty())
    fail(fmt::format("output '{}' is a sequence: tpu-sim's output is one step of it (such as y[:, -1] or h_n)",
                     out_name));
  if (out.padded) fail(fmt::format("output '{}' comes from a Pad", out_name));
  if (net_.layers.empty() || out.tensor != net_.layers.size())
    fail(fmt::format("output '{}' must be the last layer's result", out_name));
  const Shape& s = shapes_.back();
  if (out.tokens) {  // (N, L, D)
    net_.model_output_shape = {s[0] * s[1], s[2]};
    net_.token_output = true;
    net_.output_perm = out.perm;
    return;
  }
  net_.model_output_shape = s.size() == 3 ? (one_d_ ? Shape{s[2], s[1]} : Shape{s[2], s[0], s[1]}) : s;
  net_.output_perm = out.perm;
}

FloatNet Importer::run() {
  const onnx::ValueInfoProto& input = read_input();
  for (const auto& n : g_.node()) {
    for (const auto& i : n.input()) ++uses_[i];
    if (is_qdq_node(n)) qdq_ = true;
  }
  for (const auto& o : g_.output()) ++uses_[o.name()];
  first_new_tensor_ = 1;
  Value in;
  if (!seq_input_.empty()) in.seq_axes = seq_input_;
  in.tokens = token_input_;
  bind(input.name(), in);
  names_.insert("input");

  for (int k = 0; k < g_.node_size(); ++k) {
    node_index_[&g_.node(k)] = static_cast<std::size_t>(k);
    for (const auto& i : g_.node(k).input()) consumers_[i].push_back(static_cast<std::size_t>(k));
  }
  for (int k = 0; k < g_.node_size(); ++k) {
    const onnx::NodeProto& n = g_.node(k);
    first_new_tensor_ = net_.layers.size() + 1;
    const auto at = static_cast<std::size_t>(k);
    if (const auto d = deferred_.find(at); d != deferred_.end()) {
      d->second();  // a transformer pattern's last node
      continue;
    }
    if (skip_.count(at)) continue;
    const bool tokens = reads_tokens(n);
    node(n);
    // What reads a token sequence and keeps its shape (Add, MatMul, Mul) makes one.
    if (tokens && n.output_size() > 0)
      if (auto v = values_.find(n.output(0));
          v != values_.end() && v->second.token < 0 && shapes_.at(v->second.tensor).size() == 3)
        v->second.tokens = true;
  }
  read_output();
  if (qdq_) finish_qdq();
  return std::move(net_);
}

}  // namespace detail

bool imports_operator(std::string_view op) { return detail::Importer::operator_table().count(op) > 0; }

FloatNet import_onnx_model(onnx::ModelProto model, const std::string& where) {
  validate_model(model, where);  // first: libonnx trusts strides and dims
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw FileError(detail::one_line(fmt::format("{}: the ONNX checker rejects the model: {}", where, e.what())));
  }
  // The importer computes every shape itself, and refuses any graph whose
  // shapes it cannot; libonnx's shape inference runs after it, as a check of
  // the shapes the model declares, since libonnx 1.12 trusts shapes: a Conv
  // reading a tensor of fewer dimensions than its weights reads past the
  // input's shape (SIGSEGV; found by fuzz_onnx).
  FloatNet net = detail::Importer(model.graph(), where).run();
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    throw FileError(detail::one_line(fmt::format("{}: ONNX shape inference fails: {}", where, e.what())));
  }
  return net;
}

FloatNet import_onnx(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  onnx::ModelProto model;
  if (!detail::parse_model(bytes, model))
    throw FileError(fmt::format("{}: not an ONNX model (the protobuf does not parse)", path));
  return import_onnx_model(std::move(model), path);
}

std::optional<bool> onnx_has_qdq_nodes(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  onnx::ModelProto model;
  if (!detail::parse_model(bytes, model)) return std::nullopt;
  for (const auto& n : model.graph().node())
    if (detail::is_qdq_node(n)) return true;
  return false;
}

}  // namespace tpu::onnximport
