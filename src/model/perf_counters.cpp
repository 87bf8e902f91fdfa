#include "model/perf_counters.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "isa/isa.h"

namespace tpu::model {
namespace {

// Disjoint spans of cycles: the array's active cycles (one span per MMC,
// added in time order), and the idle cycles already put in a category (a
// cycle goes to the first wait that claims it: in-unit waits for weights
// before the controller's stall runs).
class Spans {
 public:
  // Adds first..last, disjoint from every span held.
  void add(Cycle first, Cycle last) {
    if (last < first) return;
    spans_.emplace(first, last);
    total_ += last - first + 1;
  }
  Cycle total() const { return total_; }

  // Calls fn(x, y) for each maximal run x..y of cycles in first..last that
  // no span covers.
  template <typename Fn>
  void for_each_gap(Cycle first, Cycle last, Fn&& fn) const {
    auto it = spans_.upper_bound(first);
    if (it != spans_.begin() && std::prev(it)->second >= first) --it;
    Cycle from = first;
    for (; it != spans_.end() && it->first <= last && from <= last; ++it) {
      if (it->first > from) fn(from, it->first - 1);
      from = std::max(from, it->second + 1);
    }
    if (from <= last) fn(from, last);
  }

  // for_each_gap, and the gaps become spans.
  template <typename Fn>
  void take(Cycle first, Cycle last, Fn&& fn) {
    std::vector<std::pair<Cycle, Cycle>> gaps;
    for_each_gap(first, last, [&](Cycle x, Cycle y) { gaps.emplace_back(x, y); });
    for (const auto& [x, y] : gaps) {
      fn(x, y);
      add(x, y);
    }
  }

 private:
  std::map<Cycle, Cycle> spans_;  // first -> last
  Cycle total_ = 0;
};

// Rows and columns of a weight tile that hold a nonzero weight. A byte of
// the columns' OR is nonzero when its column holds a nonzero weight, so the
// rows are ORed eight bytes at a time (GCC 12 at -O2 does not vectorize the
// byte loop, and a tile is 64 KiB at N = 256: ResNet-18's counters scanned
// its tiles a byte a cycle, 6% of its run).
std::uint64_t useful_lanes(const std::int8_t* tile, std::size_t n) {
  const std::size_t words = n / 8, tail = n % 8;
  std::vector<std::uint64_t> col(words, 0);
  std::uint8_t col_tail[8] = {};
  std::uint64_t rows = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::int8_t* row = tile + k * n;
    std::uint64_t any = 0;
    for (std::size_t w = 0; w < words; ++w) {
      std::uint64_t v;
      std::memcpy(&v, row + 8 * w, 8);
      col[w] |= v;
      any |= v;
    }
    for (std::size_t j = 0; j < tail; ++j) {
      const auto b = static_cast<std::uint8_t>(row[8 * words + j]);
      col_tail[j] |= b;
      any |= b;
    }
    rows += any != 0;
  }
  std::uint64_t cols = 0;
  for (const std::uint64_t v : col)
    for (unsigned b = 0; b < 8; ++b) cols += ((v >> (8 * b)) & 0xffu) != 0;
  for (std::size_t j = 0; j < tail; ++j) cols += col_tail[j] != 0;
  return rows * cols;
}

}  // namespace

std::uint64_t mmc_rows_read(const RetireRecord& r, const isa::Instruction& in, Cycle end) {
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  return r.start < end ? std::min<std::uint64_t>(rows, end - r.start) : 0;
}

void count_array_work(const ArchConfig& cfg, const isa::Program& prog, RunLog& log) {
  std::uint64_t rows = 0;
  for (const RetireRecord& r : log.retired)
    if (prog.code[r.pc].opcode == isa::Opcode::MMC) rows += mmc_rows_read(r, prog.code[r.pc], log.stats.cycles);
  log.stats.array_active_cycles = rows;
  log.stats.macs = rows * cfg.array_n * cfg.array_n;
}

