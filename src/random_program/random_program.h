// Constrained-random valid programs, for the model's differential tests
// (tests/model: the fast path against the detailed one, the memory ports,
// the FIFO occupancy) and for co-simulating the RTL against the model
// (tpu-cosim).
//
// One generator (program_draw.h: the instruction builder, the rule that keeps
// programs clear of deadlocks, the registers followed in program order) with
// two instruction mixes, each drawing for a seed the programs its users have
// always run:
// - RandomProgramGenerator (machine_mix.cpp): a small machine of its own for
//   every program, ranges from a few narrow windows of its memories,
//   optionally a fault, optionally MMCs of thousands of rows;
// - random_program (window_mix.cpp): programs for a given machine, ranges inside
//   fixed windows of its memories, every register value up to the extremes,
//   never a fault; with random_timing and random_memories, tpu-cosim's inputs.
//
// Both make programs dense in what makes timing interesting: instructions of
// different units overlapping (RAW, WAR and WAW hazards), MMCs accumulating
// into each other's rows, RWs bursting against the FIFO depth, MMC.S waiting
// for tiles, SETQ between ACTs, convolution and pooling registers changing
// between MMC.Cs and POOLs, the vector registers between VECs, every flag.
// RW is drawn only while the FIFO and the shadow can take the tile without a
// switch, and MMC.S only after an RW that no switch has taken, so no program
// deadlocks unless a fault is asked for.
#pragma once

#include <cstdint>
#include <memory>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"

namespace tpu::testing {

class MachineMix;

struct RandomProgram {
  ArchConfig cfg;
  isa::Program program;
};

// Programs on random small machines, for differential tests of the model.
//
// Every program has a machine of its own (N of 4 to 33, random latencies and
// bandwidths, a FIFO of 1 to 4 tiles, a UB of 48 rows) and mixes every
// instruction and flag: ranges drawn from a few narrow windows; CMAP, CSTR
// and CTAP with small geometries (maps overlapping the other instructions'
// ranges, origins negative and beyond the map, output rows wider than the
// map, strides 1..3, pads of every sign) and MMC.C with every combination of
// S and O; CWIN with windows of 1 to 3 pixels each way and POOL and POOL.A of
// those maps (outputs anywhere, their own map included); VSRC (with and
// without broadcast) and VSCL (factors of every sign, small and at the int16
// limits, every operation) between VECs of every activation; NGEO (token
// widths D of every value, all G * N half the time) and NCON (constants up to
// the int32 limits) between SMAX, LNRM and GELU, and HWT and RWU (of 1 to
// N rows, transposed or not; the machines have ub_weight_path); the other mix
// draws these too but SMAX and LNRM (the RTL, which it feeds, lacks them).
// Every range
// stays inside its memory (an MMC.C's or a POOL's whole input map inside the
// UB, as the registers stand when it issues), unless faults are asked for:
// then about one program in ten has an address past a memory's end (an
// MMC.C's or a POOL's map, a VEC's operand B among them) or an instruction
// that deadlocks.
//
// With `large`, the machines have N = 64 and memories of 30 K rows, and about
// half the MMCs (MMC.Cs too, then mostly padding rows) are 3 K to 24 K rows
// long: long enough to cross the fast path's threshold for splitting an MMC
// over threads (16 M MACs, 4096 rows at N = 64), so that the threaded split
// runs with its default settings, and to write the 4 MiB and more for which
// the accumulators ask for huge pages.
//
// One random stream serves next, fill and pick, in the order of the calls.
class RandomProgramGenerator {
 public:
  explicit RandomProgramGenerator(std::uint32_t seed, bool large = false);
  ~RandomProgramGenerator();
  RandomProgramGenerator(const RandomProgramGenerator&) = delete;
  RandomProgramGenerator& operator=(const RandomProgramGenerator&) = delete;

  RandomProgram next(bool faults);
  // Random contents for every memory (the UB and ACC too, so that reading
  // rows no instruction wrote still gives telling values).
  void fill(model::Memories& mem);
  // A number in lo..hi from the same stream, for the test's own choices.
  unsigned pick(unsigned lo, unsigned hi);

 private:
  std::unique_ptr<MachineMix> mix_;
};

// The memory windows tpu-cosim's programs use.
struct Windows {
  std::uint64_t host_rows = 256;
  std::uint64_t ub_rows = 48;
  std::uint64_t acc_rows = 48;
  std::uint64_t weight_tiles = 8;
  std::uint64_t max_rows = 12;  // rows per instruction
};

// A program for `cfg`, every range inside the windows `w` of its memories.
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
//
// HWT of 1 to min(N, max_rows) host rows of the window, transposed or not,
// into a tile of the weight window: a RAW for the RWs of that tile, a WAR
// with those in flight. With cfg.ub_weight_path, RWU of 1 to min(N,
// max_rows) rows of the UB window, transposed or not, counted as an RW
// against the FIFO's room.
//
// NGEO (tokens of 1 to 4 rows whose hull fits the UB window, every shift,
// every width) and NCON (constants of the sizes the compiler chooses for
// GELU and SMAX, small ones, or anywhere in int32) set the normalization
// registers between GELUs of rows in the UB window, in place now and then.
isa::Program random_program(const ArchConfig& cfg, std::uint64_t seed, const Windows& w = {});

// `cfg` with the memory channels' timing drawn from `seed`: latencies from 0
// to twice cfg's (at least 8), bandwidths from N / 4 (at least 1) to the
// widest the RTL build's ports take (`host_max`, `weight_max`: rtl::port_widths),
// each now and then exactly cfg's own, the widest or the narrowest; the
// host's layout time of an HWT (host_layout_cycles) from 0 to 8; and
// ub_weight_path, on in three of four (an input of the RTL core, like the
// timing).
ArchConfig random_timing(const ArchConfig& cfg, std::uint64_t host_max, std::uint64_t weight_max,
                         std::uint64_t seed);

// Fills the windows of `mem` with values drawn from `seed`.
void random_memories(model::Memories& mem, std::uint64_t seed, const Windows& w = {});

}  // namespace tpu::testing
