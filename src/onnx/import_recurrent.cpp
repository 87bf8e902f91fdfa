// Recurrent layers (docs/onnx.md, "Recurrent layers"; docs/quantization.md,
// "Recurrent layers"): an ONNX LSTM or GRU is unrolled over its time steps
// into the layers the TPU already runs. Per step, each gate is one dense
// layer reading the step's input x_t and the previous h (a dense layer of
// two inputs: their K tiles accumulate into the same accumulators) with its
// sigmoid or tanh fused (the activation unit); the element-wise gate
// arithmetic is mul, add and affine layers (the vector unit and the array);
// the state is ordinary tensors. x_t is pixel t of the network input (a
// 1 x L x D map) or the step's output of the recurrent layer before.
//
// Sequences are values whose axes the importer tracks (Value::seq_axes):
// Transpose permutes them, Squeeze drops the direction axis, Gather picks one
// time step, Shape reports them with a batch of 1 (as for every tensor).
#include <algorithm>

#include "onnx/importer.h"

namespace tpu::onnximport::detail {
namespace {

using model::ActFunction;

// The axes a sequence keeps once a size-1 axis or the time axis goes.
Value settle(Value v) {
  if (v.seq_axes == "NF" && v.steps.size() == 1) {
    Value out;
    out.tensor = v.steps[0];
    return out;
  }
  return v;
}

// A constant's index `v` into an axis of `len` (negative: from the end).
std::size_t axis_index(double v, std::size_t len) {
  const double k = v < 0 ? v + static_cast<double>(len) : v;
  return k >= 0 && k < static_cast<double>(len) && k == std::floor(k) ? static_cast<std::size_t>(k) : len;
}

}  // namespace

// What an unrolled LSTM or GRU keeps between its steps.
struct Importer::RecurrentUnit {
  bool gru = false;
  std::size_t hidden = 0, features = 0;
  Value x;                              // the input sequence, axes "TNF"
  const Const* w = nullptr;             // W: (1, gates * H, D)
  const Const* r = nullptr;             // R: (1, gates * H, H)
  std::vector<double> b;                // Wb then Rb: 2 * gates * H
  std::size_t h = 0, c = 0;             // the state's tensors before this step
  std::vector<std::size_t> hs, cs;      // every step's (tied: one quantization)
};

std::size_t Importer::add_part(const onnx::NodeProto& n, FloatLayer l, const std::string& part) {
  const std::size_t id = add_layer(n, std::move(l));
  names_.erase(net_.layers.back().name);
  const std::string base = fmt::format("{}.{}", n.name().empty() ? n.op_type() : n.name(), part);
  std::string name = base;
  for (int k = 2; name == "input" || names_.count(name); ++k) name = fmt::format("{}_{}", base, k);
  names_.insert(name);
  net_.layers.back().name = name;
  return id;
}

namespace {

// A dense layer of gate `gate` (its rows gate * H .. of W, R and the biases):
// reading x_t (pixel t of the input map, or the step's vector) when `x`, the
// previous h when `h`; `sign` -1 negates it (1 - sigmoid(a) = sigmoid(-a)).
// `r_bias`: R's bias too when the layer does not read h (the zero state's
// R h + Rb is Rb).
FloatLayer gate_layer(const Importer::RecurrentUnit& u, std::size_t gate, std::size_t t, bool x, bool h,
                      ActFunction act, double sign = 1.0, bool r_bias = false) {
  const std::size_t H = u.hidden, D = u.features, gates = u.gru ? 3 : 4;
  FloatLayer l;
  l.kind = compiler::LayerKind::Dense;
  l.act = act;
  if (x) {
    l.inputs.push_back(u.x.steps.empty() ? u.x.tensor : u.x.steps[t]);
    if (u.x.steps.empty()) l.pixel = static_cast<std::int64_t>(t);
  }
  if (h) l.inputs.push_back(u.h);
  const std::size_t k = (x ? D : 0) + (h ? H : 0);
  l.weight_shape = {k, H};
  l.weights.assign(k * H, 0.0f);
  for (std::size_t o = 0; o < H; ++o) {
    const std::size_t row = gate * H + o;
    std::size_t at = 0;
    if (x)
      for (std::size_t d = 0; d < D; ++d, ++at) l.weights[at * H + o] = static_cast<float>(sign * u.w->values[row * D + d]);
    if (h)
      for (std::size_t j = 0; j < H; ++j, ++at) l.weights[at * H + o] = static_cast<float>(sign * u.r->values[row * H + j]);
    const double bias = (x ? u.b[row] : 0.0) + (h || r_bias ? u.b[gates * H + row] : 0.0);
    l.bias.push_back(static_cast<float>(sign * bias));
  }
  return l;
}

FloatLayer vector_layer(compiler::LayerKind kind, std::vector<std::size_t> inputs, ActFunction act = ActFunction::None,
                        double alpha = 1.0) {
  FloatLayer l;
  l.kind = kind;
  l.inputs = std::move(inputs);
  l.act = act;
  l.alpha = alpha;
  return l;
}

}  // namespace

// One LSTM step (ONNX gate order i, o, f, c): c = f * c + i * g,
// h = o * tanh(c). Step 0 starts from the zero state: its gates read x_0
// only (R h = 0, Rb kept) and c = i * g (f * 0 = 0: no forget gate), exactly
// what the zero state computes, without loading R's tiles or the forget
// gate's from weight memory.
void Importer::lstm_step(const onnx::NodeProto& n, RecurrentUnit& u, std::size_t t) {
  using compiler::LayerKind;
  const std::string s = fmt::format("t{}.", t);
  const bool h = t > 0;
  const std::size_t i = add_part(n, gate_layer(u, 0, t, true, h, ActFunction::Sigmoid, 1.0, true), s + "gate_i");
  const std::size_t f = h ? add_part(n, gate_layer(u, 2, t, true, true, ActFunction::Sigmoid), s + "gate_f") : 0;
  const std::size_t g = add_part(n, gate_layer(u, 3, t, true, h, ActFunction::Tanh, 1.0, true), s + "gate_g");
  const std::size_t o = add_part(n, gate_layer(u, 1, t, true, h, ActFunction::Sigmoid, 1.0, true), s + "gate_o");
  const std::size_t ig = add_part(n, vector_layer(LayerKind::Mul, {i, g}), s + "ig");
  if (h) {
    const std::size_t fc = add_part(n, vector_layer(LayerKind::Mul, {f, u.c}), s + "fc");
    u.c = add_part(n, vector_layer(LayerKind::Add, {fc, ig}), s + "c");
  } else {
    u.c = ig;
  }
  const std::size_t tc = add_part(n, vector_layer(LayerKind::Affine, {u.c}, ActFunction::Tanh), s + "tanh_c");
  u.h = add_part(n, vector_layer(LayerKind::Mul, {o, tc}), s + "h");
  u.cs.push_back(u.c);
  u.hs.push_back(u.h);
}

// One GRU step (ONNX gate order z, r, h): h = (1 - z) * n + z * h_prev with
// 1 - z = sigmoid(-a_z) a gate of its own; n = tanh(W_n x + Wb_n + r * (R_n h
// + Rb_n)) (linear_before_reset 1, PyTorch's form).
void Importer::gru_step(const onnx::NodeProto& n, RecurrentUnit& u, std::size_t t) {
  using compiler::LayerKind;
  const std::string s = fmt::format("t{}.", t);
  const std::size_t z = add_part(n, gate_layer(u, 0, t, true, true, ActFunction::Sigmoid), s + "gate_z");
  const std::size_t omz = add_part(n, gate_layer(u, 0, t, true, true, ActFunction::Sigmoid, -1.0), s + "gate_omz");
  const std::size_t r = add_part(n, gate_layer(u, 1, t, true, true, ActFunction::Sigmoid), s + "gate_r");
  const std::size_t xn = add_part(n, gate_layer(u, 2, t, true, false, ActFunction::None), s + "xn");
  const std::size_t hn = add_part(n, gate_layer(u, 2, t, false, true, ActFunction::None), s + "hn");
  const std::size_t rhn = add_part(n, vector_layer(LayerKind::Mul, {r, hn}), s + "rhn");
  const std::size_t pre = add_part(n, vector_layer(LayerKind::Add, {xn, rhn}), s + "n_pre");
  const std::size_t nt = add_part(n, vector_layer(LayerKind::Affine, {pre}, ActFunction::Tanh), s + "gate_n");
  const std::size_t zh = add_part(n, vector_layer(LayerKind::Mul, {z, u.h}), s + "zh");
  const std::size_t zn = add_part(n, vector_layer(LayerKind::Mul, {omz, nt}), s + "omz_n");
  u.h = add_part(n, vector_layer(LayerKind::Add, {zn, zh}), s + "h");
  u.hs.push_back(u.h);
}

void Importer::recurrent(const onnx::NodeProto& n) {
  const bool gru = n.op_type() == "GRU";
  only_attrs(n, gru ? std::set<std::string>{"hidden_size", "direction", "activations", "linear_before_reset", "layout"}
                    : std::set<std::string>{"hidden_size", "direction", "activations", "input_forget", "layout"});
  if (qdq_) fail(n, "is not supported in a QDQ model");
  const std::int64_t hidden = attr_int(n, "hidden_size", 0);
  if (hidden < 1 || hidden > 65536) fail(n, "needs hidden_size of 1 to 65536");
  if (attr_string(n, "direction", "forward") != "forward")
    fail(n, "only direction \"forward\" is supported (bidirectional and reverse are not)");
  if (attr_int(n, "layout", 0) != 0) fail(n, "only layout 0 (time first) is supported");
  if (attr_int(n, "input_forget", 0) != 0) fail(n, "input_forget is not supported");
  if (const auto* a = attr(n, "activations")) {
    const std::vector<std::string> standard = gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                  : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    if (a->strings_size() != static_cast<int>(standard.size())) fail(n, "only the standard activations are supported");
    for (int k = 0; k < a->strings_size(); ++k)
      if (a->strings(k) != standard[static_cast<std::size_t>(k)]) fail(n, "only the standard activations are supported");
  }
  RecurrentUnit u;
  u.gru = gru;
  if (gru && attr_int(n, "linear_before_reset", 0) != 1)
    fail(n, "only linear_before_reset 1 (PyTorch's GRU: r * (R_n h + Rb_n)) is supported");
  u.hidden = static_cast<std::size_t>(hidden);
  const auto xi = values_.find(n.input_size() > 0 ? n.input(0) : std::string());
  if (xi == values_.end() || xi->second.seq_axes != "TNF")
    fail(n, "X must be the network's input sequence, (L, N, D) or a batch-first (N, L, D) transposed, or a "
            "recurrent layer's Y with its direction axis squeezed");
  u.x = xi->second;
  u.features = seq_features(u.x);
  const std::size_t L = seq_length(u.x), H = u.hidden, D = u.features, gates = gru ? 3 : 4;
  u.w = &need_const(n, 1, "W");
  u.r = &need_const(n, 2, "R");
  if (u.w->dims != std::vector<std::int64_t>{1, static_cast<std::int64_t>(gates * H), static_cast<std::int64_t>(D)})
    fail(n, fmt::format("W must be (1, {}, {})", gates * H, D));
  if (u.r->dims != std::vector<std::int64_t>{1, static_cast<std::int64_t>(gates * H), static_cast<std::int64_t>(H)})
    fail(n, fmt::format("R must be (1, {}, {})", gates * H, H));
  u.b.assign(2 * gates * H, 0.0);
  if (has_input(n, 3)) {
    const Const& b = need_const(n, 3, "B");
    if (b.values.size() != 2 * gates * H) fail(n, fmt::format("B must hold {} values", 2 * gates * H));
    u.b = b.values;
  }
  if (has_input(n, 4))
    for (double v : need_const(n, 4, "sequence_lens (absent, or every sequence of the full length)").values)
      if (v != static_cast<double>(L)) fail(n, fmt::format("sequence_lens must all be {} (the full length)", L));
  for (int k : {5, 6}) {
    if (k == 6 && gru) break;
    if (!has_input(n, k)) continue;
    for (double v : need_const(n, k, k == 5 ? "initial_h (absent or zeros)" : "initial_c (absent or zeros)").values)
      if (v != 0.0) fail(n, fmt::format("{} must be zeros", k == 5 ? "initial_h" : "initial_c"));
  }
  if (!gru && has_input(n, 7)) fail(n, "peepholes (input P) are not supported");
  // A GRU's zero state: a dense layer of zero weights on x_0 (its output is
  // exactly 0). An LSTM's step 0 needs none (lstm_step).
  if (gru) {
    u.h = add_part(n, gate_layer(u, 0, 0, true, false, ActFunction::None, 0.0), "h_init");
    u.hs.push_back(u.h);
  }
  for (std::size_t t = 0; t < L; ++t) gru ? gru_step(n, u, t) : lstm_step(n, u, t);
  net_.tied.push_back(u.hs);
  if (!gru) net_.tied.push_back(u.cs);
  // Y (L, 1, N, H), Y_h and Y_c (1, N, H).
  Value y;
  y.seq_axes = "TDNF";
  y.steps.assign(u.hs.begin() + (gru ? 1 : 0), u.hs.end());
  bind(n.output(0), y);
  for (int k = 1; k < n.output_size() && k < (gru ? 2 : 3); ++k) {
    Value last;
    last.seq_axes = "DNF";
    last.steps = {k == 1 ? u.h : u.c};
    if (!n.output(k).empty()) bind(n.output(k), last);
  }
  no_extra_outputs(n, gru ? 2 : 3);
}

// Squeeze of a sequence's direction axis (a size-1 axis of the model).
void Importer::squeeze(const onnx::NodeProto& n) {
  only_attrs(n, {"axes"});
  const auto it = values_.find(n.input_size() > 0 ? n.input(0) : std::string());
  if (it == values_.end() || it->second.seq_axes.empty())
    fail(n, "only a Squeeze of a recurrent layer's output (its direction axis) is supported");
  std::vector<double> axes;
  if (has_input(n, 1)) axes = need_const(n, 1, "axes").values;
  else for (std::int64_t a : attr_ints(n, "axes", {})) axes.push_back(static_cast<double>(a));
  Value v = it->second;
  std::string keep = v.seq_axes;
  for (double a : axes) {
    const std::size_t k = axis_index(a, v.seq_axes.size());
    if (k == v.seq_axes.size() || v.seq_axes[k] != 'D')
      fail(n, "only the direction axis of a recurrent layer's output can be squeezed");
    keep[k] = ' ';
  }
  if (axes.empty()) fail(n, "needs its axes (the direction axis)");
  keep.erase(std::remove(keep.begin(), keep.end(), ' '), keep.end());
  v.seq_axes = keep;
  bind(n.output(0), settle(v));
}

bool Importer::seq_transpose(const onnx::NodeProto& n) {
  const auto it = values_.find(n.input_size() > 0 ? n.input(0) : std::string());
  if (it == values_.end() || it->second.seq_axes.empty()) return false;
  only_attrs(n, {"perm"});
  Value v = it->second;
  std::vector<std::int64_t> perm = attr_ints(n, "perm", {});
  if (perm.empty())
    for (std::size_t k = v.seq_axes.size(); k-- > 0;) perm.push_back(static_cast<std::int64_t>(k));
  std::string axes;
  std::vector<bool> seen(v.seq_axes.size(), false);
  for (std::int64_t p : perm) {
    if (perm.size() != v.seq_axes.size() || p < 0 || static_cast<std::size_t>(p) >= seen.size() ||
        seen[static_cast<std::size_t>(p)])
      fail(n, "perm is not a permutation of the sequence's axes");
    seen[static_cast<std::size_t>(p)] = true;
    axes += v.seq_axes[static_cast<std::size_t>(p)];
  }
  v.seq_axes = axes;
  bind(n.output(0), settle(v));
  return true;
}

// Gather of one time step (a scalar index on the time axis), or of the
// direction axis's one entry.
bool Importer::seq_gather(const onnx::NodeProto& n) {
  const auto it = values_.find(n.input_size() > 0 ? n.input(0) : std::string());
  if (it == values_.end() || it->second.seq_axes.empty()) return false;
  only_attrs(n, {"axis"});
  Value v = it->second;
  const Const& idx = need_const(n, 1, "the index (one time step)");
  if (!idx.dims.empty() || idx.values.size() != 1) fail(n, "only a scalar index of a sequence is supported");
  const std::size_t axis = axis_index(static_cast<double>(attr_int(n, "axis", 0)), v.seq_axes.size());
  if (axis == v.seq_axes.size()) fail(n, "axis is outside the sequence's axes");
  const char a = v.seq_axes[axis];
  if (a == 'T') {
    if (v.steps.empty())
      fail(n, "a time step of the network's input goes only to a recurrent layer (no Gather of it)");
    const std::size_t t = axis_index(idx.values[0], v.steps.size());
    if (t == v.steps.size()) fail(n, fmt::format("index {} is outside the {} time steps", idx.values[0], v.steps.size()));
    v.steps = {v.steps[t]};
  } else if (a != 'D' || axis_index(idx.values[0], 1) != 0) {
    fail(n, "only a Gather of one time step (or of the direction axis) of a sequence is supported");
  }
  v.seq_axes.erase(axis, 1);
  bind(n.output(0), settle(v));
  return true;
}

// Shape of a sequence, in the model's axes with a batch of 1.
bool Importer::seq_shape(const onnx::NodeProto& n) {
  const auto it = values_.find(n.input_size() > 0 ? n.input(0) : std::string());
  if (it == values_.end() || it->second.seq_axes.empty()) return false;
  only_attrs(n, {});
  const Value& v = it->second;
  Const c;
  c.type = onnx::TensorProto::INT64;
  for (char a : v.seq_axes)
    c.values.push_back(a == 'T'   ? static_cast<double>(seq_length(v))
                       : a == 'F' ? static_cast<double>(seq_features(v)) : 1.0);
  c.dims = {static_cast<std::int64_t>(c.values.size())};
  consts_[n.output(0)] = std::move(c);
  return true;
}

}  // namespace tpu::onnximport::detail
