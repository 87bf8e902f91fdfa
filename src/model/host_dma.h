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

namespace tpu::model {

SC_MODULE(HostDma) {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<bool> busy;

  HostDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log);
  SC_HAS_PROCESS(HostDma);

 private:
  struct Job {
    UnitCommand cmd;
    Cycle start;
    std::uint64_t rows_done;
  };
  void tick();
  void move_row(const isa::Instruction& in, std::uint64_t r);

  const ArchConfig& cfg_;
  Memories& mem_;
  RunLog& log_;
  UnitStats& stats_;
  std::optional<Job> job_;
};

}  // namespace tpu::model
