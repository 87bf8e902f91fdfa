// Quantized layers on the TPU: every layer type (dense, conv2d, max-pool,
// flatten) and chains of them, compiled by the network compiler, simulated
// cycle by cycle and compared bit for bit with the independent int8 reference
// (compiler/layer_reference.h: direct convolution, zero points subtracted,
// its own multiplier search). Odd shapes, every padding and stride
// combination, zero points, big biases, chunking and segment splitting.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <random>

#include "compiler/layer_reference.h"
#include "compiler/network.h"
#include "compiler/quant.h"
#include "model/tpu.h"
#include "runtime/run_network.h"
#include "support/tier.h"

namespace {

using namespace tpu;
using compiler::Layer;
using compiler::LayerKind;
using compiler::Network;
using compiler::NetworkPlan;
using compiler::QuantParams;
using compiler::Tensor;
using model::ActFunction;

ArchConfig config_for(unsigned n) {
  ArchConfig c = preset_config(n <= 16 ? "small" + std::to_string(n) : "small16");
  c.array_n = n;
  return c;
}

std::vector<std::int8_t> random_int8(std::size_t count, std::mt19937& rng, int lo = -127,
                                     int hi = 127) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<std::int8_t> v(count);
  for (auto& x : v) x = static_cast<std::int8_t>(d(rng));
  return v;
}

Tensor random_input(std::vector<std::size_t> shape, std::mt19937& rng) {
  Tensor x;
  x.shape = std::move(shape);
  const std::size_t count =
      std::accumulate(x.shape.begin(), x.shape.end(), std::size_t{1}, std::multiplies<>());
  std::uniform_int_distribution<int> d(-128, 127);
  x.data.resize(count);
  for (auto& v : x.data) v = d(rng);
  return x;
}

// A dense or conv2d layer with random weights and biases, and an output scale
// that maps the accumulators' typical spread (about 128 * 73 * sqrt(K)) to
// roughly +-50, so that outputs are neither all saturated nor all equal.
Layer gemm_layer(LayerKind kind, std::vector<std::size_t> wshape, ActFunction act,
                 const QuantParams& in, std::mt19937& rng, std::int32_t out_zero_point = -7,
                 double bias_spread = 1.0) {
  Layer l;
  l.kind = kind;
  l.name = kind == LayerKind::Dense ? "dense" : "conv";
  l.weight_shape = wshape;
  const std::size_t count =
      std::accumulate(wshape.begin(), wshape.end(), std::size_t{1}, std::multiplies<>());
  l.weights = random_int8(count, rng);
  const std::size_t k = count / wshape.back();
  const double spread = 128.0 * 73.0 * std::sqrt(static_cast<double>(k));
  std::uniform_real_distribution<double> bd(-bias_spread * spread, bias_spread * spread);
  l.bias.resize(wshape.back());
  for (auto& b : l.bias) b = static_cast<std::int32_t>(std::lround(bd(rng)));
  l.act = act;
  if (act == ActFunction::Sigmoid || act == ActFunction::Tanh) {
    // The tables read y / 16 of the requantized y: the spread goes to about
    // +-64 (+-4 on the table).
    l.weight_scale = 4.0 / (spread * in.scale);
    l.output = {compiler::kSigmoidTanhOutputScale, 0};
  } else {
    l.weight_scale = 0.0137;
    l.output = {in.scale * l.weight_scale * spread / 50.0, out_zero_point};
  }
  if (kind == LayerKind::Conv2d) {
    l.kernel_h = static_cast<unsigned>(wshape[0]);
    l.kernel_w = static_cast<unsigned>(wshape[1]);
  }
  return l;
}

Layer flatten() {
  Layer l;
  l.kind = LayerKind::Flatten;
  l.name = "flatten";
  return l;
}

Layer maxpool(unsigned kh, unsigned kw, unsigned sh, unsigned sw) {
  Layer l;
  l.kind = LayerKind::MaxPool2d;
  l.name = "pool";
  l.kernel_h = kh;
  l.kernel_w = kw;
  l.stride_h = sh;
  l.stride_w = sw;
  return l;
}

// The scales of layer i's input, for building the next layer.
QuantParams out_quant(const Network& net) {
  return compiler::infer_network(net).back().quant;
}

struct Outcome {
  NetworkPlan plan;
  compiler::NetworkRun run;
};

// Compiles in `mode`, runs on the model, compares with the reference;
// returns the plan.
Outcome check_mode(const Network& net, const Tensor& x, const ArchConfig& cfg,
                   compiler::CompileMode mode) {
  Outcome o{compiler::compile_network(net, x.batch(), cfg, mode), {}};
  o.run = compiler::run_network(o.plan, x, cfg,
                                [&](std::size_t, const compiler::ProgramPlan& seg,
                                    model::Memories& mem) {
                                  return model::run_program(cfg, seg.program, mem);
                                });
  REQUIRE_FALSE(o.run.fault);
  const Tensor want = compiler::reference_network(net, x);
  REQUIRE(o.run.output.shape == want.shape);
  REQUIRE(o.run.output.int32 == want.int32);
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < want.data.size(); ++i)
    if (o.run.output.data[i] != want.data[i] && mismatches++ == 0)
      FAIL_CHECK("output element " << i << " = " << o.run.output.data[i] << ", reference "
                                   << want.data[i]);
  CHECK(mismatches == 0);
  // The layers' cycles add up to the programs' cycles.
  std::uint64_t layer_cycles = 0, program_cycles = 0;
  for (const auto& ls : o.run.layers) {
    layer_cycles += ls.cycles;
    CHECK(ls.cycles >= ls.mmc_rows);  // the array's cycles are the layer's own
  }
  for (const auto& log : o.run.logs) program_cycles += log.stats.cycles;
  CHECK(layer_cycles == program_cycles);
  CHECK(o.run.logs.size() == o.plan.program_count());
  return o;
}

// Both compilers against the reference: the whole network on chip (one
// program) and with host steps (whose plan is returned, for the tests of
// its segments).
Outcome check_network(const Network& net, const Tensor& x, const ArchConfig& cfg) {
  INFO("on chip");
  const Outcome on_chip = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
  CHECK((on_chip.plan.on_chip_plan && on_chip.plan.program_count() == 1));
  INFO("with host steps");
  return check_mode(net, x, cfg, compiler::CompileMode::Segments);
}

Network single(std::vector<std::size_t> input_shape, QuantParams in, Layer l) {
  Network net;
  net.name = "t";
  net.input_shape = std::move(input_shape);
  net.input = in;
  net.layers.push_back(std::move(l));
  return net;
}

const ActFunction kActs[] = {ActFunction::None, ActFunction::Relu, ActFunction::Sigmoid,
                             ActFunction::Tanh};

}  // namespace

TEST_CASE("requantization multiplier and shift from the scales", "[layers][quant]") {
  using compiler::requant_from_multiplier;
  auto q = requant_from_multiplier(0.5, 3);
  CHECK(q.multiplier == (1 << 30));
  CHECK(q.shift == 31);
  CHECK(q.zero_point == 3);
  q = requant_from_multiplier(1.0, 0);
  CHECK(q.multiplier == (1 << 30));
  CHECK(q.shift == 30);
  q = requant_from_multiplier(0.75, 0);
  CHECK(q.multiplier == 1610612736);
  CHECK(q.shift == 31);
  // f * 2^31 rounds up to 2^31: M = 2^30 and one shift less.
  q = requant_from_multiplier(1.0 - std::ldexp(1.0, -40), 0);
  CHECK(q.multiplier == (1 << 30));
  CHECK(q.shift == 30);
  // Tiny multipliers clamp the shift to 62.
  q = requant_from_multiplier(1e-12, 0);
  CHECK(q.shift == 62);
  CHECK(q.multiplier == std::llround(std::ldexp(1e-12, 62)));
  q = requant_from_multiplier(1e-30, 0);
  CHECK(q.shift == 62);
  CHECK(q.multiplier == 0);
  CHECK_THROWS_AS(requant_from_multiplier(std::ldexp(1.0, 31), 0), compiler::CompileError);
  CHECK_THROWS_AS(requant_from_multiplier(0.0, 0), compiler::CompileError);
  CHECK_THROWS_AS(requant_from_multiplier(1.0, 128), compiler::CompileError);
  // The compiler's frexp and the reference's search agree.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> e(-45.0, 30.0);
  for (int i = 0; i < 20000; ++i) {
    const double real = std::exp2(e(rng));
    const auto a = requant_from_multiplier(real, -5), b = compiler::reference_requant(real, -5);
    CAPTURE(real);
    REQUIRE(a.multiplier == b.multiplier);
    REQUIRE(a.shift == b.shift);
  }
}

