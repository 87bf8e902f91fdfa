// What the compiler's layer tests share: a random int8 input batch for a
// network, and the check that its on-chip program, simulated, gives the C++
// int8 reference's output bit for bit.
#pragma once

#include <catch2/catch.hpp>

#include <random>

#include "compiler/layer_reference.h"
#include "compiler/network.h"
#include "config/arch_config.h"
#include "model/tpu.h"
#include "runtime/run_network.h"

namespace tpu::test {

// A batch of `batch` samples of the network's input shape, uniform in -128..127.
inline compiler::Tensor random_input(const compiler::Network& net, std::size_t batch, std::mt19937& rng) {
  compiler::Tensor x;
  x.shape = {batch};
  std::size_t count = batch;
  for (std::size_t d : net.input_shape) {
    x.shape.push_back(d);
    count *= d;
  }
  std::uniform_int_distribution<int> v(-128, 127);
  for (std::size_t i = 0; i < count; ++i) x.data.push_back(v(rng));
  return x;
}

// Compiles `net` for x's batch (the plan must be on chip), runs it on the model
// and checks its output against compiler::reference_network.
inline void check_on_chip_matches_reference(const compiler::Network& net, const compiler::Tensor& x,
                                            const ArchConfig& cfg) {
  const compiler::NetworkPlan plan = compiler::compile_network(net, x.batch(), cfg);
  REQUIRE(plan.on_chip_plan);
  const compiler::NetworkRun run = compiler::run_network(
      plan, x, cfg, [&](std::size_t, const compiler::ProgramPlan& p, model::Memories& mem) {
        return model::run_program(cfg, p.program, mem);
      });
  REQUIRE_FALSE(run.fault);
  const compiler::Tensor want = compiler::reference_network(net, x);
  CHECK(run.output.shape == want.shape);
  CHECK(run.output.data == want.data);
}

}  // namespace tpu::test