PerfCounters count_perf(const ArchConfig& cfg, const isa::Program& prog, const RunLog& log,
                        const std::int8_t* weights, std::vector<PerfInterval>* intervals) {
  PerfCounters pc;
  const std::size_t n = cfg.array_n;
  const Cycle end = log.stats.cycles;  // cycles 0 .. end - 1
  const auto completion = [](const RetireRecord& r) { return r.completed ? r.completion : kNever; };

  // The array's rows, the tiles' arrivals and the useful MACs, in issue order.
  Spans active;
  // Useful lanes of the tile pushed k-th (RW or RWU), fixed at its push
  // (docs/microarchitecture.md, "The TPUv1 counters"): an RW's tile as
  // weight memory holds it at the end of the run; but a tile an HWT or RWU
  // lays out of `rows` rows counts rows * N, the lanes its layout can fill
  // (the rows' values are not kept), and an RW of a tile that an HWT
  // rewrites later in the run counts N * N (its contents then are not kept).
  std::vector<std::uint64_t> pushed_lanes;
  std::unordered_map<std::uint64_t, bool> rewritten;  // tiles some HWT writes
  for (const RetireRecord& r : log.retired)
    if (prog.code[r.pc].opcode == isa::Opcode::HWT) rewritten[static_cast<std::uint64_t>(prog.code[r.pc].operands[1])] = true;
  std::vector<std::uint32_t> rw_records;  // retire record of the k-th RW or RWU
  std::unordered_map<std::uint64_t, std::uint64_t> laid_out_lanes;  // by tile, the last HWT's
  std::vector<std::uint32_t> switches_before;  // per record: MMC.S issued before it
  std::unordered_map<std::uint64_t, std::uint64_t> lanes_of_tile;
  std::uint64_t active_lanes = 0;  // the active set's useful lanes (0 at reset)
  std::uint32_t switches = 0;
  switches_before.reserve(log.retired.size() + 1);
  for (std::uint32_t seq = 0; seq < log.retired.size(); ++seq) {
    const RetireRecord& r = log.retired[seq];
    const isa::Instruction& in = prog.code[r.pc];
    switches_before.push_back(switches);
    if (in.opcode == isa::Opcode::HWT)
      laid_out_lanes[static_cast<std::uint64_t>(in.operands[1])] = static_cast<std::uint64_t>(in.operands[2]) * n;
    if (pushes_tile(in)) rw_records.push_back(seq);
    if (in.opcode == isa::Opcode::RWU) pushed_lanes.push_back(static_cast<std::uint64_t>(in.operands[1]) * n);
    if (in.opcode == isa::Opcode::RW) {
      const auto tile = static_cast<std::uint64_t>(in.operands[0]);
      if (const auto laid = laid_out_lanes.find(tile); laid != laid_out_lanes.end()) {
        pushed_lanes.push_back(laid->second);
      } else if (rewritten.count(tile) != 0) {
        pushed_lanes.push_back(n * n);
      } else {
        auto [it, fresh] = lanes_of_tile.try_emplace(tile, 0);
        if (fresh) it->second = useful_lanes(weights + tile * n * n, n);
        pushed_lanes.push_back(it->second);
      }
    }
    if (in.opcode != isa::Opcode::MMC) continue;
    const auto rows = static_cast<std::uint64_t>(in.operands[2]);
    if (in.has(isa::kFlagMmcSwitch)) {
      // The switch takes the tile pushed `switches`-th (its RW or RWU issued
      // before it, or the run faulted with a deadlock).
      active_lanes = pushed_lanes.at(switches);
      ++switches;
    }
    pc.useful_macs += mmc_rows_read(r, in, end) * active_lanes;
    if (rows > 0 && r.start < end) active.add(r.start, std::min<Cycle>(r.start + rows - 1, end - 1));
  }
  switches_before.push_back(switches);
  pc.array_active_cycles = active.total();
  pc.unused_macs = log.stats.macs - pc.useful_macs;

  // Waits for weights in the matrix unit, then the stall runs in time order:
  // their idle-array cycles not yet claimed, by category.
  Spans claimed;
  isa::ConvGeometry geometry;  // as the controller had it for record `replayed`
  std::uint32_t replayed = 0;
  std::vector<std::uint32_t> host_dma_records;  // RHM and WHM issued before `replayed`
  const auto charge = [&](Cycle first, Cycle last, PerfCategory cat, std::uint32_t at_pc) {
    if (first > last) return;
    active.for_each_gap(first, last, [&](Cycle x0, Cycle y0) {
      claimed.take(x0, y0, [&](Cycle x, Cycle y) {
        const Cycle cycles = y - x + 1;
        switch (cat) {
          case PerfCategory::WeightStall: pc.weight_stall_cycles += cycles; break;
          case PerfCategory::WeightShift: pc.weight_shift_cycles += cycles; break;
          case PerfCategory::RawStall: pc.raw_stall_cycles += cycles; break;
          case PerfCategory::InputDataStall: pc.input_data_stall_cycles += cycles; break;
        }
        if (intervals) intervals->push_back({x, y, cat, at_pc});
      });
    });
  };
  // Waiting for the tile of RW (or RWU) number k from `first` to `last`: stall until
  // it arrives, shift after.
  const auto charge_weights = [&](Cycle first, Cycle last, std::uint32_t k, std::uint32_t before_seq,
                                  std::uint32_t at_pc) {
    Cycle arrived = kNever;  // in the FIFO from this cycle on
    if (k < rw_records.size() && rw_records[k] < before_seq) {
      const Cycle d = completion(log.retired[rw_records[k]]);
      if (d != kNever) arrived = d + 1;
    }
    charge(first, std::min(last, arrived - 1), PerfCategory::WeightStall, at_pc);
    charge(std::max(first, arrived), last, PerfCategory::WeightShift, at_pc);
  };
  if (end > 0) {
    for (std::uint32_t seq = 0; seq < log.retired.size(); ++seq) {
      const RetireRecord& r = log.retired[seq];
      const isa::Instruction& in = prog.code[r.pc];
      if (in.opcode != isa::Opcode::MMC || !in.has(isa::kFlagMmcSwitch) || r.start <= r.issue + 1)
        continue;
      charge_weights(r.issue + 1, std::min<Cycle>(r.start - 1, end - 1), switches_before[seq], seq, r.pc);
    }
  }
  for (const StallRun& run : log.stall_runs) {
    for (; replayed < run.seq && replayed < log.retired.size(); ++replayed) {
      const isa::Instruction& in = prog.code[log.retired[replayed].pc];
      geometry.apply(in);
      if (isa::spec_of(in.opcode).unit == isa::Unit::HostDma) host_dma_records.push_back(replayed);
    }
    const Cycle last = std::min<Cycle>(run.last, end - 1);
    if (end == 0 || run.first > last) continue;
    switch (run.cause) {
      case StallCause::FifoFull: {
        // The tile the next switch takes: RW number switches_before[seq].
        const std::uint32_t k = switches_before[std::min<std::size_t>(run.seq, switches_before.size() - 1)];
        charge_weights(run.first, last, k, run.seq, run.pc);
        break;
      }
      case StallCause::Raw:
      case StallCause::War:
      case StallCause::Waw: {
        // An MMC waiting for a host transfer into its input rows: until the
        // last such transfer in flight completes.
        Cycle input_until = 0;
        bool input = false;
        const isa::Instruction& in = prog.code[run.pc];
        if (in.opcode == isa::Opcode::MMC) {
          const std::vector<isa::Access> mine = isa::accesses(in, geometry);
          // Host transfers complete in issue order: those in flight are a suffix.
          for (auto it = host_dma_records.rbegin(); it != host_dma_records.rend(); ++it) {
            const RetireRecord& h = log.retired[*it];
            const Cycle d = completion(h);
            if (d < run.first) break;
            for (const isa::Access& w : isa::accesses(prog.code[h.pc]))
              if (w.is_write && std::any_of(mine.begin(), mine.end(), [&](const isa::Access& a) {
                    return !a.is_write && a.overlaps(w);
                  })) {
                input_until = input ? std::max(input_until, d) : d;
                input = true;
              }
          }
        }
        if (input) {
          charge(run.first, std::min(last, input_until), PerfCategory::InputDataStall, run.pc);
          if (input_until != kNever)
            charge(std::max(run.first, input_until + 1), last, PerfCategory::RawStall, run.pc);
        } else {
          charge(run.first, last, PerfCategory::RawStall, run.pc);
        }
        break;
      }
      default: break;
    }
  }
  if (intervals)
    std::sort(intervals->begin(), intervals->end(),
              [](const PerfInterval& a, const PerfInterval& b) { return a.first < b.first; });
  pc.non_matrix_cycles =
      end - pc.array_active_cycles - pc.weight_stall_cycles - pc.weight_shift_cycles;
  return pc;
}

