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

#include <cstdint>

#include "model/memories.h"
#include "model/memory_ports.h"

namespace tpu::model {

class WeightMemoryTarget : public MemoryTargetBase {
 public:
  // With `grants_dmi` it gives the DMA a read-only DMI pointer to all of
  // weight memory and answers timing queries (RowLandings).
  WeightMemoryTarget(sc_core::sc_module_name name, const RowMemory<std::int8_t>& weights,
                     std::uint64_t latency, std::uint64_t bytes_per_cycle, bool grants_dmi = true);

  // The default factory: the configuration's Lw and Bw over mem.weights.
  static MemoryTargetFactory factory();

 private:
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) override;

  const RowMemory<std::int8_t>& weights_;
  std::uint64_t latency_, bytes_per_cycle_;
  Cycle last_arrival_ = 0;
};

}  // namespace tpu::model
