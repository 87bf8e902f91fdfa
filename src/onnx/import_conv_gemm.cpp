// The matrix unit's layers (importer.h): Conv -> conv2d (grouped as
// depthwise or block-diagonal dense weights; 1-D as H = 1), Gemm and MatMul
// -> dense. Reads the weights and bias as constants (a QDQ model's through
// qdq_weights) and writes them in tpu-sim's layout: conv weights (O, I, KH,
// KW) as HWIO, dense weights K x N with the rows of a flattened map permuted
// to tpu-sim's (h, w, c) order.
#include "onnx/importer.h"

namespace tpu::onnximport::detail {

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
  set_output(n, add_value(n, std::move(l)));
}

void Importer::gemm(const onnx::NodeProto& n) {
  const bool matmul = n.op_type() == "MatMul";
  if (matmul) only_attrs(n, {});
  else only_attrs(n, {"alpha", "beta", "transA", "transB"});
  Value x = need_input(n, 0);
  // One token x[:, t] of a sequence (import_transformer.cpp): its D features.
  const Shape in = x.token >= 0 ? Shape{shape(x).back()} : shape(x);  // a copy: add_layer grows shapes_
  // A token sequence (N, L, D) by a constant (D, Dout): a Linear on every
  // token, a 1x1 conv2d of its 1 x L x D map (import_transformer.cpp).
  const bool tokens = matmul && x.tokens && in.size() == 3;
  if (in.size() != 1 && !tokens)
    fail(n, x.tokens ? "multiplies a token sequence: only MatMul by a constant (D, Dout) matrix is supported"
                     : "needs a 2-D (N, features) input: flatten the map first");
  const std::size_t k_in = tokens ? in[2] : in[0];
  // A LayerNorm's affine read only by this Linear folds into it: W' = gamma W, b' = b + beta W (ln_beta).
  std::vector<double> gamma, ln_beta;
  if (tokens && !qdq_) take_ln_affine(x, gamma, ln_beta);
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
  if (K != k_in) fail(n, fmt::format("weights for {} inputs on {}", K, k_in));
  FloatLayer l;
  l.kind = LayerKind::Dense;
  l.inputs = {x.tensor};
  l.pixel = x.token;
  l.weight_scale = weight_scale;
  l.weight_shape = {K, N};
  l.weights.resize(K * N);
  for (std::size_t k = 0; k < K; ++k) {
    // Row k of the model's input is row perm[k] of tpu-sim's.
    const std::size_t row = x.perm.empty() ? k : x.perm[k];
    for (std::size_t j = 0; j < N; ++j)
      l.weights[row * N + j] = static_cast<float>(alpha * b.values[trans_b ? j * K + k : k * N + j] *
                                                  (gamma.empty() ? 1.0 : gamma[k]));
  }
  if (!matmul && n.input_size() > 2 && !n.input(2).empty()) {
    const Const& c = need_const(n, 2, "the bias (C)");
    if (c.values.size() != N && c.values.size() != 1)
      fail(n, fmt::format("a bias C of {} values for {} outputs is not supported", c.values.size(), N));
    for (std::size_t j = 0; j < N; ++j)
      l.bias.push_back(static_cast<float>(beta * c.values[c.values.size() == 1 ? 0 : j]));
  }
  if (!ln_beta.empty()) {
    if (l.bias.empty()) l.bias.assign(N, 0.0f);
    for (std::size_t j = 0; j < N; ++j) {
      double add = 0.0;
      for (std::size_t k = 0; k < K; ++k) add += ln_beta[k] * alpha * b.values[trans_b ? j * K + k : k * N + j];
      l.bias[j] = static_cast<float>(l.bias[j] + add);
    }
  }
  if (tokens) {  // K x N is the HWIO weights of a 1x1 conv2d
    l.kind = LayerKind::Conv2d;
    l.weight_shape = {1, 1, K, N};
  }
  Value y = add_value(n, std::move(l));
  y.tokens = tokens;
  set_output(n, y);
}

}  // namespace tpu::onnximport::detail
