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
// The tile's bytes are what the transaction read, kept by the DMA until
// the push and handed to the FIFO with it (TilePush::data); when the target
// grants DMI and answers a timing query, they are read through the DMI
// pointer at the push instead.
//
// RWU (ub_weight_path; docs/microarchitecture.md, "Attention's second
// operand") takes the tile from `rows` UB rows instead: it reads them one a
// cycle from s = c + 1 and pushes the tile at d = max(s + rows, d_{k-1} + 1),
// in order with the RWs. The hazard interlocks keep the rows unchanged until
// d, so the DMA lays the tile out from them at acceptance.
#pragma once

#include <systemc.h>
#include <tlm>

#include <deque>
#include <vector>

#include "config/arch_config.h"
#include "model/byte_pool.h"
#include "model/memories.h"
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
  MemoryInitiatorSocket memory;

  WeightDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log);
  SC_HAS_PROCESS(WeightDma);
  ~WeightDma() override;

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
    ByteBuffer data;  // the tile as the transaction read it (not direct)
    bool direct;      // read through DMI when pushed
  };
  void tick();

  Accepted accept_rwu(const isa::Instruction& in, std::uint32_t seq, Cycle now);

  const ArchConfig& cfg_;
  Memories& mem_;
  RunLog& log_;
  UnitStats& stats_;
  std::deque<Job> planned_;  // accepted, starting at the next cycle
  std::deque<Job> jobs_;     // outstanding
  Cycle last_completion_ = 0;
  // The bytes of the last two pushes (k-th in pushed_data_[k % 2]): push k
  // is read by the FIFO in the cycle after it, when push k + 1 may be made.
  ByteBuffer pushed_data_[2];
  std::uint64_t pushes_ = 0;
  PortClient port_;
  bool pushed_ = false;
  Cycle last_tick_ = 0;
};

}  // namespace tpu::model
