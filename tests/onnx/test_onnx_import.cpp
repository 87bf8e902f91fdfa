// The ONNX importer's folding and layout rules against values worked out by
// hand: batch normalization into the conv before it, constant Pad into the
// next conv or pool, conv weights OIHW -> HWIO, a flattened map's features
// from the model's (c, h, w) order to tpu-sim's (h, w, c); the quantizer's
// rounding; QDQ models' scales, zero points and per-channel weights. Models
// are built here with the ONNX protobuf API.
#include <onnx/onnx_pb.h>  // first: see src/onnx/onnx_import.cpp

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "onnx/float_exec.h"
#include "onnx/onnx_import.h"
#include "onnx/quantize_float.h"

namespace {

using tpu::onnximport::FloatNet;

void add_float(onnx::GraphProto& g, const std::string& name, std::vector<std::int64_t> dims,
               const std::vector<float>& values) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (std::int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
}

void add_int64(onnx::GraphProto& g, const std::string& name, const std::vector<std::int64_t>& values) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<std::int64_t>(values.size()));
  for (std::int64_t v : values) t->add_int64_data(v);
}

onnx::NodeProto* add_node(onnx::GraphProto& g, const std::string& op, const std::string& name,
                          std::vector<std::string> in, const std::string& out) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

void add_ints(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (std::int64_t x : v) a->add_ints(x);
}

