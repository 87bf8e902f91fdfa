// Transformer layers from ONNX (docs/onnx.md, "Transformer layers"): token
// sequences (N, L, D) held as 1 x L x D maps, LayerNorm from the decomposed
// pattern torch.onnx.export writes at opset 13 (ReduceMean, Sub, Pow,
// ReduceMean, Add eps, Sqrt, Div, then Mul gamma, Add beta) or from
// LayerNormalization, GELU from the exact-erf pattern (Div by sqrt 2, Erf,
// Add 1, Mul x, Mul 0.5), and a per-feature Mul by a constant.
//
// A pattern is recognized at its first node by its wiring alone (its
// constants, Constant nodes between its nodes, are not read yet); its other
// nodes are skipped, and its layers are made when the walk reaches its last
// node (`deferred_`), where every constant it reads is known.
#include "onnx/importer.h"

#include <algorithm>
#include <cmath>

namespace tpu::onnximport::detail {
namespace {

// The node name's prefix up to its last '/' (the module's path in a
// torch.onnx.export graph), and `what` after it.
std::string sibling_name(const onnx::NodeProto& n, const std::string& what) {
  const std::size_t slash = n.name().rfind('/');
  return (slash == std::string::npos ? std::string() : n.name().substr(0, slash + 1)) + what;
}

}  // namespace

const onnx::NodeProto* Importer::sole_consumer(const std::string& name, const char* op) const {
  const auto it = consumers_.find(name);
  if (it == consumers_.end() || it->second.size() != 1 || uses_.at(name) != 1) return nullptr;
  const onnx::NodeProto& c = g_.node(static_cast<int>(it->second[0]));
  return c.op_type() == op ? &c : nullptr;
}

std::size_t Importer::node_index(const onnx::NodeProto& n) const {
  return node_index_.at(&n);  // the graph's nodes are not contiguous in memory
}

bool Importer::const_scalar(const std::string& name, double& v) const {
  const auto it = consts_.find(name);
  if (it == consts_.end() || it->second.values.size() != 1) return false;
  v = it->second.values[0];
  return true;
}

bool Importer::reads_tokens(const onnx::NodeProto& n) const {
  for (const auto& i : n.input()) {
    const auto it = values_.find(i);
    if (it != values_.end() && it->second.tokens) return true;
  }
  return false;
}

bool Importer::token_sequence(const std::string& input) const {
  static const std::set<std::string> readers = {"MatMul", "Add", "Mul", "Sub", "ReduceMean", "LayerNormalization"};
  bool any = false;
  for (const auto& n : g_.node())
    for (const auto& i : n.input())
      if (i == input) {
        // A Transpose (1, 0, 2): MultiheadAttention's first node (match_mha).
        const bool attention = n.op_type() == "Transpose" && attr_ints(n, "perm", {}) == std::vector<std::int64_t>{1, 0, 2};
        if (!readers.count(n.op_type()) && !attention) return false;
        any = true;
      }
  return any;
}

bool Importer::transformer_node(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "LayerNormalization") {
    layer_normalization(n);
    return true;
  }
  if (op == "ReduceMean" && n.input_size() == 1 && values_.count(n.input(0))) {
    const Value& x = values_.at(n.input(0));
    if ((x.tokens || shape(x).size() == 1) && match_layernorm(n)) return true;
  }
  if (op == "Div" && n.input_size() == 2 && values_.count(n.input(0)) && is_const(n.input(1))) return match_gelu(n);
  if (op == "Mul" && reads_tokens(n) && n.input_size() == 2 && (is_const(n.input(0)) || is_const(n.input(1)))) {
    const int ci = is_const(n.input(0)) ? 0 : 1;
    const Value x = need_value(n, 1 - ci);
    const Const& c = consts_.at(n.input(ci));
    const std::size_t d = shape(x).back();
    if (c.values.size() != 1 && (c.values.size() != d || (!c.dims.empty() && c.dims.back() != static_cast<std::int64_t>(d))))
      fail(n, fmt::format("multiplies the token sequence by a constant of shape [{}]: only a scalar or one value per "
                          "feature ({}) is supported", fmt::join(c.dims, ", "), d));
    std::vector<double> g(d);
    for (std::size_t k = 0; k < d; ++k) g[k] = c.values[c.values.size() == 1 ? 0 : k];
    set_output(n, feature_affine(n, x, g, {}, n.name()));
    return true;
  }
  for (const auto& i : n.input())
    if (const auto it = values_.find(i); it != values_.end() && it->second.token >= 0 && op != "Gemm" && op != "MatMul")
      fail(n, fmt::format("reads the token x[:, {}] of a sequence: only a Gemm or MatMul (a Linear) may read one",
                          it->second.token));
  // A map (N, C, H, W) as tokens, as ViT embeds its patches: Reshape to
  // (N, C, H*W), then Transpose (0, 2, 1): the same planes, its pixels the tokens.
  if (op == "Reshape" && n.input_size() == 2 && values_.count(n.input(0)) && is_const(n.input(1)) && !one_d_) {
    const Value& x = values_.at(n.input(0));
    const Shape s = shape(x);
    const std::vector<double>& to = consts_.at(n.input(1)).values;
    const onnx::NodeProto* tr = sole_consumer(n.output(0), "Transpose");
    if (!x.tokens && x.token < 0 && x.perm.empty() && s.size() == 3 && to.size() == 3 && tr &&
        attr_ints(*tr, "perm", {}) == std::vector<std::int64_t>{0, 2, 1} &&
        to[1] == static_cast<double>(s[2]) && (to[2] == -1 || to[2] == static_cast<double>(s[0] * s[1]))) {
      only_attrs(n, {"allowzero"});
      Value v = x;
      v.tokens = true;
      skip_.insert(node_index(*tr));
      bind(tr->output(0), v);
      return true;
    }
  }
  // The mean over the tokens (axis 1, as an encoder's mean pooling): a global
  // average pool of the map, then a flatten.
  if (op == "ReduceMean" && reads_tokens(n)) {
    const std::vector<std::int64_t> axes = attr_ints(n, "axes", {});
    if (axes.size() == 1 && (axes[0] == 1 || axes[0] == -2) && attr_int(n, "keepdims", 1) == 0) {
      const Value x = need_value(n, 0);
      FloatLayer pool;
      pool.kind = LayerKind::GlobalAvgPool2d;
      pool.inputs = {x.tensor};
      const Value p = add_value(n, std::move(pool));
      FloatLayer flat;
      flat.kind = LayerKind::Flatten;
      flat.inputs = {p.tensor};
      onnx::NodeProto named = n;
      named.set_name(n.name() + "_flatten");
      set_output(n, add_value(named, std::move(flat)));
      return true;
    }
  }
  if (op == "Gather" && reads_tokens(n)) {
    only_attrs(n, {"axis"});
    Value x = need_value(n, 0);
    const std::int64_t axis = attr_int(n, "axis", 0);
    const Const& idx = need_const(n, 1, "the index (one token)");
    const std::size_t L = shape(x)[0] * shape(x)[1];  // a map's pixels (ViT's patches) are tokens too
    const double t = idx.values.size() == 1 ? (idx.values[0] < 0 ? idx.values[0] + static_cast<double>(L) : idx.values[0])
                                            : -1.0;
    if ((axis != 1 && axis != -2) || !idx.dims.empty() || t < 0 || t >= static_cast<double>(L))
      fail(n, fmt::format("only a Gather of one token (a scalar index in 0..{} on axis 1, x[:, t]) of a token sequence "
                          "is supported", L - 1));
    x.tokens = false;
    x.token = static_cast<std::int64_t>(t);
    set_output(n, x);
    return true;
  }
  if (op == "Transpose" && reads_tokens(n) && attr_ints(n, "perm", {}) == std::vector<std::int64_t>{1, 0, 2})
    return match_mha(n);
  if (op == "Concat" && reads_tokens(n)) return token_constants(n);
  if (op == "Add" && reads_tokens(n) && n.input_size() == 2 && (is_const(n.input(0)) || is_const(n.input(1)))) {
    const Const& c = consts_.at(n.input(is_const(n.input(0)) ? 0 : 1));
    const std::size_t d = shape(values_.at(n.input(is_const(n.input(0)) ? 1 : 0))).back();
    if (c.values.size() > d) return token_constants(n);  // not one value per feature (a Linear's bias)
  }
  if (op == "Shape" && reads_tokens(n))
    fail(n, "reads the shape of a token sequence: tpu-sim takes MultiheadAttention as torch.onnx.export writes it "
            "with batch_first=True (a Transpose (1, 0, 2) of the (N, L, D) tokens first; docs/onnx.md, "
            "\"MultiheadAttention\"); batch_first=False's (L, N, D) input is not supported");
  if (reads_tokens(n)) {
    static const std::set<std::string> ok = {"MatMul", "Add", "Mul", "Identity", "Dropout", "Relu"};
    if (!ok.count(op))
      fail(n, "reads a token sequence (N, L, D): tpu-sim takes MatMul by a constant, Add, Mul, ReLU, LayerNorm (its "
              "decomposed form or LayerNormalization), GELU (the erf form), the mean over the tokens, a Gather of "
              "one token, ViT's class token and positions, and MultiheadAttention (its first node a Transpose "
              "(1, 0, 2)) on token sequences (docs/onnx.md, \"Transformer layers\")");
  }
  return false;
}

