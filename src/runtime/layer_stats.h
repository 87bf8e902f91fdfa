// Per-layer statistics of a network run: each program's cycles, array work
// and traffic charged to the layers its instructions belong to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/network.h"
#include "config/arch_config.h"
#include "model/run_log.h"

namespace tpu::compiler {

// Per-layer figures of a run. A cycle of a program in which the array reads
// a row is charged to that MMC's layer, any other cycle to the layer of the
// oldest instruction not yet completed in it; so the layers' cycles of a
// program add up to its total cycles, and a layer's cycles are at least its
// MMC rows (utilization at most 100%).
struct LayerStats {
  std::optional<std::size_t> segment;  // nullopt: a host step (no TPU cycles)
  std::uint64_t cycles = 0;
  std::uint64_t instructions = 0;
  std::uint64_t array_macs = 0;   // rows * N * N over its MMCs
  std::uint64_t useful_macs = 0;  // the layer's own multiply-accumulates
  std::uint64_t mmc_rows = 0;     // its MMCs' rows: the array's active cycles for it
  // Bytes its instructions move: RHM from host memory, WHM to it (4N per
  // accumulator row for WHM.A), RW from weight memory (N*N per tile).
  std::uint64_t host_read_bytes = 0, host_write_bytes = 0, weight_bytes = 0;
  // The TPUv1 counters' idle-array categories (model/perf_counters.h) whose
  // waiting instruction belongs to the layer. Its cycles are mmc_rows +
  // weight stall + weight shift + the rest (non-matrix).
  std::uint64_t weight_stall_cycles = 0, weight_shift_cycles = 0;
  std::uint64_t raw_stall_cycles = 0, input_data_stall_cycles = 0;
  // The energy model's events of its instructions (model::instruction_events;
  // the MACs' split into active and idle PEs is left to the report).
  model::EnergyEvents events;
};

// The useful multiply-accumulates of layer i for the plan's batch.
std::uint64_t layer_useful_macs(const NetworkPlan& plan, std::size_t layer);

// Charges one program's run (its log, and its weight memory from
// `weights`) to the layers of its instructions.
void charge_program(const ArchConfig& cfg, const ProgramPlan& prog, const model::RunLog& log,
                    const std::int8_t* weights, std::vector<LayerStats>& layers);

}  // namespace tpu::compiler