TEST_CASE("biases decompose exactly into int8 digits on constant lanes", "[layers][quant]") {
  std::mt19937 rng(8);
  std::uniform_int_distribution<std::int32_t> big(-16129 * 7 - 127, 16129 * 7 + 127);
  std::vector<std::int32_t> bias(500);
  for (auto& b : bias) b = big(rng);
  bias[0] = 16129 * 7 + 127;
  bias[1] = -(16129 * 7 + 127);
  const std::vector<std::int32_t> lanes = {1, 127, 127, 127, 127, 127, 127, 127};
  const auto digits = compiler::decompose_bias(bias, lanes);
  REQUIRE(digits);
  for (std::size_t o = 0; o < bias.size(); ++o) {
    std::int64_t sum = 0;
    for (std::size_t l = 0; l < lanes.size(); ++l) {
      REQUIRE(std::abs((*digits)[l][o]) <= 127);
      sum += std::int64_t{lanes[l]} * (*digits)[l][o];
    }
    REQUIRE(sum == bias[o]);
  }
  CHECK_FALSE(compiler::decompose_bias({16129 * 7 + 128}, lanes));
  CHECK_FALSE(compiler::decompose_bias({5}, {127, -128}));  // no unit lane
  CHECK(compiler::decompose_bias({-128 * 3}, {127, -128}));
}

TEST_CASE("dense layers: odd shapes, every activation, zero points, int32 output", "[layers][dense]") {
  for (unsigned n : {4u, 8u, 16u}) {
    const ArchConfig cfg = config_for(n);
    std::mt19937 rng(100 + n);
    const std::vector<std::pair<std::size_t, std::size_t>> shapes = {
        {1, 1}, {7, 5}, {n - 1, n + 1}, {n, n}, {n + 1, 2 * n + 3}, {64, 10}, {3 * n - 2, 33}};
    for (const auto& [k, n_out] : shapes)
      for (ActFunction act : kActs)
        for (std::int32_t zp : {0, -128, 37}) {
          CAPTURE(n, k, n_out, static_cast<int>(act), zp);
          const QuantParams in{0.05, zp};
          const Network net = single({k}, in, gemm_layer(LayerKind::Dense, {k, n_out}, act, in, rng));
          check_network(net, random_input({5, k}, rng), cfg);
        }
    for (const auto& [k, n_out] : shapes) {
      CAPTURE(n, k, n_out);
      const QuantParams in{0.05, -20};
      Layer l = gemm_layer(LayerKind::Dense, {k, n_out}, ActFunction::None, in, rng);
      l.int32_output = true;
      check_network(single({k}, in, l), random_input({9, k}, rng), cfg);
    }
  }
}

TEST_CASE("dense layers: batch sizes and no bias", "[layers][dense]") {
  const ArchConfig cfg = config_for(8);
  std::mt19937 rng(5);
  for (std::size_t batch : {1u, 2u, 17u, 300u}) {
    CAPTURE(batch);
    const QuantParams in{0.02, 0};
    Layer l = gemm_layer(LayerKind::Dense, {20, 12}, ActFunction::Relu, in, rng);
    l.bias.clear();  // zero point 0 and no bias: no constant lanes at all
    const auto o = check_network(single({20}, in, l), random_input({batch, 20}, rng), cfg);
    CHECK(o.plan.segment_plans[0].const_rows == 0);
    CHECK(o.plan.segment_plans[0].host_lane_values.empty());
  }
}

TEST_CASE("biases: padding lanes, constant tiles, very large biases", "[layers][dense]") {
  const ArchConfig cfg = config_for(8);
  std::mt19937 rng(6);
  const QuantParams in{0.05, 11};
  {
    INFO("K = 13 leaves 3 padding lanes: the host writes the constants there");
    Layer l = gemm_layer(LayerKind::Dense, {13, 9}, ActFunction::Relu, in, rng);
    const auto o = check_network(single({13}, in, l), random_input({6, 13}, rng), cfg);
    CHECK_FALSE(o.plan.segment_plans[0].host_lane_values.empty());
    CHECK(o.plan.segment_plans[0].const_rows == 0);
  }
  {
    INFO("K = 16 leaves none: a constant block tile");
    Layer l = gemm_layer(LayerKind::Dense, {16, 9}, ActFunction::Relu, in, rng);
    const auto o = check_network(single({16}, in, l), random_input({6, 16}, rng), cfg);
    CHECK(o.plan.segment_plans[0].host_lane_values.empty());
    CHECK(o.plan.segment_plans[0].const_rows > 0);
  }
  {
    INFO("biases of millions need many constant tiles");
    Layer l = gemm_layer(LayerKind::Dense, {15, 9}, ActFunction::None, in, rng);
    l.int32_output = true;
    l.bias[0] = 5000000;
    l.bias[1] = -4999999;
    l.bias[2] = 1234567;
    const auto o = check_network(single({15}, in, l), random_input({3, 15}, rng), cfg);
    CHECK(o.plan.segment_plans[0].weight_tiles_used > 40);
  }
  {
    INFO("biases beyond 64 constant tiles are rejected");
    Layer l = gemm_layer(LayerKind::Dense, {15, 9}, ActFunction::None, in, rng);
    l.int32_output = true;
    l.bias[0] = 2147483647;
    CHECK_THROWS_WITH(compiler::compile_network(single({15}, in, l), 1, cfg, compiler::CompileMode::Segments),
                      Catch::Contains("bias is too large"));
  }
}

TEST_CASE("conv2d: kernels, strides, paddings, channels", "[layers][conv]") {
  struct Geo {
    std::size_t h, w, cin, kh, kw, cout;
    unsigned sh, sw, pt, pb, pl, pr;
  };
  const std::vector<Geo> geos = {
      {5, 7, 3, 3, 3, 5, 1, 1, 0, 0, 0, 0},   // valid
      {5, 7, 3, 3, 3, 5, 1, 1, 1, 1, 1, 1},   // same
      {8, 8, 1, 3, 3, 8, 1, 1, 1, 1, 1, 1},   // the digits CNN's first layer
      {6, 5, 9, 2, 3, 17, 2, 1, 1, 0, 2, 1},  // asymmetric padding, stride (2, 1)
      {9, 9, 4, 5, 5, 3, 2, 2, 2, 2, 2, 2},   // 5x5, stride 2
      {7, 6, 2, 1, 1, 7, 1, 1, 0, 0, 0, 0},   // pointwise
      {7, 6, 2, 1, 1, 7, 3, 2, 0, 0, 0, 0},   // strided 1x1
      {4, 4, 8, 4, 4, 1, 1, 1, 0, 0, 0, 0},   // kernel = input: one pixel
      {3, 11, 5, 2, 2, 9, 1, 3, 3, 2, 0, 1},  // more padding than needed, stride (1, 3)
      {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},   // 1x1x1
  };
  for (unsigned n : {4u, 8u}) {
    const ArchConfig cfg = config_for(n);
    std::mt19937 rng(200 + n);
    for (const Geo& g : geos)
      for (ActFunction act : {ActFunction::None, ActFunction::Relu, ActFunction::Tanh})
        for (std::int32_t zp : {0, -128}) {
          CAPTURE(n, g.h, g.w, g.cin, g.kh, g.kw, g.cout, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr,
                  static_cast<int>(act), zp);
          const QuantParams in{0.031, zp};
          Layer l = gemm_layer(LayerKind::Conv2d, {g.kh, g.kw, g.cin, g.cout}, act, in, rng);
          l.stride_h = g.sh;
          l.stride_w = g.sw;
          l.pad_top = g.pt;
          l.pad_bottom = g.pb;
          l.pad_left = g.pl;
          l.pad_right = g.pr;
          check_network(single({g.h, g.w, g.cin}, in, l), random_input({3, g.h, g.w, g.cin}, rng),
                        cfg);
        }
  }
}

