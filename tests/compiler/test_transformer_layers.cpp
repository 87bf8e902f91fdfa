// The transformer layers on the activation unit (docs/quantization.md,
// "Transformer layers"): layernorm and gelu compiled on chip at N = 4 (tokens
// of one and of several UB rows, of 6 and 3 values (NGEO's width), maps and 1-D tensors, several input zero
// points), simulated and compared bit for bit with the C++ int8 reference;
// the reference against float LayerNorm and GELU on the dequantized inputs
// (within two output steps); the graph's and the compiler's errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "compiler/layer_reference.h"
#include "compiler/network.h"
#include "config/arch_config.h"
#include "model/tpu.h"
#include "runtime/run_network.h"
#include "support/on_chip_check.h"

namespace {

using namespace tpu;
using compiler::Layer;
using compiler::LayerKind;
using compiler::Network;
using compiler::Tensor;
using test::random_input;

Layer norm_layer(LayerKind kind, std::vector<std::size_t> inputs, compiler::QuantParams out) {
  Layer l;
  l.kind = kind;
  l.inputs = std::move(inputs);
  l.output = out;
  l.eps = 1e-3;
  return l;
}

// input -> layernorm -> gelu (the output), and a gelu of the input added in
// (the add on the array, so the layers' outputs are read by later layers).
Network norm_net(std::vector<std::size_t> shape, std::int32_t zin) {
  Network net;
  net.name = "norm";
  net.input_shape = std::move(shape);
  net.input = {0.04, zin};
  net.layers.push_back(norm_layer(LayerKind::LayerNorm, {0}, {3.0 / 127, 3}));
  net.layers.push_back(norm_layer(LayerKind::Gelu, {1}, {2.0 / 127, -60}));
  net.layers.push_back(norm_layer(LayerKind::Gelu, {0}, {0.02, -100}));
  Layer add;
  add.kind = LayerKind::Add;
  add.inputs = {2, 3};
  add.output = {0.03, -20};
  net.layers.push_back(add);
  for (std::size_t i = 0; i < net.layers.size(); ++i) net.layers[i].name = "l" + std::to_string(i);
  return net;
}

double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }

}  // namespace

TEST_CASE("layernorm and gelu run on chip as the reference", "[layers][transformer]") {
  const ArchConfig cfg = preset_config("small4");
  std::mt19937 rng(29);
  using Case = std::pair<std::vector<std::size_t>, std::int32_t>;
  for (const auto& [shape, zin] : std::vector<Case>{{{1, 5, 4}, 0}, {{1, 7, 12}, -9}, {{1, 4, 6}, 2}, {{2, 3, 3}, -1}, {{3, 2, 8}, 40}, {{16}, 5}}) {
    INFO("shape " << shape.size() << "-D, C " << shape.back() << ", input zero point " << zin);
    const Network net = norm_net(shape, zin);
    const Tensor x = random_input(net, 3, rng);
    test::check_on_chip_matches_reference(net, x, cfg);
  }
}

TEST_CASE("the reference's layernorm and gelu are within two output steps of float", "[layers][transformer]") {
  std::mt19937 rng(7);
  const Network net = norm_net({1, 6, 32}, 11);
  const Tensor x = random_input(net, 4, rng);
  const std::vector<Tensor> all = compiler::reference_network_all(net, x);
  const double s = net.input.scale;
  const auto& ln = net.layers[0].output;
  const auto& ge = net.layers[2].output;
  double worst_ln = 0, worst_ge = 0;
  for (std::size_t t = 0; t < x.data.size() / 32; ++t) {
    double mean = 0, var = 0;
    for (std::size_t k = 0; k < 32; ++k) mean += s * (x.data[t * 32 + k] - 11);
    mean /= 32;
    for (std::size_t k = 0; k < 32; ++k) var += std::pow(s * (x.data[t * 32 + k] - 11) - mean, 2);
    var /= 32;
    for (std::size_t k = 0; k < 32; ++k) {
      const std::size_t e = t * 32 + k;
      const double xf = s * (x.data[e] - 11);
      const double want_ln = std::clamp((xf - mean) / std::sqrt(var + 1e-3), ln.scale * (-128 - ln.zero_point),
                                        ln.scale * (127 - ln.zero_point));
      worst_ln = std::max(worst_ln, std::fabs(ln.scale * (all[0].data[e] - ln.zero_point) - want_ln) / ln.scale);
      const double want_ge = std::clamp(gelu(xf), ge.scale * (-128 - ge.zero_point), ge.scale * (127 - ge.zero_point));
      worst_ge = std::max(worst_ge, std::fabs(ge.scale * (all[2].data[e] - ge.zero_point) - want_ge) / ge.scale);
    }
  }
  INFO("LayerNorm " << worst_ln << " steps, GELU " << worst_ge << " steps");
  CHECK(worst_ln <= 2.0);
  CHECK(worst_ge <= 2.0);
}

TEST_CASE("the graph and the compiler check layernorm and gelu", "[layers][transformer]") {
  Network net = norm_net({1, 3, 8}, 0);
  net.layers[0].eps = -1;
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("layer 'l0': LayerNorm epsilon -1 is not >= 0"));
  net = norm_net({1, 3, 8}, 0);
  net.layers[1].act = model::ActFunction::Relu;
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("layer 'l1': a gelu has no activation"));
  net = norm_net({1, 3, 8}, 0);
  net.layers[2].int32_output = true;
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("layer 'l2': a gelu has int8 output"));
  net = norm_net({1, 3, 8}, 0);
  net.input.scale = 1e-7;  // even at pre-shift 0, GELU's k1 = 1 / (|a| S'^2) is past 2^30
  net.layers[0].eps = 0;   // (and the LayerNorm's k0 fits)
  CHECK_THROWS_WITH(compiler::infer_network(net),
                    Catch::Contains("layer 'l2': input scale 1e-07 is too small for the integer GELU"));
}