void Importer::transformer_only(const onnx::NodeProto& n) {
  fail(n, "is supported only as part of the LayerNorm pattern (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div) "
          "or GELU's (Div by sqrt 2, Erf, Add 1, Mul x, Mul 0.5) (docs/onnx.md, \"Transformer layers\")");
}

// y = gamma * x + beta per feature (the last axis): a depthwise 1x1 conv2d on
// the array (gamma its weights, beta its bias), named `name`.
Value Importer::feature_affine(const onnx::NodeProto& n, const Value& x, const std::vector<double>& gamma,
                               const std::vector<double>& beta, const std::string& name) {
  const Shape in = shape(x);
  const std::size_t d = in.back();
  FloatLayer l;
  l.kind = LayerKind::Conv2d;
  l.inputs = {x.tensor};
  l.groups = static_cast<unsigned>(d);
  l.weight_shape = {1, 1, 1, d};
  if (in.size() != 3) fail(n, "a per-feature affine needs a token sequence (N, L, D)");
  for (std::size_t k = 0; k < d; ++k) l.weights.push_back(static_cast<float>(gamma.empty() ? 1.0 : gamma[k]));
  for (std::size_t k = 0; k < beta.size(); ++k) l.bias.push_back(static_cast<float>(beta[k]));
  onnx::NodeProto named = n;
  named.set_name(name);
  Value y = add_value(named, std::move(l));
  y.tokens = x.tokens;
  return y;
}

