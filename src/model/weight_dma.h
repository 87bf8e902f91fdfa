// weight_dma: executes RW over the weight memory, a pipelined channel: a
// request's latency (weight_latency) overlaps the transfers ahead of it and
// the channel streams one N x N tile in T = ceil(N*N / weight_bytes_per_cycle)
// cycles, so a tile arrives at max(start + Lw, previous arrival + 1) + T - 1.
// In that cycle it is pushed towards the weight FIFO
// (docs/microarchitecture.md, "Weight DMA").
#pragma once

#include <systemc.h>

#include <deque>

#include "config/arch_config.h"
#include "model/run_log.h"
#include "model/signals.h"
#include "model/timing.h"

namespace tpu::model {

SC_MODULE(WeightDma) {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<TilePush> tile_push;
  sc_out<bool> busy;

  WeightDma(sc_module_name name, const ArchConfig& cfg, RunLog& log);
  SC_HAS_PROCESS(WeightDma);

  // The fast path's clock: the completion cycle of the tile in flight, and
  // the cycle after a push (the array takes the tile then, and the push is
  // withdrawn).
  Cycle next_activity(Cycle now) const {
    return pushed_ ? now + 1 : jobs_.empty() ? kNever : jobs_.front().second;
  }

 private:
  void tick();

  const ArchConfig& cfg_;
  RunLog& log_;
  UnitStats& stats_;
  std::deque<std::pair<UnitCommand, Cycle>> jobs_;  // outstanding: command, completion cycle
  Cycle last_completion_ = 0;
  bool pushed_ = false;
  Cycle last_tick_ = 0;
};

}  // namespace tpu::model
