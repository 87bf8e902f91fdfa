// weight_dma: executes RW through its TLM-2.0 initiator socket `memory` to
// weight memory (docs/microarchitecture.md, "Weight DMA" and "Memory
// ports"). In the issue cycle the controller hands it the instruction
// (accept): it sends one transaction for the tile, requested at the start of
// the next cycle, and reports the cycle d_k = max(a_k, d_{k-1} + 1) in which
// the tile is pushed towards the weight FIFO (a_k: the transaction's landing
// cycle; one tile per cycle, in order). It accepts a request every cycle.
// With the default target (WeightMemoryTarget), a pipelined channel, the tile
// arrives at max(start + Lw, previous arrival + 1) + T - 1.
//
// The array's loader reads the tile's bytes from the run's weight memory
// (Memories::weights), which nothing writes during a run: the transaction
// carries the same bytes, into a buffer of the DMA.
#pragma once

#include <systemc.h>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <deque>
#include <vector>

#include "config/arch_config.h"
#include "model/byte_pool.h"
#include "model/memory_ports.h"
#include "model/run_log.h"
#include "model/signals.h"
#include "model/timing.h"

namespace tpu::model {

SC_MODULE(WeightDma), public TransferUnit {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<TilePush> tile_push;
  sc_out<bool> busy;
  tlm_utils::simple_initiator_socket<WeightDma> memory;

  WeightDma(sc_module_name name, const ArchConfig& cfg, RunLog& log);
  SC_HAS_PROCESS(WeightDma);
  ~WeightDma() override { BytePool::give(std::move(tile_)); }

  // Called by the controller in the cycle `now` it issues `in` (RW): sends
  // the tile's transaction and returns the cycle the tile is pushed.
  Accepted accept(const isa::Instruction& in, std::uint32_t seq, Cycle now) override;

  // The fast path's clock: the completion cycle of the tile in flight, and
  // the cycle after a push (the array takes the tile then, and the push is
  // withdrawn).
  Cycle next_activity(Cycle now) const {
    return pushed_ ? now + 1 : jobs_.empty() ? kNever : jobs_.front().completion;
  }

 private:
  struct Job {
    std::uint32_t seq;
    std::uint32_t tile;
    Cycle completion;
  };
  void tick();

  const ArchConfig& cfg_;
  RunLog& log_;
  UnitStats& stats_;
  std::deque<Job> planned_;  // accepted, starting at the next cycle
  std::deque<Job> jobs_;     // outstanding
  Cycle last_completion_ = 0;
  ByteBuffer tile_;  // the transaction's data (N*N bytes)
  tlm::tlm_generic_payload trans_;
  bool pushed_ = false;
  Cycle last_tick_ = 0;
};

}  // namespace tpu::model
