// Constrained-random programs for co-simulating the RTL against the model.
//
// Programs are valid and stay clear of faults: every range lies inside small
// windows of each memory, chosen so that instructions of different units
// overlap (RAW, WAR and WAW hazards), MMCs accumulate into each other's rows,
// RWs burst against the FIFO depth, MMC.S waits for tiles, SETQ changes the
// requantization between ACTs, and every flag appears. RW is issued only while
// the FIFO and the shadow can take the tile without a switch, and MMC.S only
// after an RW that no switch has taken, so no program deadlocks.
#pragma once

#include <cstdint>
#include <random>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"

namespace tpu::rtl {

// The memory windows random programs use.
struct Windows {
  std::uint64_t host_rows = 256;
  std::uint64_t ub_rows = 48;
  std::uint64_t acc_rows = 48;
  std::uint64_t weight_tiles = 8;
  std::uint64_t max_rows = 12;  // rows per instruction
};

isa::Program random_program(const ArchConfig& cfg, std::uint64_t seed, const Windows& w = {});

// Fills the windows of `mem` with values drawn from `seed`.
void random_memories(model::Memories& mem, std::uint64_t seed, const Windows& w = {});

}  // namespace tpu::rtl