TEST_CASE("max-pool and flatten on the host", "[layers][pool]") {
  const ArchConfig cfg = config_for(8);
  std::mt19937 rng(9);
  struct Pool {
    unsigned kh, kw, sh, sw;
  };
  for (const Pool& p : {Pool{2, 2, 2, 2}, Pool{3, 3, 2, 2}, Pool{2, 3, 1, 2}, Pool{1, 1, 1, 1},
                        Pool{3, 2, 3, 1}}) {
    CAPTURE(p.kh, p.kw, p.sh, p.sw);
    const QuantParams in{0.04, -128};
    Network net = single({7, 9, 3}, in,
                         gemm_layer(LayerKind::Conv2d, {3, 3, 3, 6}, ActFunction::Relu, in, rng, -128));
    net.layers[0].pad_top = net.layers[0].pad_bottom = net.layers[0].pad_left =
        net.layers[0].pad_right = 1;
    net.layers.push_back(maxpool(p.kh, p.kw, p.sh, p.sw));
    net.layers.push_back(flatten());
    const std::size_t features = compiler::infer_network(net).back().shape[0];
    net.layers.push_back(gemm_layer(LayerKind::Dense, {features, 10}, ActFunction::None,
                                    out_quant(net), rng));
    const auto o = check_network(net, random_input({4, 7, 9, 3}, rng), cfg);
    // conv | pool, flatten on the host | dense.
    CHECK(o.plan.segment_plans.size() == 2);
    CHECK_FALSE(o.plan.layer_segment[1]);
    CHECK_FALSE(o.plan.layer_segment[2]);
  }
  {
    INFO("a network of host layers only");
    Network net;
    net.input_shape = {6, 6, 2};
    net.input = {0.1, 0};
    net.layers = {maxpool(2, 2, 2, 2), flatten()};
    const auto o = check_network(net, random_input({3, 6, 6, 2}, rng), cfg);
    CHECK(o.plan.segment_plans.empty());
  }
}

TEST_CASE("chains stay in the unified buffer", "[layers][chain]") {
  for (unsigned n : {4u, 8u}) {
    const ArchConfig cfg = config_for(n);
    std::mt19937 rng(300 + n);
    {
      INFO("dense -> dense -> dense (an MLP): one program");
      const QuantParams in{0.02, -128};
      Network net = single({30}, in, gemm_layer(LayerKind::Dense, {30, 21}, ActFunction::Relu, in, rng, -128));
      net.layers.push_back(gemm_layer(LayerKind::Dense, {21, 16}, ActFunction::Sigmoid, out_quant(net), rng));
      net.layers.push_back(gemm_layer(LayerKind::Dense, {16, 7}, ActFunction::None, out_quant(net), rng, 3));
      const auto o = check_network(net, random_input({11, 30}, rng), cfg);
      CHECK(o.plan.segment_plans.size() == 1);
      CHECK(o.plan.segment_plans[0].layers.size() == 3);
    }
    {
      INFO("conv -> flatten -> dense -> dense: one program, flatten by re-reading UB rows");
      const QuantParams in{0.03, -128};
      Network net = single({6, 5, 2}, in, gemm_layer(LayerKind::Conv2d, {3, 3, 2, 5}, ActFunction::Relu, in, rng, -128));
      net.layers[0].pad_top = net.layers[0].pad_bottom = 1;
      net.layers[0].pad_left = net.layers[0].pad_right = 1;
      net.layers.push_back(flatten());
      net.layers.push_back(gemm_layer(LayerKind::Dense, {150, 12}, ActFunction::Relu, out_quant(net), rng, -128));
      net.layers.push_back(gemm_layer(LayerKind::Dense, {12, 10}, ActFunction::None, out_quant(net), rng));
      const auto o = check_network(net, random_input({7, 6, 5, 2}, rng), cfg);
      CHECK(o.plan.segment_plans.size() == 1);
      CHECK(o.plan.segment_plans[0].unit_is_sample);
    }
    {
      INFO("conv -> 1x1 conv -> 1x1 conv (int32): one program");
      const QuantParams in{0.03, 5};
      Network net = single({5, 6, 3}, in, gemm_layer(LayerKind::Conv2d, {2, 2, 3, 9}, ActFunction::Relu, in, rng, -100));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, 9, 6}, ActFunction::Tanh, out_quant(net), rng));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, 6, 4}, ActFunction::None, out_quant(net), rng));
      net.layers.back().int32_output = true;
      const auto o = check_network(net, random_input({3, 5, 6, 3}, rng), cfg);
      CHECK(o.plan.segment_plans.size() == 1);
    }
    {
      INFO("conv -> 3x3 conv: im2col on the host, two programs");
      const QuantParams in{0.03, 0};
      Network net = single({6, 6, 2}, in, gemm_layer(LayerKind::Conv2d, {3, 3, 2, 4}, ActFunction::Relu, in, rng, -128));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {3, 3, 4, 3}, ActFunction::None, out_quant(net), rng));
      const auto o = check_network(net, random_input({2, 6, 6, 2}, rng), cfg);
      CHECK(o.plan.segment_plans.size() == 2);
    }
    {
      INFO("flatten of a 1-D tensor between dense layers is a no-op in the UB");
      const QuantParams in{0.02, 0};
      Network net = single({9}, in, gemm_layer(LayerKind::Dense, {9, 9}, ActFunction::Relu, in, rng, -128));
      net.layers.push_back(flatten());
      net.layers.push_back(gemm_layer(LayerKind::Dense, {9, 4}, ActFunction::None, out_quant(net), rng));
      const auto o = check_network(net, random_input({4, 9}, rng), cfg);
      CHECK(o.plan.segment_plans.size() == 1);
    }
  }
}

TEST_CASE("chunks: a small unified buffer splits the rows", "[layers][chunks]") {
  std::mt19937 rng(11);
  ArchConfig cfg = config_for(4);
  cfg.ub_rows = 200;
  cfg.acc_rows = 24;
  {
    INFO("an MLP over many chunks of samples");
    const QuantParams in{0.02, -128};
    Network net = single({10}, in, gemm_layer(LayerKind::Dense, {10, 9}, ActFunction::Relu, in, rng, -128));
    net.layers.push_back(gemm_layer(LayerKind::Dense, {9, 6}, ActFunction::None, out_quant(net), rng));
    const auto o = check_network(net, random_input({101, 10}, rng), cfg);
    CHECK(o.plan.segment_plans.size() == 1);
    CHECK(o.plan.segment_plans[0].chunk_units < 101);
  }
  {
    INFO("conv -> flatten -> dense in chunks of whole samples");
    const QuantParams in{0.03, 0};
    Network net = single({4, 3, 1}, in, gemm_layer(LayerKind::Conv2d, {2, 2, 1, 3}, ActFunction::Relu, in, rng, -128));
    net.layers.push_back(flatten());
    net.layers.push_back(gemm_layer(LayerKind::Dense, {18, 5}, ActFunction::None, out_quant(net), rng));
    const auto o = check_network(net, random_input({13, 4, 3, 1}, rng), cfg);
    CHECK(o.plan.segment_plans.size() == 1);
    CHECK(o.plan.segment_plans[0].unit_is_sample);
    CHECK(o.plan.segment_plans[0].chunk_units < 13);
  }
  {
    INFO("a conv in chunks of rows (host steps; on chip one sample's maps do not fit)");
    const QuantParams in{0.03, 0};
    Network net = single({9, 9, 3}, in, gemm_layer(LayerKind::Conv2d, {3, 3, 3, 5}, ActFunction::Relu, in, rng));
    const Tensor x = random_input({2, 9, 9, 3}, rng);
    CHECK_THROWS_WITH(compiler::compile_network(net, 2, cfg, compiler::CompileMode::OnChip),
                      Catch::Contains("does not fit on chip"));
    const auto o = check_mode(net, x, cfg, compiler::CompileMode::Segments);
    CHECK(o.plan.segment_plans[0].chunk_units < 2 * 49);
  }
}

TEST_CASE("a chain that does not fit the unified buffer is split", "[layers][chunks]") {
  std::mt19937 rng(12);
  ArchConfig cfg = config_for(4);
  cfg.ub_rows = 60;  // the dense layers fit, but not after the conv with one sample
  const QuantParams in{0.03, 0};
  Network net = single({6, 6, 1}, in, gemm_layer(LayerKind::Conv2d, {3, 3, 1, 4}, ActFunction::Relu, in, rng, -128));
  net.layers.push_back(flatten());
  net.layers.push_back(gemm_layer(LayerKind::Dense, {64, 6}, ActFunction::Relu, out_quant(net), rng));
  net.layers.push_back(gemm_layer(LayerKind::Dense, {6, 3}, ActFunction::None, out_quant(net), rng));
  const auto o = check_mode(net, random_input({3, 6, 6, 1}, rng), cfg, compiler::CompileMode::Segments);
  CHECK(o.plan.segment_plans.size() == 2);
  CHECK_FALSE(o.plan.layer_segment[1]);  // the flatten moved to the host
  CHECK(o.plan.layer_segment[2] == o.plan.layer_segment[3]);
}

