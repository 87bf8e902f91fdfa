// activation_unit: executes ACT. Row i of an ACT started at s reads
// ACC[acc_row + i] at s + i and writes the requantized, activated int8 row to
// UB[ub_row + i] at s + i + act_latency (docs/microarchitecture.md,
// "Activation unit"). Rows of successive ACTs follow each other with no gap.
#pragma once

#include <systemc.h>

#include <deque>
#include <vector>

#include "config/arch_config.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/signals.h"

namespace tpu::model {

SC_MODULE(ActivationUnit) {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<bool> busy;

  ActivationUnit(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log);
  SC_HAS_PROCESS(ActivationUnit);

 private:
  struct Job {
    UnitCommand cmd;
    Cycle start;
  };
  struct PendingWrite {
    Cycle due;
    std::uint64_t ub_row;
    std::vector<std::int8_t> data;
    std::int64_t retire_seq;  // >= 0 on an instruction's last row
  };
  void tick();

  const ArchConfig& cfg_;
  Memories& mem_;
  RunLog& log_;
  UnitStats& stats_;
  std::deque<Job> jobs_;
  std::deque<PendingWrite> pipeline_;
};

}  // namespace tpu::model