void set_io(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::int64_t>& dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (std::int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

// A model of opset 13 with input x of `in` and output y of `out` (N, ...).
onnx::ModelProto model(const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& out) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("t");
  set_io(g->add_input(), "x", in);
  set_io(g->add_output(), "y", out);
  return m;
}

FloatNet import(const onnx::ModelProto& m) { return tpu::onnximport::import_onnx_model(m, "m.onnx"); }

std::string import_error(const onnx::ModelProto& m) {
  try {
    import(m);
  } catch (const tpu::FileError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("batch normalization folds into the conv before it", "[onnx]") {
  // Conv 1x1, 1 -> 2 channels, w = [2, -1], b = [0.5, 1]; BN with
  // var + eps = [4, 1]: a = scale / sqrt(var + eps) = [1 / 2, 2 / 1] = [0.5, 2];
  // w' = w * a = [1, -2]; b' = (b - mean) * a + beta = (0.5 - 1.5) * 0.5 + 0.1 = -0.4
  // and (1 - 0) * 2 - 0.2 = 1.8.
  onnx::ModelProto m = model({1, 1, 2, 2}, {1, 2, 2, 2});
  onnx::GraphProto& g = *m.mutable_graph();
  add_float(g, "w", {2, 1, 1, 1}, {2.0f, -1.0f});
  add_float(g, "b", {2}, {0.5f, 1.0f});
  add_float(g, "scale", {2}, {1.0f, 2.0f});
  add_float(g, "beta", {2}, {0.1f, -0.2f});
  add_float(g, "mean", {2}, {1.5f, 0.0f});
  add_float(g, "var", {2}, {3.25f, 0.25f});
  add_node(g, "Conv", "conv", {"x", "w", "b"}, "c");
  onnx::NodeProto* bn = add_node(g, "BatchNormalization", "bn", {"c", "scale", "beta", "mean", "var"}, "y");
  onnx::AttributeProto* eps = bn->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(0.75f);
  const FloatNet net = import(m);
  REQUIRE(net.layers.size() == 1);
  const auto& l = net.layers[0];
  CHECK(l.weight_shape == std::vector<std::size_t>{1, 1, 1, 2});
  REQUIRE(l.weights.size() == 2);
  CHECK(l.weights[0] == Approx(1.0f));
  CHECK(l.weights[1] == Approx(-2.0f));
  REQUIRE(l.bias.size() == 2);
  CHECK(l.bias[0] == Approx(-0.4f));
  CHECK(l.bias[1] == Approx(1.8f));
  // x = 3 at one pixel: y = [1 * 3 - 0.4, -2 * 3 + 1.8] = [2.6, -4.2].
  const auto run = tpu::onnximport::run_float(net, {3.0f, 0.0f, 0.0f, 0.0f}, 1);
  CHECK(run.output[0] == Approx(2.6f));
  CHECK(run.output[1] == Approx(-4.2f));
  CHECK(run.output[2] == Approx(-0.4f));
}

TEST_CASE("conv weights go from OIHW to HWIO", "[onnx]") {
  // W[o][i][y][x] = 1000 o + 100 i + 10 y + x, 2 outputs, 3 inputs, 2 x 2.
  onnx::ModelProto m = model({1, 3, 4, 4}, {1, 2, 3, 3});
  onnx::GraphProto& g = *m.mutable_graph();
  std::vector<float> w;
  for (int o = 0; o < 2; ++o)
    for (int i = 0; i < 3; ++i)
      for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x) w.push_back(static_cast<float>(1000 * o + 100 * i + 10 * y + x));
  add_float(g, "w", {2, 3, 2, 2}, w);
  add_node(g, "Conv", "conv", {"x", "w"}, "y");
  const FloatNet net = import(m);
  const auto& l = net.layers.at(0);
  REQUIRE(l.weight_shape == std::vector<std::size_t>{2, 2, 3, 2});
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 2; ++x)
      for (int i = 0; i < 3; ++i)
        for (int o = 0; o < 2; ++o)
          CHECK(l.weights[static_cast<std::size_t>(((y * 2 + x) * 3 + i) * 2 + o)] ==
                static_cast<float>(1000 * o + 100 * i + 10 * y + x));
  CHECK(net.input_shape == std::vector<std::size_t>{4, 4, 3});
  CHECK(net.model_output_shape == std::vector<std::size_t>{2, 3, 3});
}

TEST_CASE("a constant Pad folds into the next conv's padding", "[onnx]") {
  // Pad pads (n, c, h, w begin; n, c, h, w end) = (0, 0, 1, 2; 0, 0, 3, 0), then a
  // 3x3 conv with its own pads (top, left, bottom, right) = (1, 1, 1, 1):
  // top 1 + 1 = 2, left 2 + 1 = 3, bottom 3 + 1 = 4, right 0 + 1 = 1;
  // output (4 + 2 + 4 - 3) + 1 = 8 rows, (4 + 3 + 1 - 3) + 1 = 6 columns.
  onnx::ModelProto m = model({1, 1, 4, 4}, {1, 1, 8, 6});
  onnx::GraphProto& g = *m.mutable_graph();
  add_int64(g, "pads", {0, 0, 1, 2, 0, 0, 3, 0});
  add_float(g, "w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  add_node(g, "Pad", "pad", {"x", "pads"}, "p");
  add_ints(add_node(g, "Conv", "conv", {"p", "w"}, "y"), "pads", {1, 1, 1, 1});
  const FloatNet net = import(m);
  REQUIRE(net.layers.size() == 1);
  const auto& l = net.layers[0];
  CHECK(l.pad_top == 2);
  CHECK(l.pad_left == 3);
  CHECK(l.pad_bottom == 4);
  CHECK(l.pad_right == 1);
  // All ones in, a 3x3 sum of ones: the top-left output's window holds only
  // padding (rows -2..0 hold one input row: row 0; columns -3..-1 none) = 0;
  // output (2, 3) covers rows 0..2, columns 0..2: 9.
  const auto run = tpu::onnximport::run_float(net, std::vector<float>(16, 1.0f), 1);
  REQUIRE(run.output_shape == std::vector<std::size_t>{8, 6, 1});
  CHECK(run.output[0] == 0.0f);
  CHECK(run.output[2 * 6 + 3] == 9.0f);
}

TEST_CASE("a Pad before pooling folds only where it means the same", "[onnx]") {
  // Average pool 3x3 stride 1 after a Pad of 1 on every side: padding 1, the
  // padded zeros counted in the average (as the TPU counts padded positions).
  onnx::ModelProto m = model({1, 1, 3, 3}, {1, 1, 3, 3});
  onnx::GraphProto& g = *m.mutable_graph();
  add_int64(g, "pads", {0, 0, 1, 1, 0, 0, 1, 1});
  add_node(g, "Pad", "pad", {"x", "pads"}, "p");
  add_ints(add_node(g, "AveragePool", "avg", {"p"}, "y"), "kernel_shape", {3, 3});
  const FloatNet net = import(m);
  REQUIRE(net.layers.size() == 1);
  CHECK(net.layers[0].pad_top == 1);
  CHECK(net.layers[0].pad_right == 1);
  // Ones: a corner averages 4 ones over 9 positions.
  const auto run = tpu::onnximport::run_float(net, std::vector<float>(9, 1.0f), 1);
  CHECK(run.output[0] == Approx(4.0f / 9.0f));
  CHECK(run.output[4] == Approx(1.0f));

  // A max after zero padding differs from the TPU's (padding never wins)
  // where the map may be negative: refused.
  onnx::ModelProto mx = model({1, 1, 3, 3}, {1, 1, 3, 3});
  onnx::GraphProto& gx = *mx.mutable_graph();
  add_int64(gx, "pads", {0, 0, 1, 1, 0, 0, 1, 1});
  add_node(gx, "Pad", "pad", {"x", "pads"}, "p");
  add_ints(add_node(gx, "MaxPool", "max", {"p"}, "y"), "kernel_shape", {3, 3});
  CHECK(import_error(mx) ==
        "m.onnx: node 'max' (MaxPool): reads Pad 'pad' on a map that may be negative: zero padding before a "
        "max is not supported there");

  // Reflection padding is refused.
  onnx::ModelProto mr = model({1, 1, 3, 3}, {1, 1, 3, 3});
  onnx::GraphProto& gr = *mr.mutable_graph();
  add_int64(gr, "pads", {0, 0, 1, 1, 0, 0, 1, 1});
  onnx::NodeProto* pad = add_node(gr, "Pad", "pad", {"x", "pads"}, "p");
  onnx::AttributeProto* mode = pad->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("reflect");
  add_ints(add_node(gr, "AveragePool", "avg", {"p"}, "y"), "kernel_shape", {3, 3});
  CHECK(import_error(mr) == "m.onnx: node 'pad' (Pad): mode 'reflect' is not supported (only constant zero padding)");
}

TEST_CASE("an activation folds only into a layer that it alone reads", "[onnx]") {
  // c = Conv(x) is read by the Add and, renamed by an Identity, by the Relu:
  // fusing the Relu into the conv would change the Add's input too, so the
  // Relu is a standalone affine layer (alpha 1, beta 0, relu) on the vector unit.
  onnx::ModelProto m = model({1, 1, 2, 2}, {1, 1, 2, 2});
  onnx::GraphProto& g = *m.mutable_graph();
  add_float(g, "w", {1, 1, 1, 1}, {1.0f});
  add_node(g, "Conv", "conv", {"x", "w"}, "c");
  add_node(g, "Identity", "id", {"c"}, "i");
  add_node(g, "Relu", "relu", {"i"}, "r");
  add_node(g, "Add", "add", {"c", "r"}, "y");
  const FloatNet both = import(m);
  REQUIRE(both.layers.size() == 3);
  CHECK(both.layers[0].act == tpu::model::ActFunction::None);
  CHECK(both.layers[1].kind == tpu::compiler::LayerKind::Affine);
  CHECK(both.layers[1].act == tpu::model::ActFunction::Relu);
  CHECK((both.layers[1].alpha == 1.0 && both.layers[1].beta == 0.0 && !both.layers[1].unit_range));
  CHECK(both.layers[1].inputs == std::vector<std::size_t>{1});
  CHECK(both.layers[2].inputs == std::vector<std::size_t>{1, 2});
  // Without the Add's second read the same chain folds: one conv with ReLU.
  onnx::ModelProto ok = model({1, 1, 2, 2}, {1, 1, 2, 2});
  onnx::GraphProto& go = *ok.mutable_graph();
  add_float(go, "w", {1, 1, 1, 1}, {1.0f});
  add_node(go, "Conv", "conv", {"x", "w"}, "c");
  add_node(go, "Identity", "id", {"c"}, "i");
  add_node(go, "Relu", "relu", {"i"}, "y");
  const FloatNet net = import(ok);
  REQUIRE(net.layers.size() == 1);
  CHECK(net.layers[0].act == tpu::model::ActFunction::Relu);
}

TEST_CASE("a dense layer after a flatten reads the map in tpu-sim's order", "[onnx]") {
  // x (1, 2, 1, 2) -> Flatten -> Gemm with B (1 x 4, transB) = [1, 10, 100, 1000] over
  // the model's order (c0 w0, c0 w1, c1 w0, c1 w1); tpu-sim flattens (w, c):
  // (w0 c0, w0 c1, w1 c0, w1 c1), so its rows are [1, 100, 10, 1000].
  onnx::ModelProto m = model({1, 2, 1, 2}, {1, 1});
  onnx::GraphProto& g = *m.mutable_graph();
  add_float(g, "fc", {1, 4}, {1.0f, 10.0f, 100.0f, 1000.0f});
  add_node(g, "Flatten", "flat", {"x"}, "f");
  onnx::NodeProto* gemm = add_node(g, "Gemm", "fc", {"f", "fc"}, "y");
  onnx::AttributeProto* t = gemm->add_attribute();
  t->set_name("transB");
  t->set_type(onnx::AttributeProto::INT);
  t->set_i(1);
  const FloatNet net = import(m);
  REQUIRE(net.layers.size() == 2);
  CHECK(net.layers[1].weights == std::vector<float>{1.0f, 100.0f, 10.0f, 1000.0f});
  // NCHW x: c0 = [1, 2], c1 = [3, 4] -> 1 + 20 + 300 + 4000; NHWC: [1, 3, 2, 4].
  const auto run = tpu::onnximport::run_float(net, {1.0f, 3.0f, 2.0f, 4.0f}, 1);
  CHECK(run.output.at(0) == 4321.0f);
}

TEST_CASE("the quantizer follows docs/quantization.md", "[onnx]") {
  // Range [-1, 3]: scale 4 / 255, zero point round(-128 + 1 / (4 / 255)) = round(-64.25) = -64.
  const auto q = tpu::onnximport::activation_quant(-1.0, 3.0);
  CHECK(q.scale == 4.0 / 255.0);
  CHECK(q.zero_point == -64);
  // A ReLU range [0, 6]: zero point -128.
  CHECK(tpu::onnximport::activation_quant(0.0, 6.0).zero_point == -128);
  // Weights of max 254: scale 2; halves round to even: 5 / 2 = 2.5 -> 2, 7 / 2 = 3.5 -> 4,
  // -1 / 2 = -0.5 -> 0.
  double s = 0.0;
  const auto w = tpu::onnximport::quantize_weights({254.0f, -254.0f, 5.0f, 7.0f, -1.0f}, s);
  CHECK(s == 2.0);
  CHECK(w == std::vector<std::int8_t>{127, -127, 2, 4, 0});
}

namespace {

// A 1-D constant of ONNX type `type` (int8, uint8, int32 or float), raw data.
template <typename T>
void add_raw(onnx::GraphProto& g, const std::string& name, int type, std::vector<std::int64_t> dims,
             const std::vector<T>& values) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (std::int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

// x (N, 2) -> Q(0.5, uint8 130) -> DQ -> MatMul(DQ(w)) -> Q(2, int8 -3) -> DQ -> y.
onnx::ModelProto qdq_dense(const std::vector<std::uint8_t>& w_uint8, const std::vector<float>& w_scales) {
  onnx::ModelProto m = model({1, 2}, {1, 2});
  onnx::GraphProto& g = *m.mutable_graph();
  add_raw<float>(g, "sx", onnx::TensorProto::FLOAT, {}, {0.5f});
  add_raw<std::uint8_t>(g, "zx", onnx::TensorProto::UINT8, {}, {130});
  add_raw<std::uint8_t>(g, "w", onnx::TensorProto::UINT8, {2, 2}, w_uint8);
  const auto n = static_cast<std::int64_t>(w_scales.size());
  add_raw<float>(g, "sw", onnx::TensorProto::FLOAT, {n}, w_scales);
  add_raw<std::uint8_t>(g, "zw", onnx::TensorProto::UINT8, {n}, std::vector<std::uint8_t>(w_scales.size(), 128));
  add_raw<float>(g, "sy", onnx::TensorProto::FLOAT, {}, {2.0f});
  add_raw<std::int8_t>(g, "zy", onnx::TensorProto::INT8, {}, {-3});
  add_node(g, "QuantizeLinear", "qx", {"x", "sx", "zx"}, "xq");
  add_node(g, "DequantizeLinear", "dqx", {"xq", "sx", "zx"}, "xd");
  onnx::NodeProto* dqw = add_node(g, "DequantizeLinear", "dqw", {"w", "sw", "zw"}, "wd");
  onnx::AttributeProto* axis = dqw->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  add_node(g, "MatMul", "mm", {"xd", "wd"}, "h");
  add_node(g, "QuantizeLinear", "qy", {"h", "sy", "zy"}, "yq");
  add_node(g, "DequantizeLinear", "dqy", {"yq", "sy", "zy"}, "y");
  return m;
}

}  // namespace

TEST_CASE("a QDQ layer keeps the model's scales and zero points", "[onnx][qdq]") {
  // uint8 weights at zero point 128 are int8 at zero point 0; the uint8 input
  // zero point 130 is int8 2; the output keeps (2, -3) instead of int32.
  const FloatNet f = import(qdq_dense({131, 126, 129, 255}, {0.25f}));
  REQUIRE(f.qdq);
  CHECK(f.warnings.size() == 1);  // the rounding note
  const tpu::compiler::Network net = tpu::onnximport::quantize_float(f, {});
  CHECK(net.input.scale == 0.5);
  CHECK(net.input.zero_point == 2);
  REQUIRE(net.layers.size() == 1);
  const auto& l = net.layers[0];
  CHECK(l.weight_scale == 0.25);
  CHECK(l.weights == std::vector<std::int8_t>{3, -2, 1, 127});
  CHECK_FALSE(l.int32_output);
  CHECK(l.output.scale == 2.0);
  CHECK(l.output.zero_point == -3);
}

TEST_CASE("per-channel weight scales are re-quantized per tensor, with a warning", "[onnx][qdq]") {
  // int8 weights [[10, 100], [-25, 127]] (stored as uint8 + 128), column
  // scales [0.1, 0.03]: real [[1, 3], [-2.5, 3.81]]; max 3.81 gives one scale
  // 3.81 / 127 = 0.03, so the weights become [[33, 100], [-83, 127]]
  // (1 / 0.03 = 33.3, -2.5 / 0.03 = -83.3).
  const FloatNet f = import(qdq_dense({138, 228, 103, 255}, {0.1f, 0.03f}));
  REQUIRE(f.warnings.size() == 2);
  CHECK(f.warnings[0].find("m.onnx: node 'mm' (MatMul): per-channel weight scales (2 channels, 0.03 to 0.1) "
                           "re-quantized to one per-tensor scale 0.03") != std::string::npos);
  const tpu::compiler::Network net = tpu::onnximport::quantize_float(f, {});
  CHECK(std::fabs(net.layers[0].weight_scale - 0.03) < 1e-8);
  CHECK(net.layers[0].weights == std::vector<std::int8_t>{33, 100, -83, 127});
  // Scales that re-quantize exactly ([0.1, 0.02]: 0.1 is 5 steps of 0.02) need no warning.
  CHECK(import(qdq_dense({138, 228, 103, 255}, {0.1f, 0.02f})).warnings.size() == 1);
}

TEST_CASE("QDQ weights with a zero point are refused", "[onnx][qdq]") {
  onnx::ModelProto m = qdq_dense({131, 126, 129, 255}, {0.25f});
  auto* zw = m.mutable_graph()->mutable_initializer(4);
  REQUIRE(zw->name() == "zw");
  zw->set_raw_data(std::string(1, static_cast<char>(120)));
  CHECK(import_error(m) ==
        "m.onnx: node 'mm' (MatMul): the weights (DequantizeLinear 'dqw', UINT8) have zero point 120: not supported "
        "(tpu-sim's weights are symmetric, int8 with zero point 0 or uint8 with 128: the array has no weight zero "
        "point)");
}

// The first pass (onnx_validate.cpp) refuses what libonnx would trust. Each
// model is the 1x1 conv of the tests above with one thing changed.
static onnx::ModelProto conv_1x1() {
  onnx::ModelProto m = model({1, 1, 2, 2}, {1, 2, 2, 2});
  add_float(*m.mutable_graph(), "w", {2, 1, 1, 1}, {2.0f, -1.0f});
  add_node(*m.mutable_graph(), "Conv", "conv", {"x", "w"}, "y");
  return m;
}

TEST_CASE("the first pass counts a tensor's elements with overflow checks", "[onnx]") {
  onnx::ModelProto ok = conv_1x1();
  CHECK(import(ok).layers.size() == 1);
  // 2^32 * 2^32 wraps to 0 in 64 bits, 3 * 2^31 * 2^31 to 2^62 * 3 mod 2^64 = 2^63 + 2^62.
  onnx::ModelProto m = conv_1x1();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  for (std::int64_t d : {std::int64_t{1} << 31, std::int64_t{1} << 31, std::int64_t{4}, std::int64_t{1}})
    w->add_dims(d);
  w->clear_float_data();
  CHECK(import_error(m) == "m.onnx: initializer 'w' has dimensions [2147483648, 2147483648, 4, 1] whose product is "
                           "past 2^64");
  w->set_dims(2, 3);  // 3 * 2^62 < 2^64: no overflow, but no data for them
  CHECK(import_error(m) == "m.onnx: initializer 'w' has 0 values for 13835058055282163712 elements");
  w->set_dims(0, std::int64_t{1} << 32);
  CHECK(import_error(m) == "m.onnx: initializer 'w' has a dimension of 4294967296, more than 4294967295");
  w->set_dims(0, -2);
  CHECK(import_error(m) == "m.onnx: initializer 'w' has a negative dimension -2");
}

TEST_CASE("the first pass checks raw data against the element count", "[onnx]") {
  onnx::ModelProto m = conv_1x1();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_raw_data(std::string(7, '\0'));
  CHECK(import_error(m) == "m.onnx: initializer 'w' has 7 bytes of data for 2 elements");
  // 2^62 + 1 = (2^31 + 2^16 + 1)(2^31 - 2^16 + 1) elements of 4 bytes wrap to 4 bytes in 64 bits.
  w->clear_dims();
  w->add_dims((std::int64_t{1} << 31) + (1 << 16) + 1);
  w->add_dims((std::int64_t{1} << 31) - (1 << 16) + 1);
  w->set_raw_data(std::string(4, '\0'));
  CHECK(import_error(m) == "m.onnx: initializer 'w' has 4 bytes of data for 4611686018427387905 elements");
}

TEST_CASE("the first pass bounds window attributes on every node", "[onnx]") {
  for (const char* name : {"strides", "dilations", "kernel_shape"})
    for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{65537}}) {
      onnx::ModelProto m = conv_1x1();
      add_ints(m.mutable_graph()->mutable_node(0), name, {1, bad});
      CHECK(import_error(m) == "m.onnx: node 'conv' (Conv): " + std::string(name) + " [1, " + std::to_string(bad) +
                                   "] are not supported (each 1 to 65536)");
    }
  onnx::ModelProto m = conv_1x1();
  add_ints(m.mutable_graph()->mutable_node(0), "pads", {0, 0, -1, 0});
  CHECK(import_error(m) == "m.onnx: node 'conv' (Conv): pads [0, 0, -1, 0] are not supported (each 0 to 65536)");
  onnx::ModelProto g = conv_1x1();
  onnx::AttributeProto* group = g.mutable_graph()->mutable_node(0)->add_attribute();
  group->set_name("group");
  group->set_type(onnx::AttributeProto::INT);
  group->set_i(0);
  CHECK(import_error(g) == "m.onnx: node 'conv' (Conv): group 0 is not supported (1 to 65536)");
}

TEST_CASE("the first pass refuses opsets the importer does not know", "[onnx]") {
  onnx::ModelProto m = conv_1x1();
  m.mutable_opset_import(0)->set_version(18);
  CHECK(import_error(m) == "m.onnx: opset 18 is not supported (tpu-sim imports opsets 1 to 17 of the ONNX domain)");
  m.mutable_opset_import(0)->set_version(17);
  CHECK(import(m).layers.size() == 1);
}

namespace {

tpu::onnximport::FloatLayer float_conv(std::size_t in, std::size_t cin, std::size_t cout, tpu::model::ActFunction act) {
  tpu::onnximport::FloatLayer l;
  l.kind = tpu::compiler::LayerKind::Conv2d;
  l.name = "conv";
  l.inputs = {in};
  l.weight_shape = {1, 1, cin, cout};
  l.weights.assign(cin * cout, 0.5f);
  l.act = act;
  return l;
}

tpu::onnximport::Range range(double lo, double hi) {
  tpu::onnximport::Range r;
  r.add(static_cast<float>(lo));
  r.add(static_cast<float>(hi));
  return r;
}

}  // namespace

TEST_CASE("a concat's inputs and output share one quantization when each can be chosen", "[onnx][concat]") {
  using tpu::compiler::LayerKind;
  using tpu::model::ActFunction;
  FloatNet f;
  f.input_shape = {2, 2, 3};
  f.layers.push_back(float_conv(0, 3, 2, ActFunction::Relu));  // t1: A
  f.layers.push_back(float_conv(0, 3, 2, ActFunction::None));  // t2: B
  tpu::onnximport::FloatLayer pool;
  pool.kind = LayerKind::MaxPool2d;
  pool.inputs = {2};
  f.layers.push_back(pool);  // t3: max-pool of B (keeps B's quantization)
  tpu::onnximport::FloatLayer cat;
  cat.kind = LayerKind::Concat;
  cat.inputs = {1, 3};
  f.layers.push_back(cat);  // t4
  f.layers.push_back(float_conv(4, 4, 2, ActFunction::None));  // t5: int32 logits
  const std::vector<tpu::onnximport::Range> ranges = {range(-1, 1), range(0, 2), range(-3, 1), range(-2, 1),
                                                      range(-2, 2), range(-10, 10)};
  SECTION("A, B, the pool and the concat: the range over them, [-3, 2]") {
    const tpu::compiler::Network net = tpu::onnximport::quantize_float(f, ranges);
    // scale 5 / 255, zero point round(-128 + 3 / (5 / 255)) = round(-128 + 153) = 25.
    const auto q = tpu::onnximport::activation_quant(-3.0, 2.0);
    CHECK(q.zero_point == 25);
    for (std::size_t i : {0u, 1u, 3u}) {
      INFO("layer " << i);
      CHECK(net.layers[i].output.scale == q.scale);
      CHECK(net.layers[i].output.zero_point == q.zero_point);
    }
    CHECK(net.layers[4].int32_output);
    CHECK_NOTHROW(tpu::compiler::infer_network(net));
  }
  SECTION("a concat of the network input: each tensor keeps its own range") {
    f.layers[3].inputs = {0, 1, 3};
    const tpu::compiler::Network net = tpu::onnximport::quantize_float(f, ranges);
    const auto a = tpu::onnximport::activation_quant(0.0, 2.0);
    const auto c = tpu::onnximport::activation_quant(-2.0, 2.0);
    CHECK(net.layers[0].output.scale == a.scale);
    CHECK(net.layers[0].output.zero_point == -128);
    CHECK(net.layers[3].output.scale == c.scale);
    CHECK(net.layers[3].output.zero_point == c.zero_point);
  }
}