TEST_CASE("the compiler rejects malformed networks", "[layers]") {
  std::mt19937 rng(13);
  const ArchConfig cfg = config_for(8);
  const QuantParams in{0.05, 0};
  Network net = single({3, 3, 2}, in, gemm_layer(LayerKind::Dense, {18, 4}, ActFunction::None, in, rng));
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg), Catch::Contains("needs a 1-D input"));
  net = single({10}, in, gemm_layer(LayerKind::Dense, {9, 4}, ActFunction::None, in, rng));
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg), Catch::Contains("expect 9 input features"));
  net = single({10}, in, gemm_layer(LayerKind::Dense, {10, 4}, ActFunction::None, in, rng));
  net.layers[0].int32_output = true;
  net.layers.push_back(gemm_layer(LayerKind::Dense, {4, 4}, ActFunction::None, in, rng));
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg), Catch::Contains("only the last layer"));
  net = single({4, 4, 1}, in, gemm_layer(LayerKind::Conv2d, {5, 5, 1, 2}, ActFunction::None, in, rng));
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg), Catch::Contains("does not fit the padded"));
  net = single({4, 4, 1}, in, maxpool(5, 5, 1, 1));
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg), Catch::Contains("window does not fit"));
  net = single({10}, in, gemm_layer(LayerKind::Dense, {10, 4}, ActFunction::None, in, rng));
  net.layers[0].output.scale = 1e-14;  // multiplier >= 2^31
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg), Catch::Contains("too large"));
  net = single({10}, in, gemm_layer(LayerKind::Dense, {10, 4}, ActFunction::None, in, rng));
  CHECK_THROWS_WITH(compiler::compile_network(net, 0, cfg), Catch::Contains("batch is empty"));
  ArchConfig tiny = cfg;
  tiny.acc_rows = 1;
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, tiny, compiler::CompileMode::Segments),
                    Catch::Contains("does not fit"));
  tiny.ub_rows = 2;  // the input, output and constant plane need 4
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, tiny), Catch::Contains("does not fit on chip"));
}

// --- CNN layers on chip (depthwise, padded pools, average pools, adds) ---

namespace {

Layer with_padding(Layer l, unsigned t, unsigned b, unsigned le, unsigned r) {
  l.pad_top = t;
  l.pad_bottom = b;
  l.pad_left = le;
  l.pad_right = r;
  return l;
}

Layer depthwise(unsigned k, std::size_t c, unsigned stride, const QuantParams& in, std::mt19937& rng) {
  Layer l = gemm_layer(LayerKind::Conv2d, {k, k, 1, c}, ActFunction::Relu, in, rng, -128);
  l.groups = static_cast<unsigned>(c);
  l.stride_h = l.stride_w = stride;
  l.name = "dw";
  return l;
}

// add(tensor a, tensor b) with activation `act` into `out`.
Layer add_layer(std::size_t a, std::size_t b, ActFunction act, QuantParams out) {
  Layer l;
  l.kind = LayerKind::Add;
  l.name = "add";
  l.inputs = {a, b};
  l.act = act;
  l.output = out;
  return l;
}

Layer avgpool(unsigned kh, unsigned kw, unsigned sh, unsigned sw, std::optional<QuantParams> out) {
  Layer l = maxpool(kh, kw, sh, sw);
  l.kind = LayerKind::AvgPool2d;
  l.name = "avg";
  if (out) l.output = *out; else l.output_is_input = true;
  return l;
}

}  // namespace

TEST_CASE("CNN layers on chip: depthwise, padded and average pools, adds", "[layers][cnn]") {
  std::mt19937 rng(21);
  for (unsigned n : {4u, 8u}) {
    const ArchConfig cfg = config_for(n);
    INFO("N = " << n);
    for (std::size_t c : {3u, 8u, 11u}) {  // channels below, at and above N (several groups)
      INFO(c << " channels");
      const QuantParams in{0.04, -20};
      for (unsigned k : {1u, 3u})
        for (unsigned stride : {1u, 2u}) {
          INFO("depthwise " << k << "x" << k << " stride " << stride);
          Network net = single({7, 6, c}, in, with_padding(depthwise(k, c, stride, in, rng), k / 2, k / 2, k / 2, k - 1 - k / 2 + (stride > 1)));
          check_mode(net, random_input({3, 7, 6, c}, rng), cfg, compiler::CompileMode::OnChip);
        }
      for (unsigned pool : {2u, 3u}) {
        INFO("pools " << pool);
        Network net = single({7, 5, c}, in, with_padding(maxpool(pool, pool, 2, 1), pool - 1, 0, 1, pool - 1));
        net.layers.push_back(with_padding(avgpool(pool, 2, 1, 2, QuantParams{0.03, 5}), 1, pool - 1, 0, 1));
        net.layers.push_back(avgpool(3, 3, 3, 3, std::nullopt));
        check_mode(net, random_input({4, 7, 5, c}, rng), cfg, compiler::CompileMode::OnChip);
      }
      {
        INFO("global average pool, flatten, dense");
        Network net = single({5, 6, c}, in, avgpool(1, 1, 1, 1, std::nullopt));
        net.layers[0].kind = LayerKind::GlobalAvgPool2d;
        net.layers[0].output = {0.01, 3};
        net.layers[0].output_is_input = false;
        net.layers.push_back(flatten());
        net.layers.push_back(gemm_layer(LayerKind::Dense, {c, 5}, ActFunction::None, out_quant(net), rng));
        check_mode(net, random_input({5, 5, 6, c}, rng), cfg, compiler::CompileMode::OnChip);
      }
      for (double ratio : {1.0, 0.37, 3.1, 0.001}) {
        INFO("residual add, scale ratio " << ratio);
        // x -> conv a ; x -> conv b (its scale times ratio) ; add(a, b) relu
        Network net = single({6, 6, c}, in, with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, c, c}, ActFunction::None, in, rng, 9), 1, 1, 1, 1));
        Layer b = gemm_layer(LayerKind::Conv2d, {1, 1, c, c}, ActFunction::Relu, in, rng, -128);
        b.output.scale *= ratio;
        b.inputs = {0};
        b.name = "b";
        net.layers.push_back(b);
        net.layers.push_back(add_layer(1, 2, ActFunction::Relu, {net.layers[0].output.scale * 1.5, -100}));
        check_mode(net, random_input({3, 6, 6, c}, rng), cfg, compiler::CompileMode::OnChip);
      }
    }
  }
  {
    INFO("networks of flattens only: the output is the input (found by fuzz_net)");
    const ArchConfig cfg = config_for(4);
    const QuantParams in{1.0, -11};
    check_network(single({2, 2, 3}, in, flatten()), random_input({2, 2, 2, 3}, rng), cfg);
    Network two = single({3, 2, 5}, in, flatten());
    two.layers.push_back(flatten());
    check_network(two, random_input({3, 3, 2, 5}, rng), cfg);
    check_mode(single({8}, in, flatten()), random_input({1, 8}, rng), cfg, compiler::CompileMode::OnChip);
    ArchConfig small = cfg;
    small.ub_rows = 40;  // several chunks, two input slots
    const auto o = check_mode(single({6, 1, 5}, in, flatten()), random_input({9, 6, 1, 5}, rng), small,
                              compiler::CompileMode::OnChip);
    CHECK(o.plan.on_chip_plan->chunk_units < 9);
  }
  {
    INFO("a residual network in several chunks (a small unified buffer)");
    ArchConfig cfg = config_for(4);
    cfg.ub_rows = 700;
    const QuantParams in{0.04, -20};
    Network net = single({6, 6, 5}, in, with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 5, 6}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1));
    net.layers.push_back(with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 6, 6}, ActFunction::None, out_quant(net), rng, 4), 1, 1, 1, 1));
    net.layers.push_back(add_layer(1, 2, ActFunction::None, {0.05, 0}));
    const auto o = check_mode(net, random_input({9, 6, 6, 5}, rng), cfg, compiler::CompileMode::OnChip);
    CHECK(o.plan.on_chip_plan->chunk_units < 9);
  }
}

// --- Maps larger than the accumulators: bands of output rows ---

namespace {

// The same network run on the detailed path: same output, same retire
// records as the fast path's (check_mode's) run.
void check_detailed_agrees(const NetworkPlan& plan, const compiler::NetworkRun& fast, const Tensor& x,
                           const ArchConfig& cfg) {
  model::RunOptions opts;
  opts.detail = model::Detail::Detailed;
  const compiler::NetworkRun detailed = compiler::run_network(
      plan, x, cfg, [&](std::size_t, const compiler::ProgramPlan& seg, model::Memories& mem) {
        return model::run_program(cfg, seg.program, mem, opts);
      });
  REQUIRE_FALSE(detailed.fault);
  CHECK(detailed.output.data == fast.output.data);
  REQUIRE(detailed.logs.size() == fast.logs.size());
  for (std::size_t s = 0; s < fast.logs.size(); ++s) {
    CHECK(detailed.logs[s].stats.cycles == fast.logs[s].stats.cycles);
    REQUIRE(detailed.logs[s].retired.size() == fast.logs[s].retired.size());
    for (std::size_t r = 0; r < fast.logs[s].retired.size(); ++r) {
      const auto& a = detailed.logs[s].retired[r];
      const auto& b = fast.logs[s].retired[r];
      INFO("retire record " << r);
      CHECK((a.pc == b.pc && a.issue == b.issue && a.start == b.start && a.completion == b.completion));
    }
  }
}

// ACT and WHM.A instructions of a program (the bands' activations and
// int32 outputs).
std::size_t count_opcode(const compiler::ProgramPlan& seg, isa::Opcode op) {
  std::size_t k = 0;
  for (const auto& in : seg.program.code) k += in.opcode == op;
  return k;
}

}  // namespace

