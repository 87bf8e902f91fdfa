#include "model/weight_memory_target.h"

#include <algorithm>
#include <cstring>

namespace tpu::model {

WeightMemoryTarget::WeightMemoryTarget(sc_core::sc_module_name name,
                                       const RowMemory<std::int8_t>& weights, std::uint64_t latency,
                                       std::uint64_t bytes_per_cycle, bool grants_dmi)
    : sc_module(name), socket("socket"), weights_(weights), latency_(latency),
      bytes_per_cycle_(std::max<std::uint64_t>(bytes_per_cycle, 1)), grants_dmi_(grants_dmi) {
  socket.bind(*this);
}

MemoryTargetFactory WeightMemoryTarget::factory() {
  return [](const ArchConfig& cfg, Memories& mem, MemoryInitiatorSocket& dma) -> std::shared_ptr<void> {
    auto target = std::make_shared<WeightMemoryTarget>("weight_memory", mem.weights, cfg.weight_latency,
                                                       cfg.weight_bytes_per_cycle);
    dma.bind(target->socket);
    return target;
  };
}

bool WeightMemoryTarget::get_direct_mem_ptr(tlm::tlm_generic_payload&, tlm::tlm_dmi& dmi) {
  dmi.init();  // nothing granted: the whole address space, no access
  if (!grants_dmi_ || weights_.data().size() == 0) return false;
  // Read only: nothing writes weight memory.
  dmi.set_dmi_ptr(reinterpret_cast<unsigned char*>(const_cast<std::int8_t*>(weights_.data().data())));
  dmi.set_start_address(0);
  dmi.set_end_address(weights_.data().size() - 1);
  dmi.allow_read();
  return true;
}

void WeightMemoryTarget::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const Cycle t = request_cycle(delay);
  const std::uint64_t address = trans.get_address();
  const std::uint64_t length = trans.get_data_length();
  const std::uint64_t size = weights_.data().size();
  bool moves_data = true;  // not a timing query
  const tlm::tlm_command command = RowLandings::timed_command(trans, &moves_data);
  if (command == tlm::TLM_WRITE_COMMAND) {
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
  if (command == tlm::TLM_IGNORE_COMMAND) {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  const Cycle begin = std::max(t + latency_, last_arrival_ + 1);
  const Cycle arrival = std::max<Cycle>(begin + ceil_div(length, bytes_per_cycle_), 1) - 1;
  last_arrival_ = arrival;
  if (RowLandings* rows = RowLandings::rows_of(trans, length)) {  // one channel transfer: all at once
    for (std::uint64_t r = 0; r < rows->rows; ++r) rows->lands[r] = arrival;
    rows->filled = true;
  }
  if (moves_data) std::memcpy(trans.get_data_ptr(), weights_.data().data() + address, length);
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  set_arrival(delay, arrival);
}

}  // namespace tpu::model
