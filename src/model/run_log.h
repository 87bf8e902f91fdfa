// What a run records: one retire record per instruction, statistics, and a
// fault if the program stopped on one. Both models fill the same records.
#pragma once

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

enum class StallCause : std::uint8_t { Raw, War, Waw, UnitBusy, FifoFull, WeightsNotReady, Drain };
inline constexpr unsigned kNumStallCauses = 7;
const char* stall_cause_name(StallCause c);

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
};

struct Fault {
  std::uint32_t pc = 0;
  std::string instruction;
  Cycle cycle = 0;
  std::string reason;
  std::string message() const;
};

struct RunLog {
  std::vector<RetireRecord> retired;  // in issue order
  Stats stats;
  std::optional<Fault> fault;
  bool halted = false;

  // Units report the completion of the instruction issued as number `seq`.
  void complete(std::size_t seq, Cycle cycle) {
    retired[seq].completion = cycle;
    retired[seq].completed = true;
  }
};

}  // namespace tpu::model