TEST_CASE("a sample whose maps exceed the accumulators is computed in bands of output rows",
          "[layers][cnn][bands]") {
  std::mt19937 rng(31);
  const QuantParams in{0.04, -20};
  for (unsigned n : {4u, 8u}) {
    INFO("N = " << n);
    ArchConfig cfg = config_for(n);
    cfg.acc_rows = 24;  // 12 rows per band (half the accumulators)
    {
      INFO("im2col conv, strided conv, depthwise, pointwise, add, int32 pointwise output");
      // 9x7x3 -> conv 3x3 pad 1 (the host's im2col; 63 pixels: bands of one
      // 7-pixel row) -> conv 3x3 stride 2 pad 1 (5x4: bands of 3 rows and 2)
      // -> depthwise 3x3 pad 1 -> pointwise 1x1; add(depthwise, pointwise)
      // -> pointwise 1x1 with int32 output (WHM.A by bands).
      const std::size_t c = 6;
      Network net = single({9, 7, 3}, in, with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 3, c}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1));
      Layer s2 = with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, c, c}, ActFunction::Relu, out_quant(net), rng, -128), 1, 1, 1, 1);
      s2.stride_h = s2.stride_w = 2;
      net.layers.push_back(s2);
      net.layers.push_back(with_padding(depthwise(3, c, 1, out_quant(net), rng), 1, 1, 1, 1));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, c, c}, ActFunction::None, out_quant(net), rng, 3));
      net.layers.push_back(add_layer(3, 4, ActFunction::Relu, {net.layers[3].output.scale * 1.5, -100}));
      Layer last = gemm_layer(LayerKind::Conv2d, {1, 1, c, 5}, ActFunction::None, out_quant(net), rng);
      last.int32_output = true;
      net.layers.push_back(last);
      const Tensor x = random_input({3, 9, 7, 3}, rng);
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      const auto& seg = *o.plan.on_chip_plan;
      CHECK(seg.chunk_units == 1);
      CHECK(seg.in_im2col);
      // Per sample and output group: 9 bands of the first conv, 2 of each
      // 5x4 layer's (conv, depthwise, pointwise, add), 2 of the output's.
      const std::size_t groups = (c + n - 1) / n;
      CHECK(count_opcode(seg, isa::Opcode::ACT) == 3 * (groups * (9 + 4 * 2)) + 1);  // + the constant plane
      CHECK(count_opcode(seg, isa::Opcode::WHM) == 3 * 2 * ((5 + n - 1) / n));
      check_detailed_agrees(o.plan, o.run, x, cfg);
    }
    {
      INFO("an int8 conv output written back by bands; a band of a partial last row set");
      Network net = single({11, 5, 2}, in, with_padding(gemm_layer(LayerKind::Conv2d, {3, 2, 2, 3}, ActFunction::Relu, in, rng, -128), 2, 0, 1, 0));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {2, 2, 3, 3}, ActFunction::None, out_quant(net), rng, 11));
      const Tensor x = random_input({2, 11, 5, 2}, rng);
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      CHECK(o.plan.on_chip_plan->chunk_units == 1);
      check_detailed_agrees(o.plan, o.run, x, cfg);
    }
    {
      INFO("jobs of several samples: a chunk of more samples than the accumulators take at once");
      // 6x6 maps (36 rows a sample) exceed the 12 rows of a job: bands of 2
      // output rows; the 2x2 maps after the strided conv (4 rows a sample)
      // run in jobs of 3 samples, the 1x1 conv's and the add's too, so the
      // heavy weights of the later layers are loaded once per 3 samples.
      const std::size_t c = 6 * n;
      Network net = single({6, 6, 5}, in, with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 5, c}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1));
      Layer s3 = gemm_layer(LayerKind::Conv2d, {3, 3, c, c}, ActFunction::Relu, out_quant(net), rng, -128);
      s3.stride_h = s3.stride_w = 3;
      net.layers.push_back(s3);
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, c, c}, ActFunction::None, out_quant(net), rng, 2));
      net.layers.push_back(add_layer(2, 3, ActFunction::Relu, {net.layers[1].output.scale * 2, -60}));
      const Tensor x = random_input({7, 6, 6, 5}, rng);
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      CHECK(o.plan.on_chip_plan->chunk_units >= 4);
      // The samples' outputs differ (a job that read another job's samples
      // would show).
      const std::size_t per_sample = o.run.output.data.size() / 7;
      for (std::size_t k = 1; k < 7; ++k)
        CHECK_FALSE(std::equal(o.run.output.data.begin(), o.run.output.data.begin() + per_sample,
                               o.run.output.data.begin() + k * per_sample));
      check_detailed_agrees(o.plan, o.run, x, cfg);
    }
    {
      INFO("a row wider than a band is refused with its reason");
      ArchConfig tiny = cfg;
      tiny.acc_rows = 12;  // bands of 6 rows; the 7-pixel rows do not fit
      Network net = single({9, 7, 3}, in, with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 3, 4}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1));
      CHECK_THROWS_WITH(compiler::compile_network(net, 2, tiny, compiler::CompileMode::OnChip),
                        Catch::Contains("one output row of 7 pixels needs more than the 6 accumulator rows of a band"));
    }
  }
}

namespace {

Layer concat_layer(std::vector<std::size_t> inputs, QuantParams out) {
  Layer l;
  l.kind = LayerKind::Concat;
  l.name = "concat";
  l.inputs = std::move(inputs);
  l.output = out;
  return l;
}

}  // namespace

TEST_CASE("concat along channels on chip: shifted diagonal tiles, scales, zero points, bands",
          "[layers][cnn][concat]") {
  std::mt19937 rng(41);
  const QuantParams in{0.04, -20};
  for (unsigned n : {4u, 8u}) {
    // The sanitizer build's default tier: N = 4 only (this case took it 52 s at both).
    if (test::reduced_tier() && n != 4) continue;
    INFO("N = " << n);
    const ArchConfig cfg = config_for(n);
    for (double ratio : {1.0, 0.3, 2.7}) {
      INFO("maps: concat(a, b, input) then a conv; scale ratio " << ratio);
      // a: 5 channels, b: 7 (offset 5: not a multiple of N), the input: 3.
      Network net = single({6, 5, 3}, in, gemm_layer(LayerKind::Conv2d, {1, 1, 3, 5}, ActFunction::Relu, in, rng, -128));
      Layer b = with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 3, 7}, ActFunction::None, in, rng, 9), 1, 1, 1, 1);
      b.output.scale = net.layers[0].output.scale * ratio;
      b.inputs = {0};
      b.name = "b";
      net.layers.push_back(b);
      net.layers.push_back(concat_layer({1, 2, 0}, {net.layers[0].output.scale * 1.2, 6}));
      const Tensor x = random_input({3, 6, 5, 3}, rng);
      check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, 15, 4}, ActFunction::None, out_quant(net), rng));
      check_mode(net, x, cfg, compiler::CompileMode::OnChip);
    }
    {
      INFO("an exact copy: the parts have the output's quantization");
      Network net = single({4, 4, 6}, in, gemm_layer(LayerKind::Conv2d, {1, 1, 6, 6}, ActFunction::None, in, rng, 2));
      Layer b = gemm_layer(LayerKind::Conv2d, {1, 1, 6, 3}, ActFunction::None, in, rng, 2);
      b.output = net.layers[0].output;
      b.inputs = {0};
      net.layers.push_back(b);
      net.layers.push_back(concat_layer({1, 2}, net.layers[0].output));
      const Tensor x = random_input({2, 4, 4, 6}, rng);
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      const std::vector<Tensor> all = compiler::reference_network_all(net, x);
      for (std::size_t p = 0; p < 2 * 16; ++p)
        for (std::size_t c = 0; c < 9; ++c)
          CHECK(o.run.output.data[p * 9 + c] == (c < 6 ? all[0].data[p * 6 + c] : all[1].data[p * 3 + c - 6]));
    }
    {
      INFO("1-D features: concat of two dense layers, then a dense layer");
      Network net = single({9}, in, gemm_layer(LayerKind::Dense, {9, 6}, ActFunction::Relu, in, rng, -128));
      Layer b = gemm_layer(LayerKind::Dense, {9, 3}, ActFunction::None, in, rng);
      b.inputs = {0};
      net.layers.push_back(b);
      net.layers.push_back(concat_layer({2, 1}, {0.5, -3}));
      net.layers.push_back(gemm_layer(LayerKind::Dense, {9, 4}, ActFunction::None, out_quant(net), rng));
      check_mode(net, random_input({5, 9}, rng), cfg, compiler::CompileMode::OnChip);
    }
    {
      INFO("bands: maps larger than the accumulators, and the detailed path");
      ArchConfig small = cfg;
      small.acc_rows = 24;
      Network net = single({7, 6, 5}, in, gemm_layer(LayerKind::Conv2d, {1, 1, 5, 6}, ActFunction::Relu, in, rng, -128));
      net.layers.push_back(concat_layer({0, 1}, {0.05, -1}));
      const Tensor x = random_input({2, 7, 6, 5}, rng);
      const auto o = check_mode(net, x, small, compiler::CompileMode::OnChip);
      check_detailed_agrees(o.plan, o.run, x, small);
    }
  }
  {
    INFO("the host-step compiler refuses a concat");
    const QuantParams q{0.04, -20};
    Network net = single({4}, q, concat_layer({0, 0}, q));
    CHECK_THROWS_WITH(compiler::compile_network(net, 1, config_for(4), compiler::CompileMode::Segments),
                      Catch::Contains("runs only on chip"));
  }
}

