// Running a network plan: each step in order, a host step on the host
// (host_ops.h) or a program on the TPU through the caller's runner with its
// host memory image (host_image.h), and the per-layer statistics of the run
// (layer_stats.h). The runtime's entry, used by the tools and the Python
// module; the compilers that make plans never include it.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "compiler/network.h"
#include "config/arch_config.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "runtime/host_ops.h"
#include "runtime/layer_stats.h"

namespace tpu::compiler {

struct NetworkRun {
  Tensor output;
  std::vector<model::RunLog> logs;  // one per program run
  std::vector<LayerStats> layers;
  bool fault = false;  // a program faulted; `logs.back()` says where
};

// Runs program `k` on `mem` (which holds its host and weight images).
using ProgramRunner = std::function<model::RunLog(std::size_t k, const ProgramPlan&, model::Memories&)>;

NetworkRun run_network(const NetworkPlan& plan, const Tensor& input, const ArchConfig& cfg,
                       const ProgramRunner& runner);

}  // namespace tpu::compiler