EnergyEvents instruction_events(const ArchConfig& cfg, const isa::Instruction& in,
                                const isa::ConvGeometry& geometry, std::uint64_t mmc_rows) {
  using isa::Opcode;
  EnergyEvents e;
  e.instructions = 1;
  const std::uint64_t n = cfg.array_n;
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  switch (in.opcode) {
    case Opcode::RHM:
      e.host_bytes = rows * n;
      e.ub_row_writes = rows;
      break;
    case Opcode::WHM:
      if (in.has(isa::kFlagWhmAcc)) {
        e.acc_row_reads = rows;
        e.host_bytes = rows * n * isa::kHostRowsPerAccRow;
      } else {
        e.ub_row_reads = rows;
        e.host_bytes = rows * n;
      }
      break;
    case Opcode::RW:
      e.weight_mem_bytes = n * n;
      e.fifo_tile_writes = 1;
      break;
    // The host sends the laid-out tile over its link into weight memory:
    // the link's bytes, and the DDR3's bytes at its read energy
    // (docs/energy.md). Its reading of its own memory is the host's.
    case Opcode::HWT:
      e.host_bytes = n * n;
      e.weight_mem_bytes = n * n;
      break;
    case Opcode::RWU:
      e.ub_row_reads = static_cast<std::uint64_t>(in.operands[1]);
      e.fifo_tile_writes = 1;
      break;
    case Opcode::MMC:
      // A padding row of an MMC.C is made in the array's input, not read.
      if (in.has(isa::kFlagMmcConvolve)) {
        for (std::uint64_t i = 0; i < mmc_rows; ++i) e.ub_row_reads += geometry.input_row(i) >= 0;
      } else {
        e.ub_row_reads = mmc_rows;
      }
      (in.has(isa::kFlagMmcOverwrite) ? e.acc_row_writes : e.acc_row_rmws) = mmc_rows;
      if (in.has(isa::kFlagMmcSwitch) && mmc_rows > 0) e.fifo_tile_shifts = 1;
      break;
    case Opcode::ACT:
      e.acc_row_reads = rows;
      e.ub_row_writes = rows;
      e.act_lane_ops = rows * n;
      break;
    case Opcode::POOL:
      // Window positions outside the map take their cycle with no UB read.
      for (std::uint64_t i = 0; i < rows; ++i)
        for (std::uint32_t dy = 0; dy < geometry.win_h; ++dy)
          for (std::uint32_t dx = 0; dx < geometry.win_w; ++dx) e.ub_row_reads += geometry.input_row(i, dy, dx) >= 0;
      e.ub_row_writes = rows;
      e.act_lane_ops = rows * geometry.window() * n;
      break;
    case Opcode::VEC:
      // Operand B is read every row, broadcast or not (two read ports).
      e.ub_row_reads = 2 * rows;
      e.ub_row_writes = rows;
      e.act_lane_ops = rows * n;
      break;
    default: break;
  }
  return e;
}

EnergyEvents count_events(const ArchConfig& cfg, const isa::Program& prog, const RunLog& log) {
  EnergyEvents total;
  isa::ConvGeometry geometry;
  for (const RetireRecord& r : log.retired) {
    const isa::Instruction& in = prog.code[r.pc];
    const bool mmc = in.opcode == isa::Opcode::MMC;
    total += instruction_events(cfg, in, geometry, mmc ? mmc_rows_read(r, in, log.stats.cycles) : 0);
    geometry.apply(in);
  }
  total.active_pe_macs = log.stats.tpuv1.useful_macs;
  total.idle_pe_macs = log.stats.tpuv1.unused_macs;
  return total;
}

}  // namespace tpu::model