TEST_CASE("a convolution's all-zero weight tiles get no passes (grouped convolutions)", "[layers][conv][groups]") {
  // N = 4, 8 -> 8 channels: two groups of 4, block-diagonal weights, so the
  // tiles (input group gi, output group go) with gi != go are zero.
  std::mt19937 rng(51);
  const ArchConfig cfg = config_for(4);
  const QuantParams in{0.04, -20};
  for (unsigned k : {1u, 3u}) {
    INFO(k << "x" << k);
    Layer dense = with_padding(gemm_layer(LayerKind::Conv2d, {k, k, 8, 8}, ActFunction::Relu, in, rng, -128),
                               k / 2, k / 2, k / 2, k / 2);
    Layer grouped = dense;
    for (std::size_t tap = 0; tap < k * k; ++tap)
      for (std::size_t i = 0; i < 8; ++i)
        for (std::size_t o = 0; o < 8; ++o)
          if (i / 4 != o / 4) grouped.weights[(tap * 8 + i) * 8 + o] = 0;
    const Tensor x = random_input({1, 5, 5, 8}, rng);  // one sample: one chunk for both
    const auto a = check_mode(single({5, 5, 8}, in, dense), x, cfg, compiler::CompileMode::OnChip);
    const auto b = check_mode(single({5, 5, 8}, in, grouped), x, cfg, compiler::CompileMode::OnChip);
    // Per output group, the passes of one input group (one per kernel offset) are gone.
    const std::size_t gone = 2 * k * k;
    CHECK(count_opcode(*a.plan.on_chip_plan, isa::Opcode::MMC) - count_opcode(*b.plan.on_chip_plan, isa::Opcode::MMC) ==
          gone);
  }
  {
    INFO("every tile zero: one pass clears the accumulators, the output is the bias");
    Layer zero = gemm_layer(LayerKind::Conv2d, {3, 3, 5, 3}, ActFunction::None, in, rng, 3);
    std::fill(zero.weights.begin(), zero.weights.end(), std::int8_t{0});
    check_mode(single({4, 4, 5}, in, with_padding(zero, 1, 1, 1, 1)), random_input({2, 4, 4, 5}, rng), cfg,
               compiler::CompileMode::OnChip);
  }
}

namespace {

Layer vec_layer(LayerKind kind, std::vector<std::size_t> inputs, ActFunction act, QuantParams out,
                double alpha = 1.0, double beta = 0.0) {
  Layer l;
  l.kind = kind;
  l.name = kind == LayerKind::Mul ? "mul" : "affine";
  l.inputs = std::move(inputs);
  l.act = act;
  l.output = act == ActFunction::Sigmoid || act == ActFunction::Tanh ? QuantParams{compiler::kSigmoidTanhOutputScale, 0} : out;
  l.alpha = alpha;
  l.beta = beta;
  return l;
}

}  // namespace

TEST_CASE("mul and affine on the vector unit: element-wise, per-channel broadcast, every function",
          "[layers][cnn][vec]") {
  std::mt19937 rng(43);
  const QuantParams in{0.04, -20};
  for (unsigned n : {4u, 8u}) {
    INFO("N = " << n);
    const ArchConfig cfg = config_for(n);
    for (ActFunction act : kActs) {
      INFO("mul of two maps (6 channels: a partial plane), then a conv; activation " << static_cast<int>(act));
      Network net = single({5, 4, 6}, in, gemm_layer(LayerKind::Conv2d, {1, 1, 6, 6}, ActFunction::None, in, rng, 5));
      Layer b = with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 6, 6}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1);
      b.inputs = {0};
      b.name = "b";
      net.layers.push_back(b);
      const double prod = net.layers[0].output.scale * net.layers[1].output.scale;
      net.layers.push_back(vec_layer(LayerKind::Mul, {1, 2}, act, {prod * 40.0, -3}));
      const Tensor x = random_input({3, 5, 4, 6}, rng);
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      CHECK(count_opcode(*o.plan.on_chip_plan, isa::Opcode::VEC) > 0);
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, 6, 3}, ActFunction::None, out_quant(net), rng));
      check_mode(net, x, cfg, compiler::CompileMode::OnChip);
    }
    {
      INFO("squeeze-and-excitation: a map by its sigmoid gate (global pool, 1x1 convs), broadcast per sample");
      Network net = single({4, 5, 10}, in, gemm_layer(LayerKind::Conv2d, {1, 1, 10, 10}, ActFunction::Relu, in, rng, -128));
      Layer pool;
      pool.kind = LayerKind::GlobalAvgPool2d;
      pool.name = "gap";
      pool.output_is_input = true;
      net.layers.push_back(pool);
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, 10, 3}, ActFunction::Relu, out_quant(net), rng, -128));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, 3, 10}, ActFunction::Sigmoid, out_quant(net), rng));
      net.layers.push_back(vec_layer(LayerKind::Mul, {1, 4}, ActFunction::None, {net.layers[0].output.scale / 120.0, 0}));
      const Tensor x = random_input({3, 4, 5, 10}, rng);
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      check_detailed_agrees(o.plan, o.run, x, cfg);
    }
    for (const std::int32_t z : {-20, 0, 37, 127, -128}) {
      INFO("affine: hard-swish (x * HardSigmoid(x)), SiLU, a negative alpha; input zero point " << z);
      const QuantParams q{0.05, z};
      Network net = single({3, 3, 5}, q, vec_layer(LayerKind::Affine, {0}, ActFunction::None, {1.0 / 255.0, -128}, 1.0 / 6.0, 0.5));
      net.layers.push_back(vec_layer(LayerKind::Mul, {0, 1}, ActFunction::None, {0.03, -50}));
      net.layers.push_back(vec_layer(LayerKind::Affine, {0}, ActFunction::Sigmoid, {}));
      net.layers.push_back(vec_layer(LayerKind::Mul, {0, 3}, ActFunction::Relu, {0.02, -128}));
      net.layers.push_back(vec_layer(LayerKind::Affine, {2}, ActFunction::Tanh, {}, -0.7, 0.3));
      net.layers.push_back(vec_layer(LayerKind::Affine, {5}, ActFunction::None, {0.01, 3}, 2.5, -1.25));
      net.layers.push_back(vec_layer(LayerKind::Mul, {4, 6}, ActFunction::None, {0.005, 0}));
      const Tensor x = random_input({4, 3, 3, 5}, rng);
      check_mode(net, x, cfg, compiler::CompileMode::OnChip);
    }
    {
      INFO("1-D: dense, hard-swish, dense (PyTorch's MobileNetV3 head)");
      Network net = single({9}, in, gemm_layer(LayerKind::Dense, {9, 11}, ActFunction::None, in, rng, 4));
      const QuantParams h = net.layers[0].output;
      net.layers.push_back(vec_layer(LayerKind::Affine, {1}, ActFunction::None, {1.0 / 255.0, -128}, 1.0 / 6.0, 0.5));
      net.layers.push_back(vec_layer(LayerKind::Mul, {1, 2}, ActFunction::None, {h.scale * 0.6, -90}));
      net.layers.push_back(gemm_layer(LayerKind::Dense, {11, 4}, ActFunction::None, out_quant(net), rng));
      check_mode(net, random_input({5, 9}, rng), cfg, compiler::CompileMode::OnChip);
    }
  }
  {
    INFO("the host-step compiler refuses them");
    Network net = single({6}, in, vec_layer(LayerKind::Affine, {0}, ActFunction::Sigmoid, {}));
    CHECK_THROWS_WITH(compiler::compile_network(net, 1, config_for(4), compiler::CompileMode::Segments),
                      Catch::Contains("runs only on chip"));
  }
}

