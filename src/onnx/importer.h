// The ONNX importer's state, shared by its files (internal: only the
// importer's own .cpp files include it; onnx_import.h is the API).
//
// One Importer walks one graph (onnx_import.cpp: the model's input, each node
// through the operator table, the output). Every node's importer reads its
// inputs as constants (Const: initializers, Constant nodes and the shape
// arithmetic folded from them) or computed values (Value: a tpu tensor id and
// what is pending on it), and either adds FloatLayers to the FloatNet, folds
// into the layer before it, or binds its output to a new name. The members
// are defined by family:
//
//   import_graph.cpp      tensors, attributes, inputs, adding layers, readers
//   import_window.cpp     kernel, strides and pads of Conv and pools; Pad
//   import_conv_gemm.cpp  Conv, Gemm, MatMul: the matrix unit's layers
//   import_fold.cpp       BatchNormalization, activations, a constant bias Add
//   import_vector.cpp     the vector unit's layers: affine, Mul, HardSigmoid
//   import_pool.cpp       MaxPool, AveragePool, GlobalAveragePool, ReduceMean
//   import_join.cpp       Add and Concat of computed tensors
//   import_layout.cpp     Flatten, Reshape, the channel shuffle, Slice, Split
//   import_resize.cpp     Resize, Upsample
//   import_consts.cpp     constants and shape arithmetic; Identity, Dropout
//   import_qdq.cpp        QuantizeLinear, DequantizeLinear, Cast; QDQ weights
//   qdq_check.cpp         after the graph: each layer's QDQ quantization
//
// Error messages name the node: "WHERE: node 'NAME' (OP): what" (fail).
//
// The ONNX headers come first: <sys/mman.h>, which SystemC pulls in through
// compiler/network.h, defines a MAP_TYPE macro that breaks onnx/defs/parser.h.
#pragma once

#include <onnx/onnx_pb.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_io.h"
#include "compiler/quant.h"
#include "onnx/float_net.h"

namespace tpu::onnximport::detail {

using compiler::LayerKind;
using Shape = std::vector<std::size_t>;

// Error messages are one line: names and the checker's text come from the
// file and may hold line breaks or other control characters.
std::string one_line(std::string s);

// Round half to even (the default rounding mode), as the ONNX operators and
// NumPy round.
inline double round_even(double v) { return std::nearbyint(v); }

// An ONNX element type's name ("INT8"), or "type N" for an unknown one.
std::string type_name(int t);

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
  // A sequence (import_recurrent.cpp): `seq_axes` names the model's axes ('T'
  // time, 'N' batch, 'F' features, 'D' a recurrent layer's direction, of size
  // 1); its time steps are the pixels of map `tensor` (1 x L x F: the network
  // input) or, when `steps` is not empty, the vectors steps[t]. Empty: a
  // tensor as any other.
  std::string seq_axes;
  std::vector<std::size_t> steps;
  // A token sequence (import_transformer.cpp): the model's (N, L, D), held
  // as a 1 x L x D map (not a 1-D model's (N, C, L) map).
  bool tokens = false;
  // One token of a sequence (Gather of index t on the token axis, x[:, t]):
  // pixel `token` of the map `tensor`, the model's (N, D); read only by a
  // Gemm or MatMul, which becomes a dense layer of that pixel. -1: none.
  std::int64_t token = -1;
};

// A pending Pad's amounts become the layer's padding (import_window.cpp).
void take_pad(const Value& x, FloatLayer& l);

class Importer {
 public:
  Importer(const onnx::GraphProto& g, std::string where) : g_(g), where_(std::move(where)) {}

  FloatNet run();

