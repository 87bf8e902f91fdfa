// The TPU: the units of docs/microarchitecture.md wired together on one
// clock, and the entry point that runs a program on them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"

namespace tpu::model {

struct RunOptions {
  Cycle max_cycles = 100'000'000;
  std::string vcd_path;  // empty: no waveform
};

// Runs `prog` on a machine configured by `cfg` whose memories start as
// `mem`, which holds the final state afterwards. Each call builds a fresh
// SystemC simulation.
RunLog run_program(const ArchConfig& cfg, const isa::Program& prog, Memories& mem,
                   const RunOptions& opts = {});

}  // namespace tpu::model
