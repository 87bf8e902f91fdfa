// A network's batch costs, compiled and run once per batch size (network_cost.h).
#include "serve/network_cost.h"

#include <fmt/format.h>

#include <random>
#include <stdexcept>
#include <utility>

#include "compiler/shapes.h"
#include "model/energy.h"
#include "model/tpu.h"
#include "run/network_run.h"

namespace tpu::serve {

NetworkBatchCost::NetworkBatchCost(const ArchConfig& cfg, compiler::Network net,
                                   std::optional<compiler::Tensor> samples, std::uint64_t seed,
                                   sweep::EngineOptions engine)
    : cfg_(cfg), net_(std::move(net)), engine_(std::move(engine)) {
  const std::vector<compiler::TensorInfo> infos = compiler::infer_network(net_);
  input_bytes_ = compiler::element_count(net_.input_shape);
  output_bytes_ = compiler::element_count(infos.back().shape) * (infos.back().int32 ? 4 : 1);
  if (samples) {
    const std::vector<std::size_t>& shape = samples->shape;
    if (shape.size() != net_.input_shape.size() + 1 ||
        !std::equal(net_.input_shape.begin(), net_.input_shape.end(), shape.begin() + 1))
      throw std::invalid_argument(fmt::format("the samples have shape ({}), the network takes (B, {})",
                                              fmt::join(shape, ", "), fmt::join(net_.input_shape, ", ")));
    if (samples->batch() == 0) throw std::invalid_argument("no samples");
    samples_ = std::move(*samples);
    return;
  }
  // The cycles do not depend on the values (no data-dependent timing in the
  // model); random samples keep the run's data like a real request's.
  constexpr std::size_t kRandomSamples = 16;
  samples_.shape = {kRandomSamples};
  samples_.shape.insert(samples_.shape.end(), net_.input_shape.begin(), net_.input_shape.end());
  std::mt19937_64 gen(seed);
  samples_.data.resize(kRandomSamples * input_bytes_);
  for (std::int32_t& v : samples_.data) v = static_cast<std::int32_t>(gen() & 0xff) - 128;
}

double NetworkBatchCost::pcie_bytes_per_s() const {
  return static_cast<double>(cfg_.host_bytes_per_cycle) * static_cast<double>(cfg_.clock_mhz) * 1e6;
}

compiler::Tensor NetworkBatchCost::batch_input(std::size_t size) const {
  compiler::Tensor x;
  x.shape = samples_.shape;
  x.shape[0] = size;
  const std::size_t per = input_bytes_;
  x.data.resize(size * per);
  for (std::size_t i = 0; i < size; ++i) {
    const auto from = samples_.data.begin() + static_cast<std::ptrdiff_t>((i % samples_.batch()) * per);
    std::copy(from, from + static_cast<std::ptrdiff_t>(per), x.data.begin() + static_cast<std::ptrdiff_t>(i * per));
  }
  return x;
}

BatchCost NetworkBatchCost::operator()(std::size_t size) {
  if (const auto it = cache_.find(size); it != cache_.end()) return it->second;
  if (on_new_size) on_new_size(size);
  run::NetworkRunSpec spec;
  spec.sim = [this](std::size_t, std::size_t, const compiler::ProgramPlan& seg, model::Memories& mem) {
    return sweep::run_engine(cfg_, seg.program, mem, engine_);
  };
  const run::NetworkOutcome o = run::compile_and_run(cfg_, net_, batch_input(size), spec);
  if (o.run.fault) {
    const model::RunLog& log = o.run.logs.back();
    throw BatchFault(fmt::format("the network faulted at batch {}: {}", size,
                                         log.fault ? log.fault->message() : std::string("unknown fault")));
  }
  run::RunTotals totals;
  for (const model::RunLog& log : o.run.logs) totals.add(log);
  BatchCost cost;
  cost.cycles = totals.cycles;
  cost.seconds = totals.seconds(cfg_);
  // The die's energy while it runs the batch (docs/energy.md): dynamic events
  // plus static power over the batch's cycles.
  cost.energy_j = model::energy_of(cfg_, totals.events, totals.cycles).total_j;
  cache_.emplace(size, cost);
  return cost;
}

}  // namespace tpu::serve