bool Importer::take_ln_affine(Value& x, std::vector<double>& gamma, std::vector<double>& beta) {
  if (!ln_affine_.count(x.tensor) || x.tensor != net_.layers.size() || !read_once(x.tensor) || !x.perm.empty())
    return false;
  const FloatLayer& a = net_.layers.back();
  gamma.assign(a.weights.begin(), a.weights.end());
  beta.assign(a.bias.begin(), a.bias.end());
  beta.resize(gamma.size(), 0.0);
  x.tensor = a.inputs.at(0);
  names_.erase(a.name);
  ln_affine_.erase(net_.layers.size());
  reads_.erase(net_.layers.size());  // the id goes to the Linear's layer, with its own readers
  renames_.erase(net_.layers.size());
  net_.layers.pop_back();
  shapes_.pop_back();
  layer_op_.pop_back();
  first_new_tensor_ = net_.layers.size() + 1;
  return true;
}

// The LayerNorm layer of x over its last axis, then the affine when gamma or
// beta is not the identity; bound to `out`.
void Importer::layernorm_layers(const onnx::NodeProto& n, const Value& x, double eps, const std::vector<double>& gamma,
                                const std::vector<double>& beta, const std::string& out) {
  if (!(eps >= 0.0) || !std::isfinite(eps)) fail(n, fmt::format("epsilon {} is not finite and >= 0", eps));
  const std::size_t d = shape(x).back();
  if ((!gamma.empty() && gamma.size() != d) || (!beta.empty() && beta.size() != d))
    fail(n, fmt::format("the LayerNorm's scale and bias must have {} values (the last axis)", d));
  FloatLayer l;
  l.kind = LayerKind::LayerNorm;
  l.inputs = {x.tensor};
  l.eps = eps;
  onnx::NodeProto named = n;
  named.set_name(sibling_name(n, "LayerNorm"));
  Value y = add_value(named, std::move(l));
  y.tokens = x.tokens;
  const bool unit = std::all_of(gamma.begin(), gamma.end(), [](double g) { return g == 1.0; });
  const bool zero = std::all_of(beta.begin(), beta.end(), [](double b) { return b == 0.0; });
  if (!unit || !zero) {
    if (shape(x).size() != 3)
      fail(n, "a LayerNorm with scale or bias needs a token sequence (N, L, D): the affine runs per feature of a map");
    y = feature_affine(n, y, unit ? std::vector<double>{} : gamma, zero ? std::vector<double>{} : beta,
                       sibling_name(n, "LayerNorm_affine"));
    ln_affine_.insert(y.tensor);
  }
  bind(out, y);
}

