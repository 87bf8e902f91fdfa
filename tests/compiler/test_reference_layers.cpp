// The independent int8 reference (compiler/layer_reference.h) on the CNN
// layers and the graph form, against values worked out by hand from the
// integer semantics (docs/quantization.md, the CNN spec): depthwise conv2d,
// max-pool with padding, average pooling (count_include_pad, ties rounded up),
// global average pooling, add (its input factors d_a, d_b, the clamp of d_lo,
// relu) and a diamond graph. Tensors are tiny (3x3x2 maps, 8-feature
// vectors), so every expected value is either written out (with the sum it
// comes from in a comment) or computed here by a plain loop from the spec
// with requantization parameters derived by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "compiler/layer_reference.h"
#include "compiler/network.h"

namespace {

using namespace tpu;
using compiler::Layer;
using compiler::LayerKind;
using compiler::Network;
using compiler::QuantParams;
using compiler::Tensor;
using model::ActFunction;

Tensor make_tensor(std::vector<std::size_t> shape, std::vector<std::int32_t> data) {
  Tensor t;
  t.shape = std::move(shape);
  t.data = std::move(data);
  return t;
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int32_t sat8(std::int64_t v) { return static_cast<std::int32_t>(std::clamp<std::int64_t>(v, -128, 127)); }

// q(a) for a multiplier m = 2^-k exactly: M = 2^30, S = 30 + k, so
// ((a * 2^30 + 2^(29 + k)) >> (30 + k)) = floor((a + 2^(k-1)) / 2^k).
std::int32_t q_pow2(std::int64_t a, unsigned k, std::int32_t z) {
  const std::int64_t d = std::int64_t{1} << k;
  return sat8(floor_div(a + (k == 0 ? 0 : d / 2), d) + z);
}

// q(a) = sat8(((a * M + 2^(S-1)) >> S) + Z) with M and S given.
std::int32_t q_ms(std::int64_t a, std::int64_t m, unsigned s, std::int32_t z) {
  const __int128 p = static_cast<__int128>(a) * m + (static_cast<__int128>(1) << (s - 1));
  __int128 d = static_cast<__int128>(1) << s;
  __int128 q = p / d;
  if (p % d != 0 && p < 0) --q;
  return sat8(static_cast<std::int64_t>(q) + z);
}

Network map_net(std::vector<std::size_t> shape, QuantParams in) {
  Network net;
  net.name = "t";
  net.input_shape = std::move(shape);
  net.input = in;
  return net;
}

// The 3x3x2 map used by the pooling tests, (h, w, c) row-major.
Layer pool_layer(LayerKind kind, unsigned k, unsigned stride, unsigned pt, unsigned pb, unsigned pl,
                 unsigned pr) {
  Layer l;
  l.kind = kind;
  l.name = "pool";
  l.kernel_h = l.kernel_w = k;
  l.stride_h = l.stride_w = stride;
  l.pad_top = pt;
  l.pad_bottom = pb;
  l.pad_left = pl;
  l.pad_right = pr;
  return l;
}

}  // namespace

TEST_CASE("reference: depthwise conv2d with padding and stride 2", "[reference][depthwise]") {
  // x (3x3x2) at (0.5, z = 3); weights 3x3x1x2 at 0.25; output (0.25, -2):
  // m = 0.5 * 0.25 / 0.25 = 0.5, q(a) = floor((a + 1) / 2) - 2.
  Network net = map_net({3, 3, 2}, {0.5, 3});
  Layer l;
  l.kind = LayerKind::Conv2d;
  l.name = "dw";
  l.weight_shape = {3, 3, 1, 2};
  l.weights = {1, -1, 2, 0, -1, 3,    // dy = 0: (dx, c)
               0, 2,  3, 1, 1,  -2,   // dy = 1
               -2, 1, 1, 1, 2,  -1};  // dy = 2
  l.bias = {5, -7};
  l.weight_scale = 0.25;
  l.output = {0.25, -2};
  l.kernel_h = l.kernel_w = 3;
  l.stride_h = l.stride_w = 2;
  l.pad_top = l.pad_bottom = l.pad_left = l.pad_right = 1;
  l.groups = 2;
  net.layers.push_back(l);
  const Tensor x = make_tensor({1, 3, 3, 2}, {10, -5, 20, 7,   -30, 0,  //
                                              4,  12, -8, 3,   6,   -9,  //
                                              0,  1,  15, -20, 9,   5});
  const Tensor y = compiler::reference_network(net, x);
  CHECK(y.shape == std::vector<std::size_t>{1, 2, 2, 2});
  CHECK_FALSE(y.int32);
  // Output (0, 0), channel 0: the window's inside positions are x(0..1, 0..1)
  // against w(1..2, 1..2): 5 + 7*3 + 17*1 + 1*1 + (-11)*2 = 22 -> 11 - 2 = 9.
  // Channel 1 only reads channel 1: -7 + (-8)*1 + 4*(-2) + 9*1 + 0*(-1) = -14 -> -7 - 2 = -9.
  CHECK(y.data == std::vector<std::int32_t>{9, -9, -36, -9, 9, 17, 7, -27});

  SECTION("int32 output: the raw accumulators") {
    net.layers[0].int32_output = true;
    const Tensor acc = compiler::reference_network(net, x);
    CHECK(acc.int32);
    CHECK(acc.data[0] == 22);
    CHECK(acc.data[1] == -14);
  }
}

TEST_CASE("reference: maxpool2d with padding, corner windows", "[reference][maxpool]") {
  // All values below the zero point 5: a padded position taken as z_in (or 0)
  // would win every window that has one.
  Network net = map_net({3, 3, 2}, {0.5, 5});
  const Tensor x = make_tensor({1, 3, 3, 2}, {-100, -3,   -90,  -50, -80, -60,   //
                                              -70,  -128, -110, -40, -20, -127,  //
                                              -60,  -70,  -50,  -10, -120, -1});
  SECTION("top and left padding: window (0, 0) holds only x(0, 0)") {
    net.layers.push_back(pool_layer(LayerKind::MaxPool2d, 2, 2, 1, 0, 1, 0));
    const Tensor y = compiler::reference_network(net, x);
    CHECK(y.shape == std::vector<std::size_t>{1, 2, 2, 2});
    // (0,0): x(0,0); (0,1): x(0,1..2); (1,0): x(1..2,0); (1,1): x(1..2,1..2).
    CHECK(y.data == std::vector<std::int32_t>{-100, -3, -80, -50, -60, -70, -20, -1});
  }
  SECTION("bottom and right padding: window (1, 1) holds only x(2, 2)") {
    net.layers.push_back(pool_layer(LayerKind::MaxPool2d, 2, 2, 0, 1, 0, 1));
    const Tensor y = compiler::reference_network(net, x);
    CHECK(y.shape == std::vector<std::size_t>{1, 2, 2, 2});
    CHECK(y.data == std::vector<std::int32_t>{-70, -3, -20, -60, -50, -10, -120, -1});
  }
  SECTION("3x3 same padding, stride 1: every border window is partly padding") {
    net.layers.push_back(pool_layer(LayerKind::MaxPool2d, 3, 1, 1, 1, 1, 1));
    const Tensor y = compiler::reference_network(net, x);
    REQUIRE(y.shape == std::vector<std::size_t>{1, 3, 3, 2});
    // Corner (0, 0): x(0..1, 0..1); centre: the whole map; corner (2, 2): x(1..2, 1..2).
    CHECK(y.data[0] == -70);
    CHECK(y.data[1] == -3);
    CHECK(y.data[(1 * 3 + 1) * 2 + 0] == -20);
    CHECK(y.data[(1 * 3 + 1) * 2 + 1] == -1);
    CHECK(y.data[(2 * 3 + 2) * 2 + 0] == -20);
    CHECK(y.data[(2 * 3 + 2) * 2 + 1] == -1);
    // Corner (0, 2): x(0..1, 1..2).
    CHECK(y.data[(0 * 3 + 2) * 2 + 0] == -20);
    CHECK(y.data[(0 * 3 + 2) * 2 + 1] == -40);
  }
}

TEST_CASE("reference: avgpool2d counts padding and rounds ties up", "[reference][avgpool]") {
  // 2x2 windows, stride 2, padding top 1 and left 1, on a 3x3x2 map at (0.5, 10):
  // K = 4 for every window (count_include_pad). Window sums a of (x - 10):
  //   (0,0): x(0,0)            ch0: 2      ch1: -2
  //   (0,1): x(0,1..2)         ch0: 6      ch1: -6
  //   (1,0): x(1..2,0)         ch0: 10     ch1: -19
  //   (1,1): x(1..2,1..2)      ch0: 70     ch1: -551
  Network net = map_net({3, 3, 2}, {0.5, 10});
  const Tensor x = make_tensor({1, 3, 3, 2}, {12, 8,    13, 5,    13,  9,     //
                                              15, 0,    20, -128, 30,  -128,  //
                                              15, 1,    -40, -128, 100, -127});
  Layer l = pool_layer(LayerKind::AvgPool2d, 2, 2, 1, 0, 1, 0);
  SECTION("output keeps the input's quantization: m = 1/4, Z = 10") {
    l.output_is_input = true;
    l.output = {3.0, -50};  // ignored
    net.layers.push_back(l);
    const Tensor y = compiler::reference_network(net, x);
    CHECK(y.shape == std::vector<std::size_t>{1, 2, 2, 2});
    // floor((a + 2) / 4) + 10: 2/4 -> 1 (not 0: ties go up, and not 2: K counts
    // the padding), -2/4 -> 0, 6/4 -> 2, -6/4 -> -1, 10/4 -> 3, -19/4 -> -5,
    // 70/4 -> 18, -551/4 -> -138 (saturates at -128).
    CHECK(y.data == std::vector<std::int32_t>{11, 10, 12, 9, 13, 5, 28, -128});
  }
  SECTION("own output quantization: m = 0.5 / (4 * 1.0) = 1/8, Z = -3") {
    l.output = {1.0, -3};
    net.layers.push_back(l);
    const Tensor y = compiler::reference_network(net, x);
    // floor((a + 4) / 8) - 3.
    CHECK(y.data == std::vector<std::int32_t>{-3, -3, -2, -4, -2, -5, 6, -72});
  }
  SECTION("3x3 same padding, stride 1, against a direct loop (K = 9, m = 4.5 / 9 = 0.5)") {
    net.input.scale = 4.5;
    l = pool_layer(LayerKind::AvgPool2d, 3, 1, 1, 1, 1, 1);
    l.output = {1.0, 7};
    net.layers.push_back(l);
    const Tensor y = compiler::reference_network(net, x);
    REQUIRE(y.shape == std::vector<std::size_t>{1, 3, 3, 2});
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        for (int c = 0; c < 2; ++c) {
          std::int64_t a = 0;
          for (int yy = i - 1; yy <= i + 1; ++yy)
            for (int xx = j - 1; xx <= j + 1; ++xx)
              if (yy >= 0 && yy < 3 && xx >= 0 && xx < 3) a += x.data[(yy * 3 + xx) * 2 + c] - 10;
          INFO("pixel " << i << "," << j << " channel " << c << " sum " << a);
          CHECK(y.data[(i * 3 + j) * 2 + c] == q_pow2(a, 1, 7));
        }
    // Corner (0, 0), channel 0: (12 + 13 + 15 + 20) - 40 = 20 -> 10 + 7.
    CHECK(y.data[0] == 17);
  }
}

TEST_CASE("reference: global_avgpool2d", "[reference][avgpool]") {
  // Batch 2 of 2x3x2 maps at (3.0, -4): K = 6.
  Network net = map_net({2, 3, 2}, {3.0, -4});
  Layer l;
  l.kind = LayerKind::GlobalAvgPool2d;
  l.name = "gap";
  const Tensor x = make_tensor({2, 2, 3, 2}, {1,   -10, 2,   -10, 3,   -10,  //
                                              4,   -10, 5,   -10, 6,   -9,   //
                                              127, -4,  127, -4,  127, -4,   //
                                              127, -4,  127, -4,  127, -3});
  // Sums of (x + 4): sample 0: 45, -35; sample 1: 786, 1.
  SECTION("own output: m = 3 / (6 * 1) = 0.5, Z = 7") {
    l.output = {1.0, 7};
    net.layers.push_back(l);
    const Tensor y = compiler::reference_network(net, x);
    CHECK(y.shape == std::vector<std::size_t>{2, 1, 1, 2});
    // floor((a + 1) / 2) + 7: 45 -> 23 + 7, -35 -> -17 + 7, 786 -> 393 + 7 (127), 1 -> 1 + 7.
    CHECK(y.data == std::vector<std::int32_t>{30, -10, 127, 8});
  }
  SECTION("output keeps the input's: m = 1/6, M = round(2/3 * 2^31) = 1431655765, S = 33") {
    l.output_is_input = true;
    net.layers.push_back(l);
    const Tensor y = compiler::reference_network(net, x);
    CHECK(y.shape == std::vector<std::size_t>{2, 1, 1, 2});
    // 45/6 = 7.5 but M < 2^33 / 6, so q(45) = 7 (a tie that rounds down), -4 -> 3.
    CHECK(y.data == std::vector<std::int32_t>{3, -10, 127, -4});
    CHECK(y.data[0] == q_ms(45, 1431655765, 33, -4));
  }
}

namespace {

// An add of the network input x (8 features, quantization qx) and a dense
// layer's output d (quantization qd) that permutes and negates x
// (d_o ~ -(x_(o-3) - z_x) + z_d). With `x_first` the add's inputs are (x, d),
// else (d, x).
struct AddCase {
  Network net;
  Tensor x;
};

AddCase add_case(QuantParams qx, QuantParams qd, QuantParams qo, ActFunction act, bool x_first) {
  AddCase c;
  c.net = map_net({8}, qx);
  Layer d;
  d.kind = LayerKind::Dense;
  d.name = "d";
  d.weight_shape = {8, 8};
  d.weights.assign(64, 0);
  for (std::size_t f = 0; f < 8; ++f) d.weights[f * 8 + (f + 3) % 8] = -1;
  d.weight_scale = qd.scale / qx.scale;  // m of about 1
  d.output = qd;
  d.inputs = {0};
  c.net.layers.push_back(d);
  Layer add;
  add.kind = LayerKind::Add;
  add.name = "add";
  add.output = qo;
  add.act = act;
  add.inputs = x_first ? std::vector<std::size_t>{0, 1} : std::vector<std::size_t>{1, 0};
  c.net.layers.push_back(add);
  c.x = make_tensor({2, 8}, {-128, -100, -57, -13, 0, 29, 88, 127,  //
                             120, -90, 45, -3, 64, -77, 101, 7});
  return c;
}

// Checks the add's output against acc = d_x (x - z_x) + d_d (d - z_d) and q.
template <typename Q>
void check_add(const AddCase& c, std::int64_t d_x, std::int64_t d_d, Q q) {
  const std::vector<Tensor> outs = compiler::reference_network_all(c.net, c.x);
  REQUIRE(outs.size() == 2);
  const Tensor& d = outs[0];
  const Tensor& y = outs[1];
  REQUIRE(y.shape == std::vector<std::size_t>{2, 8});
  const std::int32_t zx = c.net.input.zero_point, zd = c.net.layers[0].output.zero_point;
  // The dense layer really permutes: d is not x.
  CHECK(d.data[3] == std::clamp(-(c.x.data[0] - zx) + zd, -128, 127));
  for (std::size_t e = 0; e < 16; ++e) {
    const std::int64_t acc = d_x * (c.x.data[e] - zx) + d_d * (d.data[e] - zd);
    INFO("element " << e << ": x " << c.x.data[e] << ", d " << d.data[e] << ", acc " << acc);
    CHECK(y.data[e] == q(acc));
  }
}

}  // namespace

TEST_CASE("reference: add with equal scales", "[reference][add]") {
  // s_a = s_b = 0.5: both factors 127; m = (0.5 / 127) / 1.0 = 1/254:
  // M = round(2^38 / 254 * ...) = round(2^37 / 127) = 1082196484, S = 38.
  const AddCase c = add_case({0.5, 3}, {0.5, -5}, {1.0, 1}, ActFunction::None, true);
  check_add(c, 127, 127, [](std::int64_t acc) { return q_ms(acc, 1082196484, 38, 1); });
}

TEST_CASE("reference: add with s_a < s_b and with s_a > s_b", "[reference][add]") {
  // x at 2.5, d at 127: d_lo = floor(127 * 2.5 / 127 + 0.5) = floor(3.0) = 3
  // (2.5 rounds up, not to even); m = (127 / 127) / 256 = 2^-8.
  SECTION("a = x (s 2.5), b = d (s 127): d_a = 3, d_b = 127") {
    const AddCase c = add_case({2.5, 0}, {127.0, 4}, {256.0, -6}, ActFunction::None, true);
    check_add(c, 3, 127, [](std::int64_t acc) { return q_pow2(acc, 8, -6); });
  }
  SECTION("a = d (s 127), b = x (s 2.5): d_a = 127, d_b = 3") {
    const AddCase c = add_case({2.5, 0}, {127.0, 4}, {256.0, -6}, ActFunction::None, false);
    check_add(c, 3, 127, [](std::int64_t acc) { return q_pow2(acc, 8, -6); });
  }
  SECTION("a = x (s 0.5), b = d (s 0.75): d_lo = floor(84.67 + 0.5) = 85") {
    // m = (0.75 / 127) / ((0.75 / 127) * 128) = 2^-7 exactly.
    const AddCase c = add_case({0.5, -2}, {0.75, 9}, {(0.75 / 127.0) * 128.0, 0},
                               ActFunction::None, true);
    check_add(c, 85, 127, [](std::int64_t acc) { return q_pow2(acc, 7, 0); });
  }
}

TEST_CASE("reference: add clamps d_lo to 1", "[reference][add]") {
  // s_lo / s_hi = 0.001: floor(0.127 + 0.5) = 0, clamped to 1; m = 2^-8.
  const AddCase c =
      add_case({0.001, 0}, {1.0, -3}, {(1.0 / 127.0) * 256.0, 2}, ActFunction::None, true);
  check_add(c, 1, 127, [](std::int64_t acc) { return q_pow2(acc, 8, 2); });
  // Element 0: x = -128, d = -(x(5) = 29) - 3 = -32: acc = 1 * -128 + 127 * -29 = -3811,
  // floor((-3811 + 128) / 256) + 2 = -15 + 2 (with d_lo = 0 it would be -14 + 2).
  const Tensor y = compiler::reference_network(c.net, c.x);
  CHECK(y.data[0] == -13);
}

TEST_CASE("reference: add with relu", "[reference][add]") {
  // s_a = 0.5, s_b = 0.75: d_a = 85, d_b = 127; m = 2^-7; Z = -20; relu: max(q, -20).
  const QuantParams qo{(0.75 / 127.0) * 128.0, -20};
  const AddCase c = add_case({0.5, -2}, {0.75, 9}, qo, ActFunction::Relu, true);
  check_add(c, 85, 127, [](std::int64_t acc) { return std::max(q_pow2(acc, 7, -20), -20); });
  // Some outputs are clamped by the relu, some are above it.
  const AddCase plain = add_case({0.5, -2}, {0.75, 9}, qo, ActFunction::None, true);
  const Tensor y = compiler::reference_network(plain.net, plain.x);
  CHECK(std::count_if(y.data.begin(), y.data.end(), [](std::int32_t v) { return v < -20; }) >= 3);
  CHECK(std::count_if(y.data.begin(), y.data.end(), [](std::int32_t v) { return v > -20; }) >= 3);
}

TEST_CASE("reference: a diamond graph reads tensors by id", "[reference][graph]") {
  // x (2x2x1 at (0.5, -1)) -> conv a (layer 0, inputs empty: the network input)
  //   -> conv b (layer 1, inputs {0}: x again, not a) -> add(a, b) (layer 2, inputs {1, 2}).
  Network net = map_net({2, 2, 1}, {0.5, -1});
  Layer a;
  a.kind = LayerKind::Conv2d;
  a.name = "a";
  a.weight_shape = {1, 1, 1, 2};
  a.weights = {2, -1};
  a.bias = {0, 3};
  a.weight_scale = 1.0;
  a.output = {0.5, 0};  // m = 1
  net.layers.push_back(a);
  Layer b = a;
  b.name = "b";
  b.weights = {1, 3};
  b.bias = {-2, 0};
  b.weight_scale = 0.5;
  b.output = {0.25, 2};  // m = 0.5 * 0.5 / 0.25 = 1
  b.inputs = {0};
  net.layers.push_back(b);
  Layer add;
  add.kind = LayerKind::Add;
  add.name = "add";
  add.inputs = {1, 2};
  // d_a = 127 (s 0.5), d_b = floor(127 * 0.25 / 0.5 + 0.5) = 64; m = 2^-4.
  add.output = {(0.5 / 127.0) * 16.0, 0};
  net.layers.push_back(add);

  // x - z = 4, 0, 1, 6.
  const Tensor x = make_tensor({1, 2, 2, 1}, {3, -1, 0, 5});
  const std::vector<Tensor> outs = compiler::reference_network_all(net, x);
  REQUIRE(outs.size() == 3);
  // a = (2 x', 3 - x').
  CHECK(outs[0].shape == std::vector<std::size_t>{1, 2, 2, 2});
  CHECK(outs[0].data == std::vector<std::int32_t>{8, -1, 0, 3, 2, 2, 12, -3});
  // b = (x' - 2, 3 x') + 2.
  CHECK(outs[1].shape == std::vector<std::size_t>{1, 2, 2, 2});
  CHECK(outs[1].data == std::vector<std::int32_t>{4, 14, 0, 2, 1, 5, 6, 20});
  // acc = 127 a + 64 (b - 2): 1144, 641, -128, 381, 190, 446, 1780, 771;
  // floor((acc + 8) / 16): 72, 40, -8 (-7.5 rounds up), 24, 12, 28, 111, 48.
  CHECK(outs[2].shape == std::vector<std::size_t>{1, 2, 2, 2});
  CHECK(outs[2].data == std::vector<std::int32_t>{72, 40, -8, 24, 12, 28, 111, 48});
  CHECK(compiler::reference_network(net, x).data == outs[2].data);

  SECTION("a chain (every inputs empty) still reads the previous tensor") {
    Network chain = map_net({2, 2, 1}, {0.5, -1});
    Layer c1 = a;
    chain.layers.push_back(c1);
    Layer pool = pool_layer(LayerKind::MaxPool2d, 2, 2, 0, 0, 0, 0);
    chain.layers.push_back(pool);
    Layer flat;
    flat.kind = LayerKind::Flatten;
    flat.name = "flat";
    chain.layers.push_back(flat);
    const std::vector<Tensor> c = compiler::reference_network_all(chain, x);
    REQUIRE(c.size() == 3);
    CHECK(c[1].data == std::vector<std::int32_t>{12, 3});  // max over a's pixels per channel
    CHECK(c[2].shape == std::vector<std::size_t>{1, 2});
    CHECK(c[2].data == std::vector<std::int32_t>{12, 3});
  }
}

TEST_CASE("reference: concat along channels requantizes each input", "[reference][concat]") {
  // x: a 2x2x2 map at (0.5, 3); p = avgpool 1x1 of x at (0.25, -4): m = 0.5 / 0.25 = 2 exactly,
  // p = sat8(2 * (x - 3) - 4). concat(x, p, x) at (1.0, 1): s_hi = 0.5, d_x = 127,
  // d_p = floor(127 * 0.25 / 0.5 + 0.5) = 64; m = (0.5 / 127) / 1.0 = 1/254: M = 1082196484, S = 38.
  Network net = map_net({2, 2, 2}, {0.5, 3});
  net.layers.push_back(pool_layer(LayerKind::AvgPool2d, 1, 1, 0, 0, 0, 0));
  net.layers[0].output = {0.25, -4};
  net.layers[0].output_is_input = false;
  Layer c;
  c.kind = LayerKind::Concat;
  c.name = "cat";
  c.inputs = {0, 1, 0};
  c.output = {1.0, 1};
  net.layers.push_back(c);
  const Tensor x = make_tensor({1, 2, 2, 2}, {-128, 127, 3, 4, 60, -61, 100, -7});
  const Tensor y = compiler::reference_network(net, x);
  REQUIRE(y.shape == std::vector<std::size_t>{1, 2, 2, 6});
  for (std::size_t px = 0; px < 4; ++px)
    for (std::size_t ch = 0; ch < 2; ++ch) {
      const std::int64_t xv = x.data[px * 2 + ch];
      const std::int64_t pv = sat8(2 * (xv - 3) - 4);
      INFO("pixel " << px << " channel " << ch);
      CHECK(y.data[px * 6 + ch] == q_ms(127 * (xv - 3), 1082196484, 38, 1));
      CHECK(y.data[px * 6 + 2 + ch] == q_ms(64 * (pv + 4), 1082196484, 38, 1));
      CHECK(y.data[px * 6 + 4 + ch] == y.data[px * 6 + ch]);
    }
  // x = 127: 127 * 124 / 254 = 62, + 1 = 63; x = -128: -131 / 2 = -65.5 rounds up to -65, + 1 = -64.
  CHECK(y.data[1] == 63);
  CHECK(y.data[0] == -64);
  SECTION("equal quantizations copy exactly") {
    net.layers[0].output = {0.5, 3};
    net.layers[1].output = {0.5, 3};
    const Tensor same = compiler::reference_network(net, x);
    for (std::size_t px = 0; px < 4; ++px)
      for (std::size_t ch = 0; ch < 2; ++ch) CHECK(same.data[px * 6 + ch] == x.data[px * 2 + ch]);
  }
  SECTION("shapes that differ in more than the channels are refused") {
    net.layers[1].inputs = {0, 0};
    net.layers.insert(net.layers.begin() + 1, pool_layer(LayerKind::MaxPool2d, 2, 1, 0, 0, 0, 0));
    net.layers[2].inputs = {0, 2};
    CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("only the last axis, the channels, may differ"));
  }
}

