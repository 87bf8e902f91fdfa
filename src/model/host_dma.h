// host_dma: executes RHM (host memory -> UB) and WHM (UB or ACC -> host
// memory), one at a time, through its TLM-2.0 initiator socket `memory`
// (docs/microarchitecture.md, "Host DMA" and "Memory ports"). In the issue
// cycle the controller hands it the instruction (accept): it sends the
// transfer as one transaction, requested at the start of the next cycle,
// and reports the cycle its last byte lands. Row r lands when the target's
// RowLandings answer says (in order, l_r = max(a_r, l_{r-1})), or with the
// last byte if the target does not answer it; an RHM writes the UB row then.
// When the target grants DMI over the transfer's bytes and answers a timing
// query (RowLandings), the DMA moves the rows itself, each as it lands.
// With the default target (HostMemoryTarget) a row lands at
// s + Lh + ceil((r + 1) * b / Bh) - 1.
//
// HWT (docs/microarchitecture.md, "Attention's second operand") reads its
// host rows with one transaction as an RHM does, and stands for the host
// laying them out as a weight tile and writing it into weight memory: it
// completes at d = max(c + Lh + Hw + ceil(N*N / Bh), the last row's landing)
// and writes the tile then.
#pragma once

#include <systemc.h>
#include <tlm>

#include <deque>
#include <optional>
#include <vector>

#include "config/arch_config.h"
#include "model/byte_pool.h"
#include "model/memories.h"
#include "model/memory_ports.h"
#include "model/run_log.h"
#include "model/signals.h"
#include "model/timing.h"

namespace tpu::model {

SC_MODULE(HostDma), public TransferUnit {
  sc_in<bool> clk;
  sc_in<UnitCommand> cmd;
  sc_out<bool> busy;
  MemoryInitiatorSocket memory;

  HostDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log);
  SC_HAS_PROCESS(HostDma);

  // Called by the controller in the cycle `now` it issues `in` (RHM or WHM),
  // once the unit has completed its previous transfer (in `now` at the
  // latest): sends the transfer's transaction and returns the cycle its last
  // row lands. The transfer starts when the command arrives, at now + 1.
  Accepted accept(const isa::Instruction& in, std::uint32_t seq, Cycle now) override;

  // The fast path's clock: the completion cycle of the transfer in flight.
  // A tick moves every row due by then, so the rows of a transfer land at the
  // latest in its completion cycle; no other unit touches them before
  // (docs/microarchitecture.md: hazards are interlocked until completion).
  Cycle next_activity(Cycle) const { return job_ ? job_->completion : kNever; }

 private:
  struct Job {
    std::uint32_t seq = 0;
    // Decoded at acceptance: an RHM (else a WHM), from the accumulators
    // (WHM.A), and the first row of each side: host memory, and the UB or
    // accumulators.
    bool read = false;
    bool acc = false;
    std::uint64_t host_row = 0;
    std::uint64_t chip_row = 0;
    std::vector<Cycle> lands;         // l_r for each row
    ByteBuffer data;                  // sent as a transaction: RHM's staging, WHM.A's bytes
    bool direct = false;              // the DMA moves the rows through DMI as they land
    bool to_weights = false;          // an HWT: `data` is the tile, written into weight tile chip_row
    std::uint64_t rows_done = 0;
    Cycle completion = 0;
  };
  void tick();
  // Moves the rows of `j` that land by `now`: an RHM's into the UB; a direct
  // WHM's into host memory.
  void land(Job& j, Cycle now);

  const ArchConfig& cfg_;
  Memories& mem_;
  RunLog& log_;
  UnitStats& stats_;
  // Accepted, each starting in the cycle after its acceptance. Two at most:
  // the controller may hand over the next transfer in the cycle the previous
  // one starts, when that one completes in its first cycle.
  std::deque<Job> planned_;
  std::optional<Job> job_;      // in flight
  std::vector<Cycle> spare_lands_;     // a completed job's, reused
  PortClient port_;
  Cycle last_tick_ = 0;
};

}  // namespace tpu::model