void Importer::layer_normalization(const onnx::NodeProto& n) {
  only_attrs(n, {"axis", "epsilon", "stash_type"});
  no_extra_outputs(n, 1);
  const Value x = need_value(n, 0);
  const std::int64_t rank = static_cast<std::int64_t>(shape(x).size() == 3 ? 3 : 2);
  std::int64_t axis = attr_int(n, "axis", -1);
  if (axis < 0) axis += rank;
  if (axis != rank - 1) fail(n, "only the normalization over the last axis (axis -1) is supported");
  if (!x.tokens && shape(x).size() != 1) fail(n, "needs a token sequence (N, L, D) or an (N, F) input");
  const Const& s = need_const(n, 1, "the scale");
  std::vector<double> beta;
  if (has_input(n, 2)) beta = need_const(n, 2, "the bias").values;
  layernorm_layers(n, x, attr_float(n, "epsilon", 1e-5f), s.values, beta, n.output(0));
}

// ReduceMean(x) -> Sub(x, mean) -> {Pow(sub, 2) -> ReduceMean -> Add eps ->
// Sqrt} -> Div(sub, sqrt) [-> Mul gamma [-> Add beta]], each node the only
// reader of the one before (but sub, read by Pow and Div).
bool Importer::match_layernorm(const onnx::NodeProto& r) {
  const auto last_axis = [&](const onnx::NodeProto& m) {
    const std::vector<std::int64_t> axes = attr_ints(m, "axes", {});
    const std::int64_t rank = shape(values_.at(r.input(0))).size() == 3 ? 3 : 2;
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1) && attr_int(m, "keepdims", 1) == 1;
  };
  if (!last_axis(r)) return false;
  const std::string& x = r.input(0);
  const onnx::NodeProto* sub = sole_consumer(r.output(0), "Sub");
  if (!sub || sub->input(0) != x || sub->input(1) != r.output(0)) return false;
  const auto it = consumers_.find(sub->output(0));
  if (it == consumers_.end() || it->second.size() != 2 || uses_.at(sub->output(0)) != 2) return false;
  const onnx::NodeProto* pow = nullptr;
  const onnx::NodeProto* div = nullptr;
  for (std::size_t k : it->second) {
    const onnx::NodeProto& c = g_.node(static_cast<int>(k));
    if (c.op_type() == "Pow" && c.input(0) == sub->output(0)) pow = &c;
    if (c.op_type() == "Div" && c.input(0) == sub->output(0)) div = &c;
  }
  if (!pow || !div) return false;
  const onnx::NodeProto* r2 = sole_consumer(pow->output(0), "ReduceMean");
  if (!r2 || !last_axis(*r2)) return false;
  const onnx::NodeProto* add = sole_consumer(r2->output(0), "Add");
  if (!add) return false;
  const int eps_at = add->input(0) == r2->output(0) ? 1 : 0;
  const onnx::NodeProto* sq = sole_consumer(add->output(0), "Sqrt");
  if (!sq || div->input(1) != sq->output(0)) return false;
  std::vector<const onnx::NodeProto*> nodes{sub, pow, r2, add, sq, div};
  const onnx::NodeProto* mul = sole_consumer(div->output(0), "Mul");
  const onnx::NodeProto* bias = mul ? sole_consumer(mul->output(0), "Add") : nullptr;
  const auto const_input = [&](const onnx::NodeProto* m, const std::string& from) {
    return m && m->input_size() == 2 && (m->input(0) == from || m->input(1) == from);
  };
  if (!const_input(mul, div->output(0))) mul = nullptr, bias = nullptr;
  if (mul && !const_input(bias, mul->output(0))) bias = nullptr;
  if (mul) nodes.push_back(mul);
  if (bias) nodes.push_back(bias);
  for (const onnx::NodeProto* m : nodes) skip_.insert(node_index(*m));
  const onnx::NodeProto* last = nodes.back();
  const Value xv = need_value(r, 0);
  skip_.erase(node_index(*last));
  deferred_[node_index(*last)] = [this, &r, pow, add, eps_at, mul, bias, div, xv, last] {
    double p = 0, eps = 0;
    if (!const_scalar(pow->input(1), p) || p != 2.0) fail(*pow, "is not the square of a LayerNorm (exponent 2)");
    if (!const_scalar(add->input(eps_at), eps)) fail(*add, "is not the epsilon of a LayerNorm (a scalar constant)");
    const auto operand = [&](const onnx::NodeProto* m, const std::string& from, const char* what) {
      const std::string& c = m->input(0) == from ? m->input(1) : m->input(0);
      if (!is_const(c)) fail(*m, fmt::format("the LayerNorm's {} must be a constant", what));
      return consts_.at(c).values;
    };
    const std::vector<double> gamma = mul ? operand(mul, div->output(0), "scale") : std::vector<double>{};
    const std::vector<double> beta = bias ? operand(bias, mul->output(0), "bias") : std::vector<double>{};
    layernorm_layers(r, xv, eps, gamma, beta, last->output(0));
  };
  return true;
}

// Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5: x (1 + erf(x / sqrt 2)) / 2.
bool Importer::match_gelu(const onnx::NodeProto& d) {
  const std::string& x = d.input(0);
  double c = 0;
  if (!const_scalar(d.input(1), c) || std::fabs(c - std::sqrt(2.0)) > 1e-6) return false;
  const onnx::NodeProto* erf = sole_consumer(d.output(0), "Erf");
  if (!erf) return false;
  const onnx::NodeProto* add = sole_consumer(erf->output(0), "Add");
  if (!add) return false;
  const onnx::NodeProto* mul = sole_consumer(add->output(0), "Mul");
  if (!mul || !((mul->input(0) == x && mul->input(1) == add->output(0)) ||
                (mul->input(1) == x && mul->input(0) == add->output(0))))
    return false;
  const onnx::NodeProto* half = sole_consumer(mul->output(0), "Mul");
  if (!half) return false;
  for (const onnx::NodeProto* m : {erf, add, mul}) skip_.insert(node_index(*m));
  const Value xv = need_value(d, 0);
  deferred_[node_index(*half)] = [this, erf, add, mul, half, xv] {
    double one = 0, h = 0;
    const int oi = add->input(0) == erf->output(0) ? 1 : 0;
    const int hi = half->input(0) == mul->output(0) ? 1 : 0;
    if (!const_scalar(add->input(oi), one) || one != 1.0) fail(*add, "is not GELU's 1 + erf (a constant 1)");
    if (!const_scalar(half->input(hi), h) || h != 0.5) fail(*half, "is not GELU's half (a constant 0.5)");
    FloatLayer l;
    l.kind = LayerKind::Gelu;
    l.inputs = {xv.tensor};
    onnx::NodeProto named = *erf;
    named.set_name(sibling_name(*erf, "Gelu"));
    Value y = add_value(named, std::move(l));
    y.tokens = xv.tokens;
    bind(half->output(0), y);
  };
  return true;
}

}  // namespace tpu::onnximport::detail
