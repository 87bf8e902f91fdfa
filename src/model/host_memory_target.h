// The default host memory target: host memory behind a streaming channel of
// latency Lh and Bh bytes per cycle (docs/microarchitecture.md, "Memory
// ports"). A transaction requested while the channel is idle opens a burst
// whose first byte moves Lh cycles later; one requested while a burst streams
// joins it, its bytes following the burst's. With the host DMA sending a
// transfer's rows together, row r of a transfer started at s lands at
// s + Lh + ceil((r + 1) * b / Bh) - 1: the host DMA's documented timing.
//
// Reads copy from host memory at the call. Writes are stored row by row in
// the cycles they land: the target holds them until a later transaction is
// requested after that cycle, or until the run ends (store_through), so that
// a run stopped by a fault holds exactly the rows written by then.
#pragma once

#include <systemc>
#include <tlm>

#include <cstdint>
#include <vector>

#include "model/byte_pool.h"
#include "model/memories.h"
#include "model/memory_ports.h"

namespace tpu::model {

class HostMemoryTarget : public MemoryTargetBase {
 public:
  // With `grants_dmi` it gives the DMA a DMI pointer to all of host memory
  // and answers timing queries (RowLandings): the DMA then moves the rows
  // itself, each in its landing cycle, and nothing is held here.
  HostMemoryTarget(sc_core::sc_module_name name, RowMemory<std::int8_t>& host, std::uint64_t latency,
                   std::uint64_t bytes_per_cycle, bool grants_dmi = true);

  // Stores every held write that lands in or before `last`.
  void store_through(Cycle last);
  // The run stops (sc_stop, at HLT or a fault) in its last cycle: stores the
  // writes that have landed by then; the rest were never written.
  void end_of_simulation() override { store_through(current_cycle()); }

  // The default factory: the configuration's Lh and Bh over mem.host.
  static MemoryTargetFactory factory();

  ~HostMemoryTarget() override;

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) override;

  // A write transaction held until its rows land: row r (of `rows` rows of
  // `row_bytes`) lands when byte pre + (r + 1) * row_bytes of its burst has
  // streamed; rows before `stored` are in host memory.
  struct HeldWrite {
    Cycle burst_begin;  // t_0 + Lh: the burst's byte B streams by burst_begin + ceil(B / Bh) - 1
    std::uint64_t pre, row_bytes, rows, stored;
    std::uint64_t address, offset;  // in host memory, in held_bytes_
  };
  // The cycle a burst opened at t_0 has streamed `bytes` bytes (> 0).
  Cycle streamed(Cycle burst_begin, std::uint64_t bytes) const {
    return burst_begin + ceil_div(bytes, bytes_per_cycle_) - 1;
  }

  RowMemory<std::int8_t>& host_;
  std::uint64_t latency_, bytes_per_cycle_;
  bool streaming_ = false;     // a burst has been opened
  Cycle burst_request_ = 0;    // t_0: the cycle the burst was requested in
  std::uint64_t burst_bytes_ = 0;
  Cycle last_arrival_ = 0;
  std::vector<HeldWrite> held_;  // in request order, so in landing order
  ByteBuffer held_bytes_;        // the held writes' data, held_size_ bytes
  std::size_t held_size_ = 0;
};

}  // namespace tpu::model
