// The TPUv1 paper's performance counters (Jouppi et al., ISCA 2017, Table 3),
// counted from what the units record: the matrix unit's MMC intervals (it
// reads row i of an MMC started at s in cycle s + i), the weight DMA's tile
// arrivals (an RW's completion cycle), the host DMA's transfers, and the
// controller's stall runs. Both engines record the same runs and retire
// records (the lock-step check compares them), so both count the same.
//
// Each cycle of a run is exactly one of (docs/microarchitecture.md,
// "Statistics: the TPUv1 counters"):
// - array active: the matrix unit reads a UB row (or a padding row);
// - weight stall: the array reads no row while the matrix unit waits for
//   weights: an MMC.S issued and not yet started, or the controller holding
//   an RW for FIFO room (fifo_full), and the tile it waits for (the one that
//   MMC.S, or the next switch after the RW, takes) has not yet arrived from
//   weight memory;
// - weight shift: the same, but that tile has arrived: it waits in the FIFO
//   or shifts into the shadow (the shift not hidden behind computation);
// - non-matrix: every other cycle.
// Two parts of non-matrix are counted as well: input data stalls (the array
// reads no row while an MMC waits on a hazard with a host-DMA transfer that
// writes its input rows) and RAW stalls (the array reads no row while an
// instruction waits on any other hazard).
#pragma once

#include <cstdint>
#include <vector>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/run_log.h"

namespace tpu::model {

enum class PerfCategory : std::uint8_t { WeightStall, WeightShift, RawStall, InputDataStall };

// Idle-array cycles first..last that the counters put in `category`, charged
// to the instruction at `pc` that waited in them. In time order, disjoint from
// each other and from the array's active cycles.
struct PerfInterval {
  Cycle first = 0, last = 0;
  PerfCategory category = PerfCategory::WeightStall;
  std::uint32_t pc = 0;
};

// The matrix unit's work in `log` (a finished or faulted run of `prog`):
// Stats::array_active_cycles, the rows the array read, and Stats::macs, N x N
// for each, counted from the MMCs' retire records (an MMC started at s reads
// row i in cycle s + i) up to the cycle the run stopped: a row read in cycle
// Stats::cycles or later is not counted. So an MMC in flight at a fault counts
// its rows read so far, and both engines count from the same records by the
// same rule (docs/microarchitecture.md, "Statistics").
void count_array_work(const ArchConfig& cfg, const isa::Program& prog, RunLog& log);

// The counters of `log` (a finished run of `prog`; `weights` is the weight
// memory, tiles of N x N bytes, for the useful MACs: a tile's useful lanes
// are its rows and columns that hold a nonzero weight). With `intervals`,
// also the stall cycles by category, for per-layer reports.
PerfCounters count_perf(const ArchConfig& cfg, const isa::Program& prog, const RunLog& log,
                        const std::int8_t* weights, std::vector<PerfInterval>* intervals = nullptr);

// The energy model's events of one instruction (docs/energy.md, "Events"), in
// closed form from its operands and the convolution and vector registers as
// it issued with (`geometry`). `mmc_rows` is the rows an MMC's array read
// (rows_read_before: all of them in a run that halts); the MACs are left to
// the caller, who knows the useful lanes. An instruction other than an MMC
// counts whole once issued.
EnergyEvents instruction_events(const ArchConfig& cfg, const isa::Instruction& in,
                                const isa::ConvGeometry& geometry, std::uint64_t mmc_rows);

// The events of `log` (a run of `prog` whose Stats::tpuv1 is counted): every
// retired instruction's instruction_events, with the MACs split into active
// and idle PEs as the TPUv1 counters' useful and unused MACs.
EnergyEvents count_events(const ArchConfig& cfg, const isa::Program& prog, const RunLog& log);

// The rows of the MMC of retire record `r` the array read before cycle `end`.
std::uint64_t mmc_rows_read(const RetireRecord& r, const isa::Instruction& in, Cycle end);

}  // namespace tpu::model
