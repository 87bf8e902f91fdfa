// What a run records: one retire record per instruction, statistics, and a
// fault if the program stopped on one. Both models fill the same records.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "isa/instruction.h"
#include "model/timing.h"

namespace tpu::model {

struct RetireRecord {
  std::uint32_t pc = 0;
  Cycle issue = 0;
  Cycle start = 0;
  Cycle completion = 0;
  bool completed = false;
};

// An MMC.S does not stall the controller for its weights: it waits in the
// matrix unit (docs/microarchitecture.md, "Weight buffers").
enum class StallCause : std::uint8_t { Raw, War, Waw, UnitBusy, FifoFull, Drain };
inline constexpr unsigned kNumStallCauses = 6;
static_assert(static_cast<unsigned>(StallCause::Drain) + 1 == kNumStallCauses);
// Statistics names, indexed by StallCause. The RTL core reports the index on
// stall_cause_o; tpu-gen codes-pkg writes both to rtl/tpu_codes_pkg.sv.
inline constexpr std::array<const char*, kNumStallCauses> kStallCauseNames = {
    "raw_hazard", "war_hazard", "waw_hazard", "unit_busy",
    "fifo_full", "drain"};
const char* stall_cause_name(StallCause c);

// Why the RTL core stopped, as reported on fault_code_o (0: no fault). The
// model writes the reason text into Fault directly; the cycle limit is the
// testbench's, not the core's.
enum class FaultCode : std::uint8_t { None, PastEnd, BadAddress, DeadlockMmc, DeadlockRw, RwuNoPath };
inline constexpr unsigned kNumFaultCodes = 6;
static_assert(static_cast<unsigned>(FaultCode::RwuNoPath) + 1 == kNumFaultCodes);
inline constexpr std::array<const char*, kNumFaultCodes> kFaultCodeNames = {
    "none", "past_end", "bad_address", "deadlock_mmc", "deadlock_rw", "rwu_no_path"};
// The reason a fault message gives (the model adds the address details of a
// BadAddress fault).
const char* fault_reason(FaultCode c);

// A run of consecutive cycles in which the controller stalled the
// instruction at `pc` (number `seq` in issue order: the retire record it gets
// when it issues) for one cause.
struct StallRun {
  std::uint32_t seq = 0;
  std::uint32_t pc = 0;
  StallCause cause = StallCause::Raw;
  Cycle first = 0, last = 0;
  bool operator==(const StallRun& o) const {
    return seq == o.seq && pc == o.pc && cause == o.cause && first == o.first && last == o.last;
  }
};

// The cycles of a run partitioned as the rows of the TPUv1 paper's Table 3
// (Jouppi et al., ISCA 2017), from the matrix unit's point of view
// (docs/microarchitecture.md, "Statistics"; model/perf_counters.h):
// array_active + weight_stall + weight_shift + non_matrix = cycles, and
// raw_stall, input_data_stall are parts of non_matrix. useful_macs +
// unused_macs = Stats::macs.
struct PerfCounters {
  std::uint64_t array_active_cycles = 0;
  std::uint64_t weight_stall_cycles = 0;
  std::uint64_t weight_shift_cycles = 0;
  std::uint64_t non_matrix_cycles = 0;
  std::uint64_t raw_stall_cycles = 0;
  std::uint64_t input_data_stall_cycles = 0;
  std::uint64_t useful_macs = 0;
  std::uint64_t unused_macs = 0;
};

// The events the energy model charges (docs/energy.md, "Events"), counted in
// closed form per instruction from the retire records (model/perf_counters.h:
// count_events), so both engines and both paths count the same. Rows are of
// the memory's own width: N bytes (unified buffer), N int32 (accumulators).
struct EnergyEvents {
  std::uint64_t active_pe_macs = 0;  // MACs on a useful lane (PerfCounters::useful_macs)
  std::uint64_t idle_pe_macs = 0;    // MACs on an unused lane (PerfCounters::unused_macs)
  std::uint64_t ub_row_reads = 0;
  std::uint64_t ub_row_writes = 0;
  std::uint64_t acc_row_reads = 0;
  std::uint64_t acc_row_writes = 0;  // MMC.O
  std::uint64_t acc_row_rmws = 0;    // MMC without .O: read, add, write
  std::uint64_t fifo_tile_writes = 0;
  std::uint64_t fifo_tile_shifts = 0;
  std::uint64_t act_lane_ops = 0;    // lanes of ACT rows, POOL window positions, VEC rows
  std::uint64_t weight_mem_bytes = 0;
  std::uint64_t host_bytes = 0;
  std::uint64_t instructions = 0;
  EnergyEvents& operator+=(const EnergyEvents& o);
  bool operator==(const EnergyEvents& o) const;
};
// Each event's statistics name (the --stats JSON's energy.events) and field.
struct EnergyEventField {
  const char* name;
  std::uint64_t EnergyEvents::*member;
};
inline constexpr std::array<EnergyEventField, 13> kEnergyEventFields = {{
    {"active_pe_macs", &EnergyEvents::active_pe_macs},
    {"idle_pe_macs", &EnergyEvents::idle_pe_macs},
    {"ub_row_reads", &EnergyEvents::ub_row_reads},
    {"ub_row_writes", &EnergyEvents::ub_row_writes},
    {"acc_row_reads", &EnergyEvents::acc_row_reads},
    {"acc_row_writes", &EnergyEvents::acc_row_writes},
    {"acc_row_rmws", &EnergyEvents::acc_row_rmws},
    {"fifo_tile_writes", &EnergyEvents::fifo_tile_writes},
    {"fifo_tile_shifts", &EnergyEvents::fifo_tile_shifts},
    {"act_lane_ops", &EnergyEvents::act_lane_ops},
    {"weight_mem_bytes", &EnergyEvents::weight_mem_bytes},
    {"host_bytes", &EnergyEvents::host_bytes},
    {"instructions", &EnergyEvents::instructions},
}};
inline EnergyEvents& EnergyEvents::operator+=(const EnergyEvents& o) {
  for (const EnergyEventField& f : kEnergyEventFields) this->*f.member += o.*f.member;
  return *this;
}
inline bool EnergyEvents::operator==(const EnergyEvents& o) const {
  for (const EnergyEventField& f : kEnergyEventFields)
    if (this->*f.member != o.*f.member) return false;
  return true;
}

struct UnitStats {
  std::uint64_t instructions = 0;
  std::uint64_t busy_cycles = 0;
};

struct Stats {
  Cycle cycles = 0;
  std::uint64_t instructions = 0;
  std::uint64_t macs = 0;
  std::uint64_t array_active_cycles = 0;  // cycles the array read a row
  std::uint64_t stall_cycles[kNumStallCauses] = {};
  std::map<std::string, UnitStats> units;  // by unit name
  PerfCounters tpuv1;                      // model/perf_counters.h
  EnergyEvents events;                     // model/perf_counters.h: count_events
};

struct Fault {
  std::uint32_t pc = 0;
  std::string instruction;
  Cycle cycle = 0;
  std::string reason;
  std::string message() const;
};

// How often a run asks RunOptions::interrupted: every this many controller
// ticks (the RTL engine: cycles).
inline constexpr std::uint64_t kInterruptPollTicks = 256;

struct RunLog {
  std::vector<RetireRecord> retired;  // in issue order
  std::vector<StallRun> stall_runs;   // in time order
  Stats stats;
  std::optional<Fault> fault;
  bool halted = false;
  bool interrupted = false;  // stopped by RunOptions::interrupted (the fault says so too)

  // Units report the completion of the instruction issued as number `seq`.
  void complete(std::size_t seq, Cycle cycle) {
    retired[seq].completion = cycle;
    retired[seq].completed = true;
  }
  // The controller stalled the instruction at `pc` for `cause` in cycles
  // first..last (it gets retire record number retired.size() when it issues).
  void stall(std::uint32_t pc, StallCause cause, Cycle first, Cycle last) {
    const auto seq = static_cast<std::uint32_t>(retired.size());
    stats.stall_cycles[static_cast<unsigned>(cause)] += last - first + 1;
    if (!stall_runs.empty()) {
      StallRun& r = stall_runs.back();
      if (r.seq == seq && r.cause == cause && r.last + 1 == first) {
        r.last = last;
        return;
      }
    }
    stall_runs.push_back({seq, pc, cause, first, last});
  }
};

}  // namespace tpu::model