  // The importer of one operator (op_type); operator_table() has them all.
  using NodeImporter = void (Importer::*)(const onnx::NodeProto&);
  static const std::map<std::string_view, NodeImporter>& operator_table();

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(one_line(fmt::format("{}: {}", where_, what)));
  }
  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& what) const {
    throw FileError(one_line(fmt::format("{}: node '{}' ({}): {}", where_, n.name(), n.op_type(), what)));
  }
  void warn(const std::string& what) { net_.warnings.push_back(one_line(fmt::format("{}: {}", where_, what))); }
  void warn(const onnx::NodeProto& n, const std::string& what) {
    warn(fmt::format("node '{}' ({}): {}", n.name(), n.op_type(), what));
  }

  // The graph walk (onnx_import.cpp).
  const onnx::ValueInfoProto& read_input();
  void node(const onnx::NodeProto& n);
  void read_output();

  // Tensors and attributes (import_graph.cpp).
  Const read_tensor(const onnx::TensorProto& t, const std::string& what) const;
  void only_attrs(const onnx::NodeProto& n, std::set<std::string> known) const;
  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) const;
  std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t def) const;
  float attr_float(const onnx::NodeProto& n, const std::string& name, float def) const;
  std::string attr_string(const onnx::NodeProto& n, const std::string& name, const std::string& def) const;
  std::vector<std::int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name,
                                      std::vector<std::int64_t> def) const;
  // A window attribute ("strides", "dilations", "kernel_shape": one value
  // per spatial axis; "pads": begin values, then end values) as 2-D: a 1-D
  // model's gets the trivial H entries (1 for sizes, 0 for pads) in front.
  std::vector<std::int64_t> window_ints(const onnx::NodeProto& n, const std::string& name,
                                        std::vector<std::int64_t> def) const;

  // Inputs (import_graph.cpp).
  bool is_const(const std::string& name) const { return consts_.count(name) > 0; }
  const Const& need_const(const onnx::NodeProto& n, int i, const std::string& what) const;
  // Whether input i is given (optional inputs may be absent or named "").
  static bool has_input(const onnx::NodeProto& n, int i) { return n.input_size() > i && !n.input(i).empty(); }
  // A computed input; a pending Pad only where `allow_pad` (Conv and pools).
  Value need_value(const onnx::NodeProto& n, int i, bool allow_pad = false, bool allow_int = false) const;
  const Shape& shape(const Value& v) const { return shapes_.at(v.tensor); }
  // An input of a layer (Conv, Gemm, MatMul, pools, Add, Flatten): in a QDQ
  // model, the DequantizeLinear of a quantized tensor.
  Value need_input(const onnx::NodeProto& n, int i, bool allow_pad = false) const;
  void no_extra_outputs(const onnx::NodeProto& n, int keep) const;

  // Layers and names (import_graph.cpp).
  std::string layer_name(const onnx::NodeProto& n);
  std::size_t add_layer(const onnx::NodeProto& n, FloatLayer l);
  // A new layer reading `inputs`, its output in the layout `perm`.
  Value add_value(const onnx::NodeProto& n, FloatLayer l, std::vector<std::size_t> perm = {});
  // Whether tensor `t` (a layer's output) is read by one node only, the one
  // folding into it.
  bool read_once(std::size_t t) { return reads_[t] - renames_[t] == 1; }
  // The layer that computes `v` when a node may fold into it: `v` its output
  // as computed (no pending pad, no permutation), read by this node alone.
  FloatLayer* foldable(const onnx::NodeProto& n, const Value& v, const std::string& what);
  void set_output(const onnx::NodeProto& n, Value v) { bind(n.output(0), std::move(v)); }
  // Names `name` as `v`. Readers are counted per tensor, over every name it
  // has: a node that only renames or folds into a tensor (Identity, a fused
  // activation, BN, Pad) passes its own read on to its output's readers.
  void bind(const std::string& name, Value v);

  // Windows (import_window.cpp).
  void window(const onnx::NodeProto& n, FloatLayer& l, const Shape& in, bool is_pool) const;
  void pad(const onnx::NodeProto& n);

  // The matrix unit's layers (import_conv_gemm.cpp).
  void conv(const onnx::NodeProto& n);
  void gemm(const onnx::NodeProto& n);

  // Folding into the layer before (import_fold.cpp).
  // The layer computing `x` if a node may fold into it (x its output in its
  // own layout, read by that node alone), else nullptr.
  FloatLayer* fold_target(const Value& x);
  struct BatchNorm;
  BatchNorm batchnorm_params(const onnx::NodeProto& n, std::size_t C) const;
  void batchnorm(const onnx::NodeProto& n);
  void activation(const onnx::NodeProto& n);
  void fold_bias(const onnx::NodeProto& n);

  // The vector unit's layers (import_vector.cpp; docs/quantization.md,
  // "Layers on the vector unit").
  Value affine(const onnx::NodeProto& n, const Value& x, double alpha, double beta, model::ActFunction act,
               bool unit_range, float clip_hi = std::numeric_limits<float>::infinity());
  Value multiply(const onnx::NodeProto& n, const Value& a, const Value& b);
  void mul(const onnx::NodeProto& n);
  void hard_sigmoid(const onnx::NodeProto& n);

  // Pools (import_pool.cpp).
  Value global_pool(const onnx::NodeProto& n, const Value& x);
  void global_average_pool(const onnx::NodeProto& n);
  void reduce_mean(const onnx::NodeProto& n);
  void window_pool(const onnx::NodeProto& n);

  // Several inputs (import_join.cpp).
  void add(const onnx::NodeProto& n);
  void concat(const onnx::NodeProto& n);

  // Layout and channel selections (import_layout.cpp).
  Value select_channels(const onnx::NodeProto& n, const Value& x, const std::vector<std::size_t>& from,
                        const std::string& name);
  void slice(const onnx::NodeProto& n);
  void split(const onnx::NodeProto& n);
  void transpose(const onnx::NodeProto& n);
  bool shuffle_reshape(const onnx::NodeProto& n);
  void flatten(const onnx::NodeProto& n);

  // Recurrent layers and sequences (import_recurrent.cpp; docs/onnx.md,
  // "Recurrent layers"): LSTM and GRU unrolled over the time steps, and what
  // reshapes a sequence (Transpose, Squeeze, Gather of one step, Shape).
  void recurrent(const onnx::NodeProto& n);
  void squeeze(const onnx::NodeProto& n);
  bool seq_transpose(const onnx::NodeProto& n);
  bool seq_gather(const onnx::NodeProto& n);
  bool seq_shape(const onnx::NodeProto& n);
  std::size_t seq_length(const Value& v) const { return v.steps.empty() ? shapes_.at(v.tensor)[1] : v.steps.size(); }
  std::size_t seq_features(const Value& v) const { return shapes_.at(v.steps.empty() ? v.tensor : v.steps[0]).back(); }

 public:
  struct RecurrentUnit;  // import_recurrent.cpp's gate builders take it

 private:
  std::size_t add_part(const onnx::NodeProto& n, FloatLayer l, const std::string& part);
  void lstm_step(const onnx::NodeProto& n, RecurrentUnit& u, std::size_t t);
  void gru_step(const onnx::NodeProto& n, RecurrentUnit& u, std::size_t t);
  // --- attention (import_attention.cpp; docs/quantization.md, "Softmax and attention") ---
  void softmax(const onnx::NodeProto& n);
  // MultiheadAttention as torch.onnx.export writes it, recognized at its first
  // Transpose (1, 0, 2) of the tokens; its layers come at its last node.
  bool match_mha(const onnx::NodeProto& t);
  // The one reader of `from`'s output, which must be a `op` (skipped: part of
  // the pattern); anything else is refused naming `from`, with `hint` (the
  // likely cause) when given.
  const onnx::NodeProto& mha_next(const onnx::NodeProto& from, const char* op, const std::string& what,
                                  const char* hint = nullptr);
  // ViT's class token (Concat of constant tokens in front) and positional
  // embedding (Add of a constant per token and feature): token_bias layers.
  bool token_constants(const onnx::NodeProto& n);

  // Unsqueeze and Expand of constants (import_consts.cpp: shape arithmetic).
  void unsqueeze(const onnx::NodeProto& n);
  void expand(const onnx::NodeProto& n);

  // Transformer layers (import_transformer.cpp; docs/onnx.md, "Transformer
  // layers"): true when it imported the node (or recognized it as the first
  // of a pattern whose layers come at its last node); refuses other
  // operators on token sequences.
  bool transformer_node(const onnx::NodeProto& n);
  // Sub, Pow, Sqrt, Erf outside the LayerNorm and GELU patterns: refused.
  void transformer_only(const onnx::NodeProto& n);
  bool reads_tokens(const onnx::NodeProto& n) const;
  // Whether a rank-3 input (N, A, B) is a token sequence (its readers are
  // MatMul, Add, Mul, LayerNorm's) rather than a 1-D model's (N, C, L).
  bool token_sequence(const std::string& input) const;
  const onnx::NodeProto* sole_consumer(const std::string& name, const char* op) const;
  std::size_t node_index(const onnx::NodeProto& n) const;
  bool const_scalar(const std::string& name, double& v) const;
  bool match_layernorm(const onnx::NodeProto& r);
  bool match_gelu(const onnx::NodeProto& d);
  void layer_normalization(const onnx::NodeProto& n);
  void layernorm_layers(const onnx::NodeProto& n, const Value& x, double eps, const std::vector<double>& gamma,
                        const std::vector<double>& beta, const std::string& out);
  Value feature_affine(const onnx::NodeProto& n, const Value& x, const std::vector<double>& gamma,
                       const std::vector<double>& beta, const std::string& name);

  // Resize and Upsample (import_resize.cpp).
  void resize(const onnx::NodeProto& n);
  std::vector<double> resize_factors(const onnx::NodeProto& n, const std::vector<double>& model_in);

  // Constants and pass-throughs (import_consts.cpp).
  void constant(const onnx::NodeProto& n);
  void identity(const onnx::NodeProto& n);
  void shape_op(const onnx::NodeProto& n);
  void gather(const onnx::NodeProto& n);
  void const_arith(const onnx::NodeProto& n);  // Add, Mul, Div, Equal of constants
  void const_where(const onnx::NodeProto& n);
  void const_concat(const onnx::NodeProto& n);
  void const_slice(const onnx::NodeProto& n);
  void cast_const(const onnx::NodeProto& n, std::int64_t to);
  void constant_of_shape(const onnx::NodeProto& n);
  // A Slice's start or end `v` (negative: from the end) clamped to 0..len.
  std::size_t slice_bound(const onnx::NodeProto& n, double v, double len) const;
  // A Slice's steps (input 4), where given, must be 1.
  void unit_steps(const onnx::NodeProto& n) const;

  // QDQ (import_qdq.cpp, qdq_check.cpp; docs/onnx.md, "QDQ models").
  void quantize_linear(const onnx::NodeProto& n);
  void quantize_const(const onnx::NodeProto& n);
  void quantize_value(const onnx::NodeProto& n);
  void dequantize_linear(const onnx::NodeProto& n);
  void dequantize_const(const onnx::NodeProto& n);
  void cast(const onnx::NodeProto& n);
  compiler::QuantParams act_quant(const onnx::NodeProto& n, int& type) const;
  std::size_t scale_axis_inner(const onnx::NodeProto& n, const Const& x, std::size_t scales, std::size_t& axis) const;
  [[noreturn]] void fail_keeps_quant(const onnx::NodeProto& n, std::size_t tensor, const compiler::QuantParams& q,
                                     int type, const compiler::QuantParams& in, int in_type) const;
  Const qdq_weights(const onnx::NodeProto& n, const Const& w, std::size_t out_axis, double& scale);
  void finish_qdq();
  bool check_qdq_gemm(const FloatLayer& l, const TensorQuant& tq, const std::string& node, bool last) const;
  void check_qdq_add(const FloatLayer& l, const TensorQuant& tq, const std::string& node);

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
  // The input is a sequence read by a recurrent layer (axes "TNF", or "NTF"
  // when batch first), held as 1 x L x D per sample; empty: it is not.
  std::string seq_input_;
  // The one real input's declared batch (its dimension 0), 0 when not fixed.
  std::int64_t input_batch_ = 0;
  std::map<std::size_t, compiler::QuantParams> tq_;  // QDQ: per tensor id, its quantization
  std::vector<std::string> layer_op_;  // per layer, the ONNX operator that made it
  // Transformer patterns (import_transformer.cpp): the readers of each name
  // (node indices), the nodes a recognized pattern makes nothing of, and what
  // its last node makes. The input is a token sequence (N, L, D).
  std::map<std::string, std::vector<std::size_t>> consumers_;
  std::map<const onnx::NodeProto*, std::size_t> node_index_;
  std::set<std::size_t> skip_;
  std::map<std::size_t, std::function<void()>> deferred_;
  bool token_input_ = false;
  // The LayerNorm affines (depthwise 1x1 conv2d) by tensor id: a Linear that
  // is their only reader folds them into its weights.
  std::set<std::size_t> ln_affine_;
  // The layer computing x when it is a LayerNorm affine that a Linear on the
  // tokens may fold (the last layer, read by that node alone): its gamma and
  // beta, and x then names the affine's input. False otherwise.
  bool take_ln_affine(Value& x, std::vector<double>& gamma, std::vector<double>& beta);
};

}  // namespace tpu::onnximport::detail