TEST_CASE("nearest upsampling on chip: one max POOL per output row, an exact copy", "[layers][upsample]") {
  std::mt19937 rng(28);
  for (unsigned n : {4u, 8u}) {
    const ArchConfig cfg = config_for(n);
    for (std::size_t c : {3u, 11u})
      for (unsigned sh : {1u, 2u, 3u})
        for (unsigned sw : {1u, 2u, 3u}) {
          INFO("N = " << n << ", " << c << " channels, factors " << sh << "x" << sw);
          Layer up;
          up.kind = LayerKind::Upsample;
          up.stride_h = sh;
          up.stride_w = sw;
          Network net = single({3, 5, c}, QuantParams{0.05, -7}, up);
          const Tensor x = random_input({2, 3, 5, c}, rng);
          const Outcome o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
          // The closed form: output (oy, ox) is input (oy / sh, ox / sw).
          REQUIRE(o.run.output.shape == std::vector<std::size_t>{2, 3 * sh, 5 * sw, c});
          std::size_t bad = 0;
          for (std::size_t s = 0; s < 2; ++s)
            for (std::size_t oy = 0; oy < 3 * sh; ++oy)
              for (std::size_t ox = 0; ox < 5 * sw; ++ox)
                for (std::size_t ch = 0; ch < c; ++ch)
                  bad += o.run.output.data[((s * 3 * sh + oy) * 5 * sw + ox) * c + ch] !=
                         x.data[((s * 3 + oy / sh) * 5 + ox / sw) * c + ch];
          CHECK(bad == 0);
        }
  }
}

// --- Maps larger than the unified buffer: spilled to host memory ---

namespace {

std::size_t count_rows(const compiler::ProgramPlan& seg, isa::Opcode op) {
  std::size_t rows = 0;
  for (const auto& in : seg.program.code)
    if (in.opcode == op) rows += static_cast<std::size_t>(in.operands[2]);
  return rows;
}

}  // namespace

TEST_CASE("maps that do not fit the unified buffer spill to host memory and run in bands",
          "[layers][cnn][spill]") {
  std::mt19937 rng(41);
  const QuantParams in{0.04, -20};
  for (unsigned n : {4u, 8u}) {
    INFO("N = " << n);
    {
      INFO("one 3x3 conv whose input spills: the RHMs of the bands with their halo rows");
      // 16x4 input of 2N channels (2 planes of 64 rows), N output channels
      // (64 rows), 16 accumulator rows: bands of 8 pixels = 2 output rows.
      // In the unified buffer: 128 + 64 + a constant plane of 8 rows = 200.
      ArchConfig cfg = config_for(n);
      cfg.acc_rows = 16;
      Network net = single({16, 4, 2 * n}, in,
                           with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 2 * n, n}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1));
      const Tensor x = random_input({2, 16, 4, 2 * n}, rng);
      cfg.ub_rows = 200;
      const auto fit = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      CHECK_THAT(fit.plan.on_chip_plan->summary, Catch::StartsWith("unified buffer 200 of 200 rows"));
      CHECK_THAT(fit.plan.on_chip_plan->summary, !Catch::Contains("spilled"));
      CHECK(count_rows(*fit.plan.on_chip_plan, isa::Opcode::RHM) == 2 * 128);  // the inputs, whole
      cfg.ub_rows = 199;
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      const auto& seg = *o.plan.on_chip_plan;
      CHECK_THAT(seg.summary, Catch::Contains("spilled to host memory, read and written in bands: the input, "
                                              "2 staging slots of 32 rows"));
      CHECK(seg.chunk_units == 1);
      // Per sample: 8 bands of 2 output rows, each reading input rows
      // [2b - 1, 2b + 3) of the map (3 rows at the top and bottom, 4 in
      // between) of both planes: 16 RHMs of 2 * (3 + 6 * 4 + 3) rows of 4
      // pixels; the output leaves band by band, 8 WHMs of 8 rows.
      CHECK(count_opcode(seg, isa::Opcode::RHM) == 2 * 16);
      CHECK(count_rows(seg, isa::Opcode::RHM) == 2 * 2 * (3 + 6 * 4 + 3) * 4);
      CHECK(count_opcode(seg, isa::Opcode::WHM) == 2 * 8);
      CHECK(count_rows(seg, isa::Opcode::WHM) == 2 * 64);
      check_detailed_agrees(o.plan, o.run, x, cfg);
      // Double buffering: with a host link slower than the passes (1 byte a
      // cycle: a band's two loads take 2 * (4 + 16 * N) cycles against its
      // 19 passes of 8 rows), the next band's loads run during this band's
      // passes, so the host DMA is busy most of the time: 81% here, the rest
      // each sample's first load and last band's passes and output (55% and
      // 60% when the scheduler held each load back until its band).
      {
        ArchConfig link = cfg;
        link.host_bytes_per_cycle = 1;
        const auto lo = check_mode(net, x, link, compiler::CompileMode::OnChip);
        const model::Stats& st = lo.run.logs[0].stats;
        const std::uint64_t busy = st.units.at("host_dma").busy_cycles;
        INFO("host DMA busy " << busy << " of " << st.cycles << " cycles");
        CHECK(busy * 100 >= st.cycles * 75);
      }
    }
    {
      INFO("a chain: the host's im2col, convs, max and average pools, a strided depthwise conv read and write spilled maps");
      ArchConfig cfg = config_for(n);
      cfg.acc_rows = 40;  // bands of at most 2 rows of 10 pixels
      const std::size_t c = 2 * n;
      Network net = single({12, 10, 3}, in,
                           with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 3, c}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1));
      net.layers.push_back(with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, c, c}, ActFunction::Relu, out_quant(net), rng, -128), 1, 1, 1, 1));
      net.layers.push_back(with_padding(maxpool(3, 3, 1, 1), 1, 1, 1, 1));
      net.layers.push_back(with_padding(depthwise(3, c, 2, out_quant(net), rng), 1, 1, 1, 1));
      net.layers.push_back(avgpool(2, 2, 2, 2, QuantParams{0.03, 5}));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, c, 5}, ActFunction::Relu, out_quant(net), rng, -128));
      net.layers.push_back(flatten());
      net.layers.push_back(gemm_layer(LayerKind::Dense, {3 * 2 * 5, 7}, ActFunction::None, out_quant(net), rng));
      net.layers[0].name = "c1";
      net.layers[1].name = "c2";
      const Tensor x = random_input({2, 12, 10, 3}, rng);
      cfg.ub_rows = 400;
      const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
      const auto& seg = *o.plan.on_chip_plan;
      INFO(seg.summary);
      CHECK(seg.in_im2col);
      CHECK_THAT(seg.summary, Catch::Contains("the input, the output of layer 'c1', the output of layer 'c2', "
                                              "the output of layer 'pool' (720 rows of host memory)"));
      check_detailed_agrees(o.plan, o.run, x, cfg);
      // Host memory: the inputs (2 samples of ceil(27 / N) im2col planes of
      // 120 pixels), the outputs (2 samples of ceil(7 / N) planes of 1 row)
      // and the three spilled 12x10 maps of 2 planes.
      const std::uint64_t need = 2 * ((27 + n - 1) / n) * 120 + 2 * ((7 + n - 1) / n) + 3 * 2 * 120;
      CHECK(seg.host_rows_used == need);
      cfg.host_rows = need;
      CHECK_NOTHROW(compiler::compile_network(net, 2, cfg, compiler::CompileMode::OnChip));
      cfg.host_rows = need - 1;
      CHECK_THROWS_WITH(compiler::compile_network(net, 2, cfg, compiler::CompileMode::OnChip),
                        Catch::Contains(fmt::format("need {} rows of host memory, there are {}: --config FILE with "
                                                    "{{\"host_rows\": {}}}", need, need - 1, need)));
    }
    {
      INFO("every unified buffer size from the smallest that takes the spilled chain to one that holds it whole");
      // Staging slots, band heights and the set of spilled maps change with
      // the size; each program is checked against the C++ reference, and a
      // size that compiles is followed by only sizes that compile (the fit
      // advice bisects on it).
      ArchConfig cfg = config_for(n);
      cfg.acc_rows = 40;
      const std::size_t c = n + 1;  // two planes, the second one lane wide
      Network net = single({9, 11, 2}, in,
                           with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, 2, c}, ActFunction::Relu, in, rng, -128), 1, 1, 1, 1));
      Layer s2 = with_padding(gemm_layer(LayerKind::Conv2d, {3, 2, c, c}, ActFunction::Relu, out_quant(net), rng, -128), 0, 1, 1, 0);
      s2.stride_h = 2;
      net.layers.push_back(s2);
      net.layers.push_back(with_padding(avgpool(2, 3, 1, 2, QuantParams{0.03, 5}), 1, 0, 1, 1));
      net.layers.push_back(gemm_layer(LayerKind::Conv2d, {1, 1, c, 3}, ActFunction::None, out_quant(net), rng, 4));
      const Tensor x = random_input({2, 9, 11, 2}, rng);
      bool compiled = false;
      std::size_t spilled = 0, whole = 0;
      for (std::uint64_t ub = 60; ub <= 1500; ub += 7) {
        cfg.ub_rows = ub;
        INFO("ub_rows " << ub);
        bool ok = true;
        try {
          compiler::compile_network(net, 2, cfg, compiler::CompileMode::OnChip);
        } catch (const compiler::CompileError&) {
          ok = false;
        }
        CHECK((ok || !compiled));
        compiled = compiled || ok;
        if (!ok) continue;
        const auto o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
        const bool spill = o.plan.on_chip_plan->summary.find("spilled") != std::string::npos;
        (spill ? spilled : whole) += 1;
        if (spill && spilled % 8 == 1) check_detailed_agrees(o.plan, o.run, x, cfg);
      }
      CHECK(spilled >= 10);
      CHECK(whole >= 10);
    }
    {
      INFO("maps that only adds read do not spill: still refused");
      ArchConfig cfg = config_for(n);
      cfg.ub_rows = 100;
      Network net = single({8, 8, n}, in, with_padding(gemm_layer(LayerKind::Conv2d, {3, 3, n, n}, ActFunction::None, in, rng, 9), 1, 1, 1, 1));
      Layer b = gemm_layer(LayerKind::Conv2d, {1, 1, n, n}, ActFunction::Relu, in, rng, -128);
      b.inputs = {0};
      net.layers.push_back(b);
      net.layers.push_back(add_layer(1, 2, ActFunction::Relu, {net.layers[0].output.scale * 1.5, -100}));
      CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg, compiler::CompileMode::OnChip),
                        Catch::Contains("the live feature maps of 1 sample need more than the 100 unified buffer rows"));
    }
  }
}

