// Attention's operators (importer.h; docs/quantization.md, "Softmax and
// attention"): Softmax over the last axis as a softmax layer (SMAX), the
// MultiheadAttention pattern (its matmul layers: gemm() refuses a MatMul of
// two computed tensors anywhere else), and ViT's class token and positional
// embedding (token_bias layers).
#include "onnx/importer.h"

#include <algorithm>
#include <cmath>

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


// ---- MultiheadAttention (docs/onnx.md, "MultiheadAttention") ----
//
// torch.onnx.export (torch 1.13, opset 13) writes nn.MultiheadAttention with
// batch_first=True, self-attention (query, key and value the same tensor, so
// the packed in-projection) and no mask as (x the (N, L, D) tokens, H heads of
// dh = D / H features, E = N * H):
//
//   t  = Transpose(x, perm (1, 0, 2))               (L, N, D)
//   p  = Add(in_proj_bias, MatMul(t, W_in))         (L, N, 3D), W_in (D, 3D)
//   Shape(p) -> Gather -1 -> Add 2 -> Div 3 -> Mul 1, 2, 3: the bounds 0, D, 2D, 3D
//   q, k, v = Slice(p, 0..D), Slice(p, D..2D), Slice(p, 2D..3D) on axis -1
//   Q = Transpose(Reshape(q, (L, E, dh)), (1, 0, 2))  (E, L, dh)
//   K = Transpose(Reshape(k, (L, E, dh)), (1, 2, 0))  (E, dh, L)
//   V = Transpose(Reshape(v, (L, E, dh)), (1, 0, 2))  (E, L, dh)
//   S = MatMul(Div(Q, sqrt(dh)), K)                 (E, L, L) (or a Mul by 1/sqrt(dh))
//   O = MatMul(Softmax(S, axis -1), V)              (E, L, dh)
//   y = Transpose(Reshape(Gemm(Reshape(Transpose(O, (1, 0, 2)), (L*N, D)),
//                 W_out, b_out, transB 1), (L, N, D)), (1, 0, 2))   (N, L, D)
//
// It is recognized at its first Transpose by its wiring; its constants are
// checked at its last node, where they are known: the slices' bounds, the
// reshapes' shapes (L, N * H, dh), (L * N, D) and (L, N, D), the scale, the
// Softmax's axis, the Gemm's attributes. Per head h the layers are
// NODE.hH.q/.k/.v (1x1 conv2d on the 1 x L x D map: columns h*dh.. of W_in's
// thirds), NODE.hH.qk (matmul, transpose_b, alpha = the scale: folded into
// the requantization), NODE.hH.softmax (over the keys), NODE.hH.pv (matmul),
// then NODE.concat (the heads' channels) and NODE.out (the out-projection),
// NODE the attention module's path (the Softmax node's name up to its last
// '/'). A mask (an Add or Where before the Softmax) or any other variant is
// refused naming the node where the wiring differs.
namespace {

std::string module_path(const onnx::NodeProto& n) {
  const std::size_t slash = n.name().rfind('/');
  return slash == std::string::npos || slash == 0 ? n.name() : n.name().substr(0, slash);
}

}  // namespace

const onnx::NodeProto& Importer::mha_next(const onnx::NodeProto& from, const char* op, const std::string& what,
                                          const char* hint) {
  const std::string& out = from.output(0);
  const std::string why = hint ? fmt::format("; {}", hint) : std::string();
  const auto it = consumers_.find(out);
  if (it == consumers_.end() || it->second.size() != 1 || uses_.at(out) != 1)
    fail(from, fmt::format("is not the MultiheadAttention pattern (docs/onnx.md, \"MultiheadAttention\"): its output "
                           "must be read by one {} ({}) only{}", op, what, why));
  const onnx::NodeProto& c = g_.node(static_cast<int>(it->second[0]));
  if (c.op_type() != op)
    fail(from, fmt::format("is not the MultiheadAttention pattern (docs/onnx.md, \"MultiheadAttention\"): its output "
                           "is read by {} '{}', not a {} ({}){}", c.op_type(), c.name(), op, what, why));
  skip_.insert(node_index(c));
  return c;
}