TEST_CASE("reference: the vector unit's mul and affine from their formulas", "[reference][vec]") {
  // x: a 2x2x2 map at (0.5, 3).
  const Tensor x = make_tensor({1, 2, 2, 2}, {-128, 127, 3, 4, 60, -61, 100, -7});
  SECTION("mul of the same shape: (x - 3)^2 at m = 0.5 * 0.5 / 1.0 = 1/4 (M = 2^30, S = 32), Z = 1") {
    Network net = map_net({2, 2, 2}, {0.5, 3});
    Layer m;
    m.kind = LayerKind::Mul;
    m.name = "mul";
    m.inputs = {0, 0};
    m.output = {1.0, 1};
    net.layers.push_back(m);
    const Tensor y = compiler::reference_network(net, x);
    for (std::size_t e = 0; e < 8; ++e) {
      const std::int64_t d = x.data[e] - 3;
      CHECK(y.data[e] == sat8((d * d + 2) / 4 + 1));  // ties up; d * d >= 0
    }
    CHECK(y.data[0] == 127);  // 131^2 / 4 saturates
    CHECK(y.data[2] == 1);
  }
  SECTION("mul by a per-channel vector: g = the global average of x (keeping (0.5, 3)), broadcast") {
    Network net = map_net({2, 2, 2}, {0.5, 3});
    net.layers.push_back(pool_layer(LayerKind::GlobalAvgPool2d, 0, 0, 0, 0, 0, 0));
    net.layers[0].output_is_input = true;
    Layer m;
    m.kind = LayerKind::Mul;
    m.name = "mul";
    m.inputs = {0, 1};
    m.output = {2.0, -5};
    net.layers.push_back(m);
    const Tensor y = compiler::reference_network(net, x);
    REQUIRE(y.shape == std::vector<std::size_t>{1, 2, 2, 2});
    // g[c] = q(sum (x - 3)) at m = 0.5 / (4 * 0.5) = 1/4, Z = 3: channel 0 sums -131, 0, 57, 97 = 23
    // -> 6 (5.75 rounds to 6) + 3 = 9; channel 1: 124, 1, -64, -10 = 51 -> 13 (12.75) + 3 = 16.
    // y = q((x - 3)(g - 3)) at m = 0.25 / 2 = 1/8, Z = -5.
    const std::int64_t g[2] = {9, 16};
    for (std::size_t e = 0; e < 8; ++e)
      CHECK(y.data[e] == q_ms((x.data[e] - 3) * (g[e % 2] - 3), std::int64_t{1} << 30, 33, -5));
  }
  SECTION("affine as a HardSigmoid: within half an output step of clamp(x/6 + 1/2, 0, 1)") {
    const QuantParams in{0.1, 10};
    Network net = map_net({2, 2, 2}, in);
    Layer a;
    a.kind = LayerKind::Affine;
    a.name = "hsig";
    a.alpha = 1.0 / 6.0;
    a.beta = 0.5;
    a.output = {1.0 / 255.0, -128};
    net.layers.push_back(a);
    // k = 10 + 128 = 138 (zb = -128), s = (0.1 / 6) / 8192, D = 8192, db = round(0.5 / (s * 138)) = 1781.
    const compiler::VecParams p = compiler::affine_vec(in, a.alpha, a.beta, a.output, ActFunction::None);
    CHECK(p.zb == -128);
    CHECK(p.db == 1781);
    CHECK(p.da == 8192 - 1781);
    Tensor all;
    all.shape = {1, 2, 2, 64};
    all.data.resize(256);
    for (int v = -128; v < 128; ++v) all.data[static_cast<std::size_t>(v + 128)] = v;
    net.input_shape = {2, 2, 64};
    const Tensor y = compiler::reference_network(net, all);
    for (int v = -128; v < 128; ++v) {
      const double want = std::clamp(0.1 * (v - 10) / 6.0 + 0.5, 0.0, 1.0);
      const double got = (y.data[static_cast<std::size_t>(v + 128)] + 128) / 255.0;
      INFO("x = " << v);
      CHECK(std::fabs(got - want) <= 0.5 / 255.0 + 1e-3);
    }
  }
  SECTION("affine as a standalone sigmoid: the table of q(x) at scale 1/16") {
    const QuantParams in{0.03, -7};
    Network net = map_net({1, 1, 256}, in);
    Layer a;
    a.kind = LayerKind::Affine;
    a.name = "sig";
    a.act = ActFunction::Sigmoid;
    net.layers.push_back(a);
    Tensor all;
    all.shape = {1, 1, 1, 256};
    all.data.resize(256);
    for (int v = -128; v < 128; ++v) all.data[static_cast<std::size_t>(v + 128)] = v;
    const Tensor y = compiler::reference_network(net, all);
    for (int v = -128; v < 128; ++v) {
      const double want = 1.0 / (1.0 + std::exp(-0.03 * (v + 7)));
      INFO("x = " << v);
      // q(x) steps of 1/16 (sigmoid' <= 1/4: 1/128 off at most) and the table's 1/254.
      CHECK(std::fabs(y.data[static_cast<std::size_t>(v + 128)] / 127.0 - want) <= 1.0 / 128 + 1.0 / 254 + 1e-9);
    }
  }
  SECTION("shapes that are neither the same nor a map by a per-channel vector are refused") {
    Network net = map_net({2, 2, 2}, {0.5, 3});
    Layer flat;
    flat.kind = LayerKind::Flatten;
    flat.name = "flat";
    net.layers.push_back(flat);
    Layer m;
    m.kind = LayerKind::Mul;
    m.name = "mul";
    m.inputs = {0, 1};
    m.output = {1.0, 0};
    net.layers.push_back(m);
    CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("multiplies tensors of shapes 2x2x2 and 8"));
  }
}
