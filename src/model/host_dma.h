// host_dma: executes RHM (host memory -> UB) and WHM (UB or ACC -> host
// memory), one at a time. After host_latency cycles it moves
// host_bytes_per_cycle bytes per cycle; a row is written in the cycle its last
// byte arrives (docs/microarchitecture.md, "Host DMA").
#pragma once

#include <systemc.h>

#include <optional>

#include "config/arch_config.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/signals.h"
#include "model/timing.h"

namespace tpu::model {

SC_MODULE(HostDma) {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<bool> busy;

  HostDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log);
  SC_HAS_PROCESS(HostDma);

  // The fast path's clock: the completion cycle of the transfer in flight.
  // A tick moves every row due by then, so the rows of a transfer land at the
  // latest in its completion cycle; no other unit touches them before
  // (docs/microarchitecture.md: hazards are interlocked until completion).
  Cycle next_activity(Cycle) const { return job_ ? job_->completion : kNever; }

 private:
  struct Job {
    UnitCommand cmd;
    Cycle start;
    std::uint64_t rows_done;
    Cycle completion;
  };
  void tick();
  void move_row(const isa::Instruction& in, std::uint64_t r);

  const ArchConfig& cfg_;
  Memories& mem_;
  RunLog& log_;
  UnitStats& stats_;
  std::optional<Job> job_;
  Cycle last_tick_ = 0;
};

}  // namespace tpu::model
