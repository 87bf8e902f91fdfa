// Constrained-random programs for co-simulating the RTL against the model.
//
// Programs are valid and stay clear of faults: every range lies inside small
// windows of each memory, chosen so that instructions of different units
// overlap (RAW, WAR and WAW hazards), MMCs accumulate into each other's rows,
// RWs burst against the FIFO depth, MMC.S waits for tiles, SETQ changes the
// requantization between ACTs, and every flag appears. RW is issued only while
// the FIFO and the shadow can take the tile without a switch, and MMC.S only
// after an RW that no switch has taken, so no program deadlocks.
//
// CMAP, CSTR and CTAP set random convolution geometries between MMC.Cs: maps
// that mostly fit the UB window (so an MMC.C's whole-map read range overlaps
// the other units' rows), now and then one that reaches past the window or
// past the UB (then no MMC.C follows until a CMAP makes the map fit; plain
// MMCs must not care); strides 1..3 and rarely up to 255; origins that start
// before the map, inside it and past it, rarely at the int16 extremes; pads of
// every sign. An MMC.C is emitted only while the map, from its ub_row, fits
// the unified buffer.
//
// CWIN sets pooling windows of 1..4 each way, now and then up to 16 or 255 on
// a side, and POOL / POOL.A pool the current map (the same registers) into
// rows of the UB window: output rows that overlap the map, windows partly or
// wholly in the padding (origins before and past the map), and, after one
// ACT in four, a POOL over that ACT's output rows. A POOL, too, is emitted
// only while the map fits the unified buffer; its rows times its window
// stay within 1024 cycles (at least one row).
//
// VSRC (operand B in the UB window, broadcast or not, zero points of every
// sign) and VSCL (factors small, near 2^14 or at the int16 extremes, every
// operation) set the vector registers between VECs of every function, whose
// operands and outputs lie in the same UB window as everything else.
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

// `cfg` with the memory channels' timing drawn from `seed`: latencies from 0
// to twice cfg's (at least 8), bandwidths from N / 4 (at least 1) to the
// widest the RTL build's ports take (`host_max`, `weight_max`: rtl::port_widths),
// each now and then exactly cfg's own, the widest or the narrowest.
ArchConfig random_timing(const ArchConfig& cfg, std::uint64_t host_max, std::uint64_t weight_max,
                         std::uint64_t seed);

// Fills the windows of `mem` with values drawn from `seed`.
void random_memories(model::Memories& mem, std::uint64_t seed, const Windows& w = {});

}  // namespace tpu::rtl