bool Importer::match_mha(const onnx::NodeProto& t) {
  const auto bad = [&](const onnx::NodeProto& n, const std::string& what) {
    fail(n, fmt::format("is not the MultiheadAttention pattern (docs/onnx.md, \"MultiheadAttention\"): {}", what));
  };
  only_attrs(t, {"perm"});
  const Value x = need_value(t, 0);
  const Shape xs = shape(x);
  const std::size_t L = xs[1], D = xs[2];
  if (xs[0] != 1) bad(t, "reads a map, not a token sequence");
  skip_.insert(node_index(t));
  const onnx::NodeProto& mm = mha_next(t, "MatMul", "the packed in-projection");
  if (mm.input(0) != t.output(0) || !is_const(mm.input(1)))
    bad(mm, "the in-projection must be a MatMul of the transposed tokens by a constant");
  if (consts_.at(mm.input(1)).dims != std::vector<std::int64_t>{std::int64_t(D), std::int64_t(3 * D)})
    bad(mm, fmt::format("the in-projection's weights are [{}], not the packed ({}, {}) of self-attention's query, key "
                        "and value: separate query, key and value projections (cross-attention, kdim or vdim) are "
                        "not supported", fmt::join(consts_.at(mm.input(1)).dims, ", "), D, 3 * D));
  const onnx::NodeProto& pb =
      mha_next(mm, "Add", "the in-projection's bias", "MultiheadAttention(bias=False) is not supported");
  // The bias Add's output: read by a Shape (its last axis, 3D) and the three Slices.
  const auto readers = consumers_.find(pb.output(0));
  std::vector<const onnx::NodeProto*> slices;
  const onnx::NodeProto* shp = nullptr;
  if (readers != consumers_.end())
    for (std::size_t k : readers->second) {
      const onnx::NodeProto& c = g_.node(static_cast<int>(k));
      if (c.op_type() == "Slice" && c.input(0) == pb.output(0)) slices.push_back(&c);
      else if (c.op_type() == "Shape" && !shp) shp = &c;
      else bad(pb, fmt::format("the in-projection is read by {} '{}'", c.op_type(), c.name()));
    }
  if (slices.size() != 3 || uses_.at(pb.output(0)) != static_cast<int>(slices.size() + (shp ? 1 : 0)))
    bad(pb, "the in-projection must be read by three Slices (query, key, value) and at most a Shape");
  for (const onnx::NodeProto* s : slices) skip_.insert(node_index(*s));
  if (shp) {
    // Its value is known: the model's (L, N, 3D), N the graph input's batch
    // (1 when not fixed, as for other Shapes of a sequence).
    skip_.insert(node_index(*shp));
    Const c;
    c.type = onnx::TensorProto::INT64;
    c.values = {double(L), input_batch_ > 0 ? double(input_batch_) : 1.0, double(3 * D)};
    c.dims = {3};
    consts_[shp->output(0)] = std::move(c);
  }
  // Each slice: Reshape, then Transpose (Q: (1, 0, 2) then the scale; K: (1, 2, 0); V: (1, 0, 2)).
  struct Branch {
    const onnx::NodeProto *slice, *reshape, *transpose;
  };
  std::vector<Branch> br;
  for (const onnx::NodeProto* s : slices) {
    const onnx::NodeProto& r = mha_next(*s, "Reshape", "to (L, N * heads, head features)");
    const onnx::NodeProto& tr = mha_next(r, "Transpose", "to heads first");
    br.push_back({s, &r, &tr});
  }
  // Which is which: K's transpose is (1, 2, 0) and feeds the scores' MatMul as B.
  const onnx::NodeProto *scale = nullptr, *qk = nullptr;
  int qi = -1, ki = -1, vi = -1;
  for (int b = 0; b < 3; ++b) {
    const std::vector<std::int64_t> perm = attr_ints(*br[b].transpose, "perm", {});
    if (perm == std::vector<std::int64_t>{1, 2, 0}) {
      if (ki >= 0) bad(*br[b].transpose, "two keys");
      ki = b;
      continue;
    }
    if (perm != std::vector<std::int64_t>{1, 0, 2}) bad(*br[b].transpose, "heads are transposed with (1, 0, 2) or (1, 2, 0)");
    const auto it = consumers_.find(br[b].transpose->output(0));
    const onnx::NodeProto* c = it != consumers_.end() && it->second.size() == 1 ? &g_.node(static_cast<int>(it->second[0]))
                                                                               : nullptr;
    if (c && (c->op_type() == "Div" || c->op_type() == "Mul")) {
      if (qi >= 0) bad(*c, "two queries");
      qi = b;
      scale = &mha_next(*br[b].transpose, c->op_type().c_str(), "the scale 1/sqrt(head features)");
    } else {
      if (vi >= 0) bad(*br[b].transpose, "two values");
      vi = b;
    }
  }
  if (qi < 0 || ki < 0 || vi < 0) bad(pb, "the query (scaled), key and value branches were not found");
  qk = &mha_next(*scale, "MatMul", "the scores Q K^T");
  if (qk->input(0) != scale->output(0) || qk->input(1) != br[ki].transpose->output(0))
    bad(*qk, "the scores must be MatMul(scaled Q, K transposed)");
  const onnx::NodeProto& sm = mha_next(*qk, "Softmax", "over the keys", "attention masks are not supported");
  const onnx::NodeProto& pv = mha_next(sm, "MatMul", "P V");
  if (pv.input(0) != sm.output(0) || pv.input(1) != br[vi].transpose->output(0))
    bad(pv, "the output must be MatMul(softmax, V)");
  const onnx::NodeProto& back = mha_next(pv, "Transpose", "tokens first again");
  const onnx::NodeProto& flat = mha_next(back, "Reshape", "to (L * N, D)");
  const onnx::NodeProto& out = mha_next(flat, "Gemm", "the out-projection");
  const onnx::NodeProto& unflat = mha_next(out, "Reshape", "to (L, N, D)");
  const onnx::NodeProto& last = mha_next(unflat, "Transpose", "back to (N, L, D)");
  skip_.erase(node_index(last));
  const Branch q = br[qi], k = br[ki], v = br[vi];
  deferred_[node_index(last)] = [this, bad, x, L, D, &mm, &pb, q, k, v, scale, qk, &sm, &pv, &back, &flat, &out, &unflat,
                                 &last] {
    const Const& w_in = consts_.at(mm.input(1));
    const std::string& bias_name = pb.input(0) == mm.output(0) ? pb.input(1) : pb.input(0);
    if (!is_const(bias_name) || consts_.at(bias_name).values.size() != 3 * D)
      bad(pb, fmt::format("the in-projection's bias must be a constant of {} values", 3 * D));
    const std::vector<double>& b_in = consts_.at(bias_name).values;
    // The slices' bounds: query, key, value in that order of the 3D features.
    const auto bounds = [&](const onnx::NodeProto& s, std::size_t part) {
      only_attrs(s, {});
      if (s.input_size() < 3 || !is_const(s.input(1)) || !is_const(s.input(2))) bad(s, "its bounds must be constants");
      double a = 0, e = 0, axis = -1, step = 1;
      if (!const_scalar(s.input(1), a) || !const_scalar(s.input(2), e) ||
          (has_input(s, 3) && !const_scalar(s.input(3), axis)) || (has_input(s, 4) && !const_scalar(s.input(4), step)))
        bad(s, "its bounds must be one value each");
      if ((axis != -1 && axis != 2) || step != 1 || a != double(part * D) || e != double((part + 1) * D))
        bad(s, fmt::format("the {} must be the features {}..{} of the in-projection (axis -1), not {}..{} on axis {}",
                           part == 0 ? "query" : part == 1 ? "key" : "value", part * D, (part + 1) * D, a, e, axis));
    };
    bounds(*q.slice, 0);
    bounds(*k.slice, 1);
    bounds(*v.slice, 2);
    const auto shape_of = [&](const onnx::NodeProto& r) {
      only_attrs(r, {"allowzero"});
      if (!is_const(r.input(1))) bad(r, "its shape must be a constant");
      return consts_.at(r.input(1)).values;
    };
    const std::vector<double> rs = shape_of(*q.reshape);
    // Whole numbers in range before any cast (a -1 or a float constant is refused, not cast).
    const auto whole = [](double num, double hi) { return num >= 1 && num <= hi && std::floor(num) == num; };
    if (rs.size() != 3 || rs[0] != double(L) || !whole(rs[2], double(D)) || D % static_cast<std::size_t>(rs[2]) != 0)
      bad(*q.reshape, fmt::format("the heads' shape [{}] is not (L = {}, N * heads, head features dividing D = {})",
                                  fmt::join(rs, ", "), L, D));
    const auto dh = static_cast<std::size_t>(rs[2]);
    const std::size_t H = D / dh;
    if (!whole(rs[1], double(std::size_t{1} << 40)) || static_cast<std::size_t>(rs[1]) % H != 0)
      bad(*q.reshape, fmt::format("the heads' shape [{}]: {} is not N times the {} heads (a whole number; no -1)",
                                  fmt::join(rs, ", "), rs[1], H));
    const std::size_t N = static_cast<std::size_t>(rs[1]) / H;
    for (const Branch* b : {&k, &v})
      if (shape_of(*b->reshape) != rs)
        bad(*b->reshape, fmt::format("the heads' shape [{}] differs from the query's [{}]",
                                     fmt::join(shape_of(*b->reshape), ", "), fmt::join(rs, ", ")));
    if (shape_of(flat) != std::vector<double>{double(L * N), double(D)})
      bad(flat, fmt::format("the heads must be joined to ({}, {}), not [{}]", L * N, D, fmt::join(shape_of(flat), ", ")));
    if (shape_of(unflat) != std::vector<double>{double(L), double(N), double(D)})
      bad(unflat, fmt::format("the tokens must be ({}, {}, {}), not [{}]", L, N, D, fmt::join(shape_of(unflat), ", ")));
    for (const onnx::NodeProto* tr : {q.transpose, v.transpose, &back, &last}) {
      only_attrs(*tr, {"perm"});
      if (attr_ints(*tr, "perm", {}) != std::vector<std::int64_t>{1, 0, 2}) bad(*tr, "its perm must be (1, 0, 2)");
    }
    const int si = scale->input(0) == q.transpose->output(0) ? 1 : 0;
    double c = 0;
    if (!const_scalar(scale->input(si), c) || !(c > 0) || !std::isfinite(c))
      bad(*scale, "the scale must be a positive scalar constant");
    const double alpha = scale->op_type() == "Div" ? 1.0 / c : c;
    only_attrs(sm, {"axis"});
    if (attr_int(sm, "axis", -1) != -1 && attr_int(sm, "axis", -1) != 2) bad(sm, "the softmax must be over the keys (axis -1)");
    only_attrs(out, {"alpha", "beta", "transA", "transB"});
    if (attr_int(out, "transA", 0) != 0 || attr_int(out, "transB", 0) != 1 || attr_float(out, "alpha", 1.0f) != 1.0f ||
        attr_float(out, "beta", 1.0f) != 1.0f)
      bad(out, "the out-projection must be a Gemm with transB 1, alpha 1, beta 1");
    const Const& w_out = need_const(out, 1, "the out-projection's weights");
    if (w_out.dims != std::vector<std::int64_t>{std::int64_t(D), std::int64_t(D)})
      bad(out, fmt::format("the out-projection's weights are [{}], not [{}, {}]", fmt::join(w_out.dims, ", "), D, D));
    std::vector<double> b_out(D, 0.0);
    if (has_input(out, 2)) {
      const Const& bo = need_const(out, 2, "the out-projection's bias");
      if (bo.values.size() != D) bad(out, fmt::format("the out-projection's bias has {} values, not {}", bo.values.size(), D));
      b_out = bo.values;
    }
    // The layers.
    const std::string base = module_path(sm);
    const auto named = [&](const onnx::NodeProto& n, const std::string& part) {
      onnx::NodeProto m = n;
      m.set_name(base + "." + part);
      return m;
    };
    const auto projection = [&](std::size_t part, std::size_t h, const char* what) {
      FloatLayer l;
      l.kind = LayerKind::Conv2d;
      l.inputs = {x.tensor};
      l.weight_shape = {1, 1, D, dh};
      l.weights.resize(D * dh);
      const std::size_t col = part * D + h * dh;
      for (std::size_t r = 0; r < D; ++r)
        for (std::size_t j = 0; j < dh; ++j) l.weights[r * dh + j] = static_cast<float>(w_in.values[r * 3 * D + col + j]);
      l.bias.resize(dh);
      for (std::size_t j = 0; j < dh; ++j) l.bias[j] = static_cast<float>(b_in[col + j]);
      return add_value(named(mm, fmt::format("h{}.{}", h, what)), std::move(l)).tensor;
    };
    std::vector<std::size_t> heads;
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t qt = projection(0, h, "q"), kt = projection(1, h, "k"), vt = projection(2, h, "v");
      FloatLayer s;
      s.kind = LayerKind::MatMul;
      s.inputs = {qt, kt};
      s.transpose_b = true;
      s.alpha = alpha;
      const std::size_t st = add_value(named(*qk, fmt::format("h{}.qk", h)), std::move(s)).tensor;
      FloatLayer p;
      p.kind = LayerKind::Softmax;
      p.inputs = {st};
      const std::size_t pt = add_value(named(sm, fmt::format("h{}.softmax", h)), std::move(p)).tensor;
      FloatLayer o;
      o.kind = LayerKind::MatMul;
      o.inputs = {pt, vt};
      heads.push_back(add_value(named(pv, fmt::format("h{}.pv", h)), std::move(o)).tensor);
    }
    std::size_t joined = heads[0];
    if (H > 1) {
      FloatLayer cat;
      cat.kind = LayerKind::Concat;
      cat.inputs = heads;
      joined = add_value(named(back, "concat"), std::move(cat)).tensor;
    }
    FloatLayer o;
    o.kind = LayerKind::Conv2d;
    o.inputs = {joined};
    o.weight_shape = {1, 1, D, D};
    o.weights.resize(D * D);
    for (std::size_t r = 0; r < D; ++r)
      for (std::size_t j = 0; j < D; ++j) o.weights[r * D + j] = static_cast<float>(w_out.values[j * D + r]);
    o.bias.assign(b_out.begin(), b_out.end());
    Value y = add_value(named(out, "out"), std::move(o));
    y.tokens = true;
    bind(last.output(0), y);
  };
  return true;
}

