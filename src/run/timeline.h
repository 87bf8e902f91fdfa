// --timeline: a run as a Chrome trace (the JSON trace event format that
// Perfetto's UI and chrome://tracing open), made from the run's records:
//
// - one process per program (a network runs several), one track per unit:
//   controller, host_dma, weight_dma, systolic_array, activation_unit; a
//   unit whose instructions overlap in time (the array's MMCs drain while
//   the next one reads rows, RWs wait in the weight channel together) gets
//   more tracks, "systolic_array #2" and so on, each instruction on the
//   first track free at its start;
// - a slice per unit instruction from its start cycle to its completion
//   cycle (inclusive), named by its disassembly, with its pc, issue, start
//   and completion cycles, its rows (RHM, WHM, MMC, ACT, POOL) and its layer
//   (for a network);
// - on the controller's track, a one-cycle slice per issue and a slice per
//   stall run named by its cause (the `stall` lines of --trace);
// - counters: the array's rows in flight (read from the UB, not yet written
//   to the accumulators: row i of an MMC started at s is in flight in cycles
//   s + i .. s + i + 2N), the weight FIFO's occupancy (tiles arrived from
//   weight memory that have not started to shift into the shadow;
//   model/fifo_occupancy.h) and weight tiles requested (RW issued, not yet taken
//   by an MMC.S switch).
// Time is the cycle at the configured clock: cycle t starts at t / clock_mhz
// microseconds (the format's unit) and lasts 1 / clock_mhz.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/run_log.h"

namespace tpu::run {

class Timeline {
 public:
  explicit Timeline(const ArchConfig& cfg) : cfg_(cfg) {}

  // Adds a program's run as process `name`, its cycle 0 at `offset` cycles
  // (programs of a network run one after the other). `layer_of(pc)` names
  // the instruction's layer ("" for none).
  void add_run(const std::string& name, const isa::Program& prog, const model::RunLog& log,
               std::uint64_t offset = 0,
               const std::function<std::string(std::uint32_t)>& layer_of = nullptr);

  // The whole trace as JSON text: {"traceEvents": [...], ...}.
  std::string json() const;

 private:
  const ArchConfig& cfg_;
  nlohmann::json events_ = nlohmann::json::array();
  unsigned processes_ = 0;
};

}  // namespace tpu::run
