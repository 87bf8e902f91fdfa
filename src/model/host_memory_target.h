// The default host memory target: host memory behind a streaming channel of
// latency Lh and Bh bytes per cycle (docs/microarchitecture.md, "Memory
// ports"). A transaction requested while the channel is idle opens a burst
// whose first byte moves Lh cycles later; one requested while a burst streams
// joins it, its bytes following the burst's. With the host DMA sending a
// transfer's rows together, row r of a transfer started at s lands at
// s + Lh + ceil((r + 1) * b / Bh) - 1: the host DMA's documented timing.
//
// Reads copy from host memory at the call. Writes are stored in the cycle
// they land: the target holds them until a later transaction is requested
// after that cycle, or until the run ends (store_through), so that a run
// stopped by a fault holds exactly the rows written by then.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <vector>

#include "model/byte_pool.h"
#include "model/memories.h"
#include "model/memory_ports.h"

namespace tpu::model {

class HostMemoryTarget : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<HostMemoryTarget> socket;

  HostMemoryTarget(sc_core::sc_module_name name, RowMemory<std::int8_t>& host, std::uint64_t latency,
                   std::uint64_t bytes_per_cycle);

  // Stores every held write that lands in or before `last` (the run's last
  // cycle); drops the rest, which a run stopped in `last` never wrote.
  void store_through(Cycle last);

  // The default factory: the configuration's Lh and Bh over mem.host.
  static MemoryTargetFactory factory();

  ~HostMemoryTarget() override;

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);

  struct HeldWrite {
    Cycle cycle;
    std::uint64_t address, offset, length;  // offset into held_bytes_
  };

  RowMemory<std::int8_t>& host_;
  std::uint64_t latency_, bytes_per_cycle_;
  bool streaming_ = false;     // a burst has been opened
  Cycle burst_request_ = 0;    // t_0: the cycle the burst was requested in
  std::uint64_t burst_bytes_ = 0;
  Cycle last_arrival_ = 0;
  std::vector<HeldWrite> held_;  // in request order
  Cycle first_held_ = 0;         // the earliest cycle in held_ (when not empty)
  ByteBuffer held_bytes_;        // the held writes' data, held_size_ bytes
  std::size_t held_size_ = 0;
};

}  // namespace tpu::model
