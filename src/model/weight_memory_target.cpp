#include "model/weight_memory_target.h"

#include <algorithm>
#include <cstring>

namespace tpu::model {

WeightMemoryTarget::WeightMemoryTarget(sc_core::sc_module_name name,
                                       const RowMemory<std::int8_t>& weights, std::uint64_t latency,
                                       std::uint64_t bytes_per_cycle, bool grants_dmi)
    // Read only: nothing writes weight memory.
    : MemoryTargetBase(name,
                       reinterpret_cast<unsigned char*>(const_cast<std::int8_t*>(weights.data().data())),
                       weights.data().size(), false, grants_dmi),
      weights_(weights), latency_(latency), bytes_per_cycle_(std::max<std::uint64_t>(bytes_per_cycle, 1)) {}

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
  bool moves_data = true;  // not a timing query
  if (check(trans, &moves_data) == tlm::TLM_IGNORE_COMMAND) return;
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
