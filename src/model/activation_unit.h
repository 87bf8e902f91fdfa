// activation_unit: executes ACT and POOL. Row i of an ACT started at s reads
// ACC[acc_row + i] at s + i and writes the requantized, activated int8 row to
// UB[ub_row + i] at s + i + A, A = act_latency (docs/microarchitecture.md,
// "Activation unit"). Rows of successive ACTs follow each other with no gap.
// A POOL reads one window position of its UB map per cycle and writes each
// output pixel A + 1 cycles after its last position ("Pooling"). In every
// cycle the unit reads before it writes: its writes are visible from the next
// cycle. A VEC reads a row of each operand per cycle (two UB read ports, B a
// cycle before A) and writes A + 3 cycles after B's read ("Vector
// operations"). An SMAX or LNRM reads each token's rows in three passes and
// writes them A + 8 cycles after the last; a GELU streams like an ACT, written
// A + 6 cycles after its read ("Softmax, LayerNorm, GELU"). The controller
// keeps the writes in order ("One pipeline, writes in order").
#pragma once

#include <systemc.h>

#include <deque>
#include <vector>

#include "config/arch_config.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/signals.h"
#include "model/timing.h"

namespace tpu::model {

SC_MODULE(ActivationUnit) {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<bool> busy;

  ActivationUnit(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log);
  SC_HAS_PROCESS(ActivationUnit);

  // The fast path's clock: the next completion cycle. A tick first runs the
  // cycles the clock skipped (reading and writing the rows due in them), so
  // every row of an ACT is written by its completion cycle, before any other
  // unit may touch those rows.
  Cycle next_activity(Cycle) const {
    return completions_.empty() ? kNever : completions_.front();
  }

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
  // One cycle of work; `command` is the command arriving in it, if any.
  // Returns whether the unit is busy in it.
  bool step(Cycle now, const UnitCommand* command);
  void read_act(Cycle now);
  void read_pool(Cycle now);
  void read_vec(Cycle now);
  void read_norm(Cycle now);  // SMAX, LNRM
  void read_gelu(Cycle now);
  // A row's write to UB row `ub_row`, the front job's latency (act_write_latency)
  // after `now`; `last` marks the
  // front job's last row (it carries the job's sequence number).
  PendingWrite row_write(Cycle now, std::uint64_t ub_row, bool last) const;
  bool active() const { return !jobs_.empty() || !pipeline_.empty(); }

  const ArchConfig& cfg_;
  Memories& mem_;
  RunLog& log_;
  UnitStats& stats_;
  std::deque<Job> jobs_;
  std::deque<PendingWrite> pipeline_;
  std::deque<Cycle> completions_;  // of the ACTs accepted and not yet completed
  Cycle last_tick_ = 0;
  std::vector<std::int32_t> pool_acc_;  // a POOL.A's running sum, per lane
  std::vector<std::int8_t> pool_max_;   // a POOL's running max, per lane
  bool pool_any_ = false;               // a position of the window was inside the map
  std::vector<std::int32_t> vec_values_;  // a VEC row's combined values, per lane
  std::vector<std::int8_t> vec_b_held_;   // a VEC's operand B row, read a cycle before A's
  // An SMAX's or LNRM's per-token scalars: pass 1's maximum or sum, pass 2's
  // sum of exponentials or of squared deviations, pass 3's reciprocal.
  std::int64_t norm_first_ = 0, norm_second_ = 0, norm_recip_ = 0;
};

}  // namespace tpu::model
