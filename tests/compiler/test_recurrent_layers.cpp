// The dense layers recurrent networks are unrolled into (docs/quantization.md,
// "Recurrent layers"): a dense layer of several inputs (each at its own zero
// point, K rows side by side) and a dense layer of one pixel of a map,
// compiled on chip at N = 4 (K and the outputs in several tiles), simulated
// and compared bit for bit with the C++ int8 reference; the reference itself
// against the closed form of int32 outputs; the graph checks' errors.
#include <catch2/catch.hpp>

#include <array>
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

Layer dense(std::vector<std::size_t> inputs, std::size_t k, std::size_t nout, std::mt19937& rng,
            std::int64_t pixel = -1) {
  std::uniform_int_distribution<int> w(-127, 127), b(-3000, 3000);
  Layer l;
  l.kind = LayerKind::Dense;
  l.inputs = std::move(inputs);
  l.pixel = pixel;
  l.weight_shape = {k, nout};
  for (std::size_t i = 0; i < k * nout; ++i) l.weights.push_back(static_cast<std::int8_t>(w(rng)));
  for (std::size_t o = 0; o < nout; ++o) l.bias.push_back(b(rng));
  l.weight_scale = 0.004;
  l.output = {0.05, static_cast<std::int32_t>(std::uniform_int_distribution<int>(-20, 20)(rng))};
  return l;
}

// An LSTM-step-like graph: h = dense(pixel t of the input); g = dense(pixel
// t2, h) sigmoid; y = dense(g, h) with int32 output.
Network step_net(std::size_t length, std::size_t d, std::size_t h, std::mt19937& rng) {
  Network net;
  net.name = "steps";
  net.input_shape = {1, length, d};
  net.input = {0.03, 7};
  const auto t = static_cast<std::int64_t>(length - 1);
  net.layers.push_back(dense({0}, d, h, rng, 0));
  net.layers.push_back(dense({0, 1}, d + h, h, rng, t));
  net.layers.back().act = model::ActFunction::Sigmoid;
  net.layers.push_back(dense({2, 1}, 2 * h, 3, rng));
  net.layers.back().int32_output = true;
  for (std::size_t i = 0; i < net.layers.size(); ++i) net.layers[i].name = "l" + std::to_string(i);
  return net;
}

}  // namespace

TEST_CASE("dense layers of several inputs and of one pixel run on chip as the reference", "[layers][recurrent]") {
  const ArchConfig cfg = preset_config("small4");
  std::mt19937 rng(29);
  for (const auto& [length, d, h] : std::vector<std::array<std::size_t, 3>>{{1, 3, 2}, {3, 5, 6}, {5, 9, 7}, {2, 4, 13}}) {
    INFO("L " << length << ", D " << d << ", H " << h);
    const Network net = step_net(length, d, h, rng);
    const Tensor x = random_input(net, 3, rng);
    test::check_on_chip_matches_reference(net, x, cfg);
  }
}

TEST_CASE("the reference's dense layer of two inputs is their K rows side by side", "[layers][recurrent]") {
  std::mt19937 rng(3);
  Network net;
  net.input_shape = {1, 3, 2};
  net.input = {0.1, -5};
  // Layer 0 copies nothing: a dense of pixel 2 with int8 output; layer 1 reads (pixel 1, layer 0).
  net.layers.push_back(dense({0}, 2, 4, rng, 2));
  net.layers.push_back(dense({0, 1}, 6, 2, rng, 1));
  net.layers.back().int32_output = true;
  const Tensor x = random_input(net, 2, rng);
  const std::vector<Tensor> all = compiler::reference_network_all(net, x);
  const Layer& l = net.layers[1];
  const std::int32_t z1 = net.layers[0].output.zero_point;
  for (std::size_t s = 0; s < 2; ++s)
    for (std::size_t o = 0; o < 2; ++o) {
      std::int64_t acc = l.bias[o];
      for (std::size_t c = 0; c < 2; ++c) acc += (x.data[s * 6 + 1 * 2 + c] - (-5)) * l.weights[c * 2 + o];
      for (std::size_t j = 0; j < 4; ++j) acc += (all[0].data[s * 4 + j] - z1) * l.weights[(2 + j) * 2 + o];
      CHECK(all[1].data[s * 2 + o] == acc);
    }
}

TEST_CASE("the graph checks a dense layer's pixel", "[layers][recurrent]") {
  std::mt19937 rng(1);
  Network net;
  net.input_shape = {1, 3, 2};
  net.layers.push_back(dense({0}, 2, 2, rng, 3));
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("pixel 3 is outside the 1x3x2 input"));
  net.input_shape = {6};
  net.layers[0].pixel = 0;
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("reading pixel 0 needs an HxWxC input"));
  net.layers[0].pixel = -1;
  net.layers[0].weight_shape = {5, 2};
  net.layers[0].weights.assign(10, 1);
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("expect 5 input features, the input has 6"));
  Layer add;
  add.kind = LayerKind::Add;
  add.pixel = 0;
  add.inputs = {0, 0};
  net.layers = {add};
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("only a dense layer reads one pixel"));
}
