// The TPUv1 counters recounted cycle by cycle from a run's records, straight
// from docs/microarchitecture.md ("The TPUv1 counters"): cycle by cycle, the
// definitions applied literally, with nothing shared with
// src/model/perf_counters.cpp. For test programs (a bit per cycle).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "config/arch_config.h"
#include "isa/isa.h"
#include "isa/program.h"
#include "model/run_log.h"

namespace tpu::testing {

inline model::PerfCounters recount_perf(const ArchConfig& cfg, const isa::Program& prog,
                                        const model::RunLog& log, const std::int8_t* weights) {
  using model::Cycle;
  constexpr Cycle kNone = std::numeric_limits<Cycle>::max();
  constexpr std::size_t kNoTile = std::numeric_limits<std::size_t>::max();
  const std::size_t n = cfg.array_n;
  const Cycle cycles = log.stats.cycles;
  const auto& rec = log.retired;
  const auto op = [&](std::size_t i) -> const isa::Instruction& { return prog.code[rec[i].pc]; };
  const auto is_switch = [&](std::size_t i) {
    return op(i).opcode == isa::Opcode::MMC && op(i).has(isa::kFlagMmcSwitch);
  };
  const auto done_at = [&](std::size_t i) { return rec[i].completed ? rec[i].completion : kNone; };

  // switches_before[i]: the MMC switches among records 0 .. i-1 (a prefix
  // count, so that programs of thousands of instructions recount in linear time).
  std::vector<std::size_t> switches_before_rec(rec.size() + 1, 0);
  for (std::size_t j = 0; j < rec.size(); ++j) switches_before_rec[j + 1] = switches_before_rec[j] + is_switch(j);
  // The tile of the k-th push (k from 1), RW or RWU, in record order; and
  // for a tile whose contents the run does not keep, its useful rows x
  // columns as the document counts them: an RWU's and an HWT's tile of R
  // rows R x N (the RW of a tile after an HWT wrote it: that HWT's), an RW
  // before an HWT that rewrites its tile N x N.
  std::vector<std::size_t> rw_tile;
  std::vector<std::uint64_t> laid_out;  // per push: kNone, or the lanes
  for (std::size_t j = 0; j < rec.size(); ++j) {
    if (op(j).opcode == isa::Opcode::RWU) {
      rw_tile.push_back(0);
      laid_out.push_back(static_cast<std::uint64_t>(op(j).operands[1]) * n);
    }
    if (op(j).opcode != isa::Opcode::RW) continue;
    const auto t = static_cast<std::size_t>(op(j).operands[0]);
    rw_tile.push_back(t);
    std::uint64_t lanes = kNone;
    for (std::size_t h = 0; h < rec.size(); ++h) {
      if (op(h).opcode != isa::Opcode::HWT || static_cast<std::size_t>(op(h).operands[1]) != t) continue;
      if (h < j) lanes = static_cast<std::uint64_t>(op(h).operands[2]) * n;  // the last before j
      else if (lanes == kNone) lanes = n * n;
    }
    laid_out.push_back(lanes);
  }

  model::PerfCounters p;
  // The rows MMC record i's array read in cycles 0 .. cycles - 1 (row r in
  // cycle start + r): after a fault, an MMC in flight counts only those.
  const auto rows_read = [&](std::size_t i) {
    std::uint64_t k = 0;
    for (Cycle t = rec[i].start; t < rec[i].start + static_cast<Cycle>(op(i).operands[2]) && t < cycles; ++t) ++k;
    return k;
  };
  // Every MAC: N x N per row read.
  std::uint64_t macs = 0;
  for (std::size_t i = 0; i < rec.size(); ++i)
    if (op(i).opcode == isa::Opcode::MMC) macs += rows_read(i) * n * n;
  // Useful MACs: per row read, the nonzero rows x nonzero columns of the tile
  // the latest switch (at or before its MMC) took.
  for (std::size_t i = 0; i < rec.size(); ++i) {
    if (op(i).opcode != isa::Opcode::MMC) continue;
    const std::size_t switches = switches_before_rec[i + 1];  // switches up to and including i
    if (switches == 0) continue;
    const std::size_t tile = switches <= rw_tile.size() ? rw_tile[switches - 1] : 0;
    if (switches <= laid_out.size() && laid_out[switches - 1] != kNone) {
      p.useful_macs += rows_read(i) * laid_out[switches - 1];
      continue;
    }
    std::uint64_t rows_used = 0, cols_used = 0;
    for (std::size_t k = 0; k < n; ++k) {
      bool any_row = false, any_col = false;
      for (std::size_t j = 0; j < n; ++j) {
        any_row |= weights[tile * n * n + k * n + j] != 0;
        any_col |= weights[tile * n * n + j * n + k] != 0;
      }
      rows_used += any_row;
      cols_used += any_col;
    }
    p.useful_macs += rows_read(i) * rows_used * cols_used;
  }
  p.unused_macs = macs - p.useful_macs;

  // Which cycles the array reads a row in, cycle by cycle.
  std::vector<bool> active(cycles, false);
  for (std::size_t i = 0; i < rec.size(); ++i)
    if (op(i).opcode == isa::Opcode::MMC)
      for (Cycle t = rec[i].start; t < rec[i].start + static_cast<Cycle>(op(i).operands[2]) && t < cycles; ++t)
        active[t] = true;
  p.array_active_cycles = static_cast<std::uint64_t>(std::count(active.begin(), active.end(), true));
  // The tile the matrix unit waits for, cycle by cycle (kNone: not waiting):
  // the RW number k it comes from. fifo_full runs first, then the in-unit
  // waits of MMC.S, which take precedence where both hold.
  const auto switches_before = [&](std::size_t seq) { return switches_before_rec[std::min(seq, rec.size())]; };
  std::vector<std::size_t> waits_for(cycles, kNoTile);
  for (const model::StallRun& run : log.stall_runs)
    if (run.cause == model::StallCause::FifoFull)
      for (Cycle t = run.first, k = switches_before(run.seq); t <= run.last && t < cycles; ++t) waits_for[t] = k;
  for (std::size_t i = 0; i < rec.size(); ++i)
    if (is_switch(i))
      for (Cycle t = rec[i].issue + 1, k = switches_before(i); t < rec[i].start && t < cycles; ++t) waits_for[t] = k;
  // RW number k's completion, if issued.
  std::vector<Cycle> rw_done;
  for (std::size_t j = 0; j < rec.size(); ++j)
    if (op(j).opcode == isa::Opcode::RW || op(j).opcode == isa::Opcode::RWU) rw_done.push_back(done_at(j));
  for (Cycle t = 0; t < cycles; ++t) {
    if (active[t] || waits_for[t] == kNoTile) continue;
    const Cycle d = waits_for[t] < rw_done.size() ? rw_done[waits_for[t]] : kNone;
    if (d == kNone || t <= d) ++p.weight_stall_cycles;
    else ++p.weight_shift_cycles;
  }
  // Hazard runs' idle cycles that are not waits for weights.
  for (const model::StallRun& run : log.stall_runs) {
    const std::size_t seq = run.seq;  // records before it: issued before the stalled instruction
    if (run.cause != model::StallCause::Raw && run.cause != model::StallCause::War &&
        run.cause != model::StallCause::Waw)
      continue;
    // The completions of the host transfers in flight at the run's start
    // that write rows the stalled MMC reads.
    std::vector<Cycle> inputs;
    const isa::Instruction& in = prog.code[run.pc];
    if (in.opcode == isa::Opcode::MMC) {
      isa::ConvGeometry g;
      for (std::size_t j = 0; j < seq; ++j) g.apply(op(j));
      for (std::size_t j = 0; j < seq; ++j) {
        if (isa::spec_of(op(j).opcode).unit != isa::Unit::HostDma || done_at(j) < run.first) continue;
        bool writes_input = false;
        for (const isa::Access& w : isa::accesses(op(j)))
          for (const isa::Access& r : isa::accesses(in, g))
            writes_input |= w.is_write && !r.is_write && w.space == r.space && w.base < r.base + r.count &&
                            r.base < w.base + w.count;
        if (writes_input) inputs.push_back(done_at(j));
      }
    }
    for (Cycle t = run.first; t <= run.last && t < cycles; ++t) {
      if (active[t] || waits_for[t] != kNoTile) continue;
      if (std::any_of(inputs.begin(), inputs.end(), [t](Cycle d) { return t <= d; })) ++p.input_data_stall_cycles;
      else ++p.raw_stall_cycles;
    }
  }
  p.non_matrix_cycles = cycles - p.array_active_cycles - p.weight_stall_cycles - p.weight_shift_cycles;
  return p;
}

inline bool same_counters(const model::PerfCounters& a, const model::PerfCounters& b) {
  return a.array_active_cycles == b.array_active_cycles && a.weight_stall_cycles == b.weight_stall_cycles &&
         a.weight_shift_cycles == b.weight_shift_cycles && a.non_matrix_cycles == b.non_matrix_cycles &&
         a.raw_stall_cycles == b.raw_stall_cycles &&
         a.input_data_stall_cycles == b.input_data_stall_cycles && a.useful_macs == b.useful_macs &&
         a.unused_macs == b.unused_macs;
}

}  // namespace tpu::testing