// ---- Constant tokens and positions (docs/quantization.md, "Constant tokens and positions") ----
//
// ViT's class token, torch.onnx.export's Concat (axis 1) of a constant (N, k,
// D) (the learned (1, k, D) Expanded to the batch: every sample's the same)
// in front of the tokens, is a token_bias layer whose bias is those k tokens
// and zeros; its positional embedding, an Add of a constant (1, L, D) to the
// tokens, folds into that layer's bias when it alone reads it, and is a
// token_bias layer of its own (k = 0) otherwise.
bool Importer::token_constants(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "Concat") {
    only_attrs(n, {"axis"});
    if (n.input_size() != 2 || !is_const(n.input(0)) || !values_.count(n.input(1)))
      fail(n, "concatenates a token sequence: only constant tokens in front of it (Concat(constant, tokens) on axis 1, "
              "ViT's class token) are supported");
    const Value x = need_value(n, 1);
    const Shape s = shape(x);
    const std::size_t d = s.back();
    const std::int64_t axis = attr_int(n, "axis", 0);
    if (axis != 1 && axis != -2) fail(n, fmt::format("concatenates the tokens on axis {}: only on axis 1", axis));
    const Const& c = consts_.at(n.input(0));
    if (c.dims.size() != 3 || c.dims[0] < 1 || c.dims[1] < 1 || c.dims[2] != static_cast<std::int64_t>(d))
      fail(n, fmt::format("the constant tokens are [{}], not (N, k, {})", fmt::join(c.dims, ", "), d));
    const auto k = static_cast<std::size_t>(c.dims[1]);
    for (std::size_t i = k * d; i < c.values.size(); ++i)
      if (c.values[i] != c.values[i % (k * d)])
        fail(n, "the constant tokens differ between samples: only one set for every sample (an Expand) is supported");
    FloatLayer l;
    l.kind = LayerKind::TokenBias;
    l.inputs = {x.tensor};
    l.prefix_tokens = static_cast<unsigned>(k);
    l.bias.assign((k + s[0] * s[1]) * d, 0.0f);
    for (std::size_t i = 0; i < k * d; ++i) l.bias[i] = static_cast<float>(c.values[i]);
    Value y = add_value(n, std::move(l));
    y.tokens = true;
    set_output(n, y);
    return true;
  }
  // Add of a constant (1, L, D) or (L, D).
  const int ci = is_const(n.input(0)) ? 0 : 1;
  const Value x = need_value(n, 1 - ci);
  const Shape s = shape(x);
  const std::size_t tokens = s[0] * s[1], d = s[2];
  const Const& c = consts_.at(n.input(ci));
  if (c.values.size() != tokens * d || c.dims.size() < 2 || c.dims[c.dims.size() - 2] != static_cast<std::int64_t>(tokens))
    fail(n, fmt::format("adds a constant of shape [{}] to {} tokens of {}: only one value per feature, or per token "
                        "and feature (1, {}, {}), is supported", fmt::join(c.dims, ", "), tokens, d, tokens, d));
  FloatLayer* prev = x.tensor > 0 && x.perm.empty() && read_once(x.tensor) ? &net_.layers[x.tensor - 1] : nullptr;
  if (prev && prev->kind == LayerKind::TokenBias) {
    for (std::size_t i = 0; i < tokens * d; ++i) prev->bias[i] = static_cast<float>(prev->bias[i] + c.values[i]);
    set_output(n, x);
    return true;
  }
  FloatLayer l;
  l.kind = LayerKind::TokenBias;
  l.inputs = {x.tensor};
  l.bias.assign(c.values.begin(), c.values.end());
  Value y = add_value(n, std::move(l));
  y.tokens = true;
  set_output(n, y);
  return true;
}

}  // namespace tpu::onnximport::detail
