// The default weight memory target: weight memory behind a pipelined channel
// (docs/microarchitecture.md, "Memory ports"). A transaction of n bytes
// requested in cycle t lands at max(t + Lw, a' + 1) + ceil(n / Bw) - 1, where
// a' is the previous transaction's landing cycle: a request's latency
// overlaps the transfers ahead of it, and the channel streams one
// transaction at a time. For a tile that is the weight DMA's documented
// timing. Reads copy from weight memory at the call (nothing writes weight
// memory during a run); writes are refused.
#pragma once

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>

#include "model/memories.h"
#include "model/memory_ports.h"

namespace tpu::model {

class WeightMemoryTarget : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<WeightMemoryTarget> socket;

  WeightMemoryTarget(sc_core::sc_module_name name, const RowMemory<std::int8_t>& weights,
                     std::uint64_t latency, std::uint64_t bytes_per_cycle);

  // The default factory: the configuration's Lw and Bw over mem.weights.
  static MemoryTargetFactory factory();

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);

  const RowMemory<std::int8_t>& weights_;
  std::uint64_t latency_, bytes_per_cycle_;
  Cycle last_arrival_ = 0;
};

}  // namespace tpu::model
