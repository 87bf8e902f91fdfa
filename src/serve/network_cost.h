// The TPU cost of a batch of a network's requests (docs/serving.md, "TPU
// time"): the network compiled for that batch size and run once on the
// cycle-accurate model through the run layer (run/network_run.h), cached per
// batch size. It reads the network, the configuration and the engine's
// options, and the requests' samples (or makes random int8 ones from a seed);
// it produces serve::BatchCost (cycles, seconds at the configured clock; the
// die's energy over the batch from model::energy_of) and the bytes a
// request moves over PCIe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "compiler/network.h"
#include "config/arch_config.h"
#include "run/sweep_workload.h"
#include "serve/serving_sim.h"

namespace tpu::serve {

// A batch's program faulted: what() says at which batch size and where.
class BatchFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NetworkBatchCost {
 public:
  // `samples`: the requests' inputs, int8, of shape (S, input shape), used
  // in turn (request i of a batch is sample i mod S); without them, random
  // int8 samples from `seed`. Throws std::invalid_argument for samples of
  // another shape or none.
  NetworkBatchCost(const ArchConfig& cfg, compiler::Network net, std::optional<compiler::Tensor> samples,
                   std::uint64_t seed, sweep::EngineOptions engine);

  // Compiles and runs a batch of `size` the first time (CompileError for a
  // network that does not compile; BatchFault for a program fault),
  // then returns the cached cost.
  BatchCost operator()(std::size_t size);

  // Called before each new batch size is compiled and run (a progress line).
  std::function<void(std::size_t size)> on_new_size;

  std::uint64_t input_bytes_per_request() const { return input_bytes_; }
  std::uint64_t output_bytes_per_request() const { return output_bytes_; }
  // The host DMA's bandwidth, the PCIe link's (docs/microarchitecture.md).
  double pcie_bytes_per_s() const;
  const std::map<std::size_t, BatchCost>& costs() const { return cache_; }

 private:
  compiler::Tensor batch_input(std::size_t size) const;

  ArchConfig cfg_;
  compiler::Network net_;
  compiler::Tensor samples_;
  sweep::EngineOptions engine_;
  std::uint64_t input_bytes_ = 0;
  std::uint64_t output_bytes_ = 0;
  std::map<std::size_t, BatchCost> cache_;
};

}  // namespace tpu::serve