// --- Attention: the softmax layer (docs/quantization.md, "Softmax and attention") ---

TEST_CASE("softmax on chip: one SMAX per chunk over every pixel's channels, near the float softmax",
          "[layers][attention][softmax]") {
  std::mt19937 rng(29);
  for (unsigned n : {4u, 8u}) {
    const ArchConfig cfg = config_for(n);
    for (std::size_t groups : {1u, 3u})
      for (std::size_t short_by : {0u, 3u})  // channels G*N, or fewer: NGEO's token width
      for (const std::vector<std::size_t>& pixels : {std::vector<std::size_t>{}, std::vector<std::size_t>{1, 5}})
        for (const QuantParams& in : {QuantParams{0.05, -7}, QuantParams{0.2, 20}}) {
          const std::size_t c = groups * n - short_by;
          std::vector<std::size_t> shape = pixels;
          shape.push_back(c);
          INFO("N = " << n << ", shape " << fmt::format("{}", fmt::join(shape, "x")) << ", input scale " << in.scale);
          Layer sm;
          sm.kind = LayerKind::Softmax;
          Network net = single(shape, in, sm);
          std::vector<std::size_t> batch_shape{3};
          batch_shape.insert(batch_shape.end(), shape.begin(), shape.end());
          const Tensor x = random_input(batch_shape, rng);
          const Outcome o = check_mode(net, x, cfg, compiler::CompileMode::OnChip);
          // One SMAX for the chunk (the whole batch here), its NGEO naming the planes.
          std::size_t smax = 0;
          for (const auto& instr : o.plan.program(0).program.code) {
            smax += instr.opcode == isa::Opcode::SMAX;
            if (instr.opcode == isa::Opcode::NGEO) {
              CHECK(instr.operands[0] == static_cast<std::int64_t>(groups));
              CHECK(instr.operands[3] == static_cast<std::int64_t>(short_by ? c : 0));
            }
          }
          CHECK(smax == 1);
          // Against the float softmax of the dequantized input: within 3 output steps (1/256 each:
          // the output's rounding and I-BERT's polynomial, docs/quantization.md's table).
          double worst = 0.0;
          for (std::size_t t = 0; t < x.data.size(); t += c) {
            double m = -1e300, sum = 0.0;
            for (std::size_t i = 0; i < c; ++i) m = std::max(m, in.scale * (x.data[t + i] - in.zero_point));
            for (std::size_t i = 0; i < c; ++i) sum += std::exp(in.scale * (x.data[t + i] - in.zero_point) - m);
            for (std::size_t i = 0; i < c; ++i) {
              const double p = std::exp(in.scale * (x.data[t + i] - in.zero_point) - m) / sum;
              worst = std::max(worst, std::fabs((o.run.output.data[t + i] + 128) / 256.0 - p));
            }
          }
          CHECK(worst <= 3.0 / 256.0);
        }
  }
}

TEST_CASE("softmax: refused by the host-step compiler", "[layers][attention][softmax]") {
  const ArchConfig cfg = config_for(8);
  Layer sm;
  sm.kind = LayerKind::Softmax;
  const Network net = single({12}, QuantParams{0.05, 0}, sm);
  CHECK_THROWS_WITH(compiler::compile_network(net, 2, cfg, compiler::CompileMode::Segments),
                    Catch::Contains("the host-step compiler has no softmax"));
}

TEST_CASE("matmul of two activations: the C++ reference against the closed form",
          "[layers][attention][matmul]") {
  std::mt19937 rng(30);
  const QuantParams qa{0.03, -9}, qb{0.05, 0}, qo{0.4, 3};
  for (bool transpose : {true, false}) {
    INFO("transpose_b " << transpose);
    // A: the network input, 1 x 4 x k (4 tokens of k features); B: a 1x1 conv of A with output
    // zero point 0, 1 x 4 x cb. With transpose_b B's channels are A's features (cb = k = 3) and
    // the output is 1 x 4 x 4; without, B's 4 tokens are A's features (k = 4), the output 1 x 4 x cb.
    const std::size_t k = transpose ? 3 : 4, cb = transpose ? 3 : 5;
    Network net;
    net.input_shape = {1, 4, k};
    net.input = qa;
    Layer conv = gemm_layer(LayerKind::Conv2d, {1, 1, k, cb}, ActFunction::None, qa, rng, 0);
    conv.output = qb;
    Layer mm;
    mm.kind = LayerKind::MatMul;
    mm.transpose_b = transpose;
    mm.alpha = 0.5;
    mm.output = qo;
    mm.inputs = {0, 1};
    net.layers = {conv, mm};
    const auto infos = compiler::infer_network(net);
    REQUIRE(infos[2].shape == std::vector<std::size_t>{1, 4, transpose ? 4u : cb});
    const Tensor x = random_input({2, 1, 4, k}, rng);
    const std::vector<Tensor> outs = compiler::reference_network_all(net, x);
    const Tensor& b = outs[0];
    const Tensor& y = outs[1];
    // The closed form: q(sum_f (a - z_a) B[f][j]) with the real multiplier alpha s_a s_b / s_o,
    // rounded to nearest (ties up) in double: exact for these small sums except at ties.
    std::size_t bad = 0;
    const std::size_t cols = transpose ? 4 : cb;
    for (std::size_t s = 0; s < 2; ++s)
      for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          std::int64_t acc = 0;
          for (std::size_t f = 0; f < k; ++f)
            acc += (x.data[(s * 4 + i) * k + f] - qa.zero_point) *
                   std::int64_t{transpose ? b.data[(s * 4 + j) * cb + f] : b.data[(s * 4 + f) * cb + j]};
          const double real = 0.5 * qa.scale * qb.scale / qo.scale * static_cast<double>(acc);
          const double want = std::clamp(std::floor(real + 0.5) + qo.zero_point, -128.0, 127.0);
          bad += std::fabs(y.data[(s * 4 + i) * cols + j] - want) > 0.0;
        }
    CHECK(bad == 0);
  }
  // B's zero point must be 0.
  Network net;
  net.input_shape = {1, 4, 3};
  net.input = qa;
  Layer mm;
  mm.kind = LayerKind::MatMul;
  mm.transpose_b = true;
  mm.output = qo;
  mm.inputs = {0, 0};
  CHECK_THROWS_WITH(compiler::infer_network((net.layers = {mm}, net)), Catch::Contains("zero point is -9: it must be 0"));
}
