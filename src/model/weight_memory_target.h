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

class WeightMemoryTarget : public sc_core::sc_module, public tlm::tlm_fw_transport_if<> {
 public:
  tlm::tlm_target_socket<> socket;  // bound to this object

  // With `grants_dmi` it gives the DMA a read-only DMI pointer to all of
  // weight memory and answers timing queries (RowLandings).
  WeightMemoryTarget(sc_core::sc_module_name name, const RowMemory<std::int8_t>& weights,
                     std::uint64_t latency, std::uint64_t bytes_per_cycle, bool grants_dmi = true);

  // The default factory: the configuration's Lw and Bw over mem.weights.
  static MemoryTargetFactory factory();

 private:
  // The forward interface: blocking transport and DMI. Non-blocking
  // transport is not offered (TLM_COMPLETED with an error response), debug
  // transport moves nothing.
  void b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) override;
  bool get_direct_mem_ptr(tlm::tlm_generic_payload& trans, tlm::tlm_dmi& dmi) override;
  tlm::tlm_sync_enum nb_transport_fw(tlm::tlm_generic_payload& trans, tlm::tlm_phase&,
                                     sc_core::sc_time&) override {
    trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return tlm::TLM_COMPLETED;
  }
  unsigned int transport_dbg(tlm::tlm_generic_payload&) override { return 0; }

  const RowMemory<std::int8_t>& weights_;
  std::uint64_t latency_, bytes_per_cycle_;
  bool grants_dmi_;
  Cycle last_arrival_ = 0;
};

}  // namespace tpu::model
