#include "model/weight_memory_target.h"

#include <algorithm>
#include <cstring>

namespace tpu::model {

WeightMemoryTarget::WeightMemoryTarget(sc_core::sc_module_name name,
                                       const RowMemory<std::int8_t>& weights, std::uint64_t latency,
                                       std::uint64_t bytes_per_cycle)
    : sc_module(name), socket("socket"), weights_(weights), latency_(latency),
      bytes_per_cycle_(std::max<std::uint64_t>(bytes_per_cycle, 1)) {
  socket.register_b_transport(this, &WeightMemoryTarget::b_transport);
}

MemoryTargetFactory WeightMemoryTarget::factory() {
  return [](const ArchConfig& cfg, Memories& mem, MemoryInitiatorSocket& dma) -> std::shared_ptr<void> {
    auto target = std::make_shared<WeightMemoryTarget>("weight_memory", mem.weights, cfg.weight_latency,
                                                       cfg.weight_bytes_per_cycle);
    dma.bind(target->socket);
    return target;
  };
}

void WeightMemoryTarget::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const Cycle t = request_cycle(delay);
  const std::uint64_t address = trans.get_address();
  const std::uint64_t length = trans.get_data_length();
  const std::uint64_t size = weights_.data().size();
  if (trans.get_command() == tlm::TLM_WRITE_COMMAND) {
    trans.set_response_status(tlm::TLM_COMMAND_ERROR_RESPONSE);
    return;
  }
  if (trans.get_byte_enable_ptr() != nullptr) {
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  if (trans.get_streaming_width() < length) {
    trans.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
    return;
  }
  if (address > size || length > size - address) {
    trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    return;
  }
  if (trans.get_command() == tlm::TLM_IGNORE_COMMAND) {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  const Cycle begin = std::max(t + latency_, last_arrival_ + 1);
  const Cycle arrival = std::max<Cycle>(begin + ceil_div(length, bytes_per_cycle_), 1) - 1;
  last_arrival_ = arrival;
  std::memcpy(trans.get_data_ptr(), weights_.data().data() + address, length);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  set_arrival(delay, arrival);
}

}  // namespace tpu::model
