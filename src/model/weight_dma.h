// weight_dma: executes RW. A tile of N x N bytes takes weight_latency +
// ceil(N*N / weight_bytes_per_cycle) cycles; in its completion cycle it is
// pushed towards the weight FIFO (docs/microarchitecture.md, "Weight DMA").
#pragma once

#include <systemc.h>

#include <optional>

#include "config/arch_config.h"
#include "model/run_log.h"
#include "model/signals.h"

namespace tpu::model {

SC_MODULE(WeightDma) {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<TilePush> tile_push;
  sc_out<bool> busy;

  WeightDma(sc_module_name name, const ArchConfig& cfg, RunLog& log);
  SC_HAS_PROCESS(WeightDma);

 private:
  void tick();

  const ArchConfig& cfg_;
  RunLog& log_;
  UnitStats& stats_;
  std::optional<std::pair<UnitCommand, Cycle>> job_;  // command, completion cycle
};

}  // namespace tpu::model
