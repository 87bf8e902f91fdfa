#include "model/host_memory_target.h"

#include <algorithm>
#include <cstring>

namespace tpu::model {

HostMemoryTarget::HostMemoryTarget(sc_core::sc_module_name name, RowMemory<std::int8_t>& host,
                                   std::uint64_t latency, std::uint64_t bytes_per_cycle)
    : sc_module(name), socket("socket"), host_(host), latency_(latency),
      bytes_per_cycle_(std::max<std::uint64_t>(bytes_per_cycle, 1)) {
  socket.register_b_transport(this, &HostMemoryTarget::b_transport);
}

HostMemoryTarget::~HostMemoryTarget() { BytePool::give(std::move(held_bytes_)); }

MemoryTargetFactory HostMemoryTarget::factory() {
  return [](const ArchConfig& cfg, Memories& mem, MemoryInitiatorSocket& dma) -> std::shared_ptr<void> {
    auto target = std::make_shared<HostMemoryTarget>("host_memory", mem.host, cfg.host_latency,
                                                     cfg.host_bytes_per_cycle);
    dma.bind(target->socket);
    return target;
  };
}

void HostMemoryTarget::store_through(Cycle last) {
  if (held_.empty() || first_held_ > last) return;
  // One prefault call for the rows about to be written (memories.h).
  std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
  for (const HeldWrite& w : held_)
    if (w.cycle <= last) {
      lo = std::min(lo, w.address);
      hi = std::max(hi, w.address + w.length);
    }
  if (hi > lo && host_.width() > 0)
    host_.prefault(lo / host_.width(), ceil_div(hi, host_.width()) - lo / host_.width());
  std::vector<HeldWrite> kept;
  for (const HeldWrite& w : held_) {
    if (w.cycle > last) {
      kept.push_back(w);
      continue;
    }
    std::memcpy(host_.data().data() + w.address, held_bytes_.data() + w.offset, w.length);
  }
  held_ = std::move(kept);
  if (held_.empty()) held_size_ = 0;
  if (!held_.empty()) first_held_ = held_.front().cycle;
  for (const HeldWrite& w : held_) first_held_ = std::min(first_held_, w.cycle);
}

void HostMemoryTarget::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const Cycle t = request_cycle(delay);
  const std::uint64_t address = trans.get_address();
  const std::uint64_t length = trans.get_data_length();
  const std::uint64_t size = host_.data().size();
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
  const tlm::tlm_command command = trans.get_command();
  if (command == tlm::TLM_IGNORE_COMMAND) {
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  // Writes that landed before this request are in memory when it is served.
  if (t > 0) store_through(t - 1);
  if (!streaming_ || t > last_arrival_) {  // the channel is idle: a new burst
    streaming_ = true;
    burst_request_ = t;
    burst_bytes_ = 0;
  }
  burst_bytes_ += length;
  const Cycle arrival = std::max<Cycle>(burst_request_ + latency_ + ceil_div(burst_bytes_, bytes_per_cycle_), 1) - 1;
  last_arrival_ = std::max(last_arrival_, arrival);
  if (command == tlm::TLM_READ_COMMAND) {
    std::memcpy(trans.get_data_ptr(), host_.data().data() + address, length);
  } else {
    first_held_ = held_.empty() ? arrival : std::min(first_held_, arrival);
    if (held_size_ + length > held_bytes_.capacity) {
      ByteBuffer bigger = BytePool::take(std::max(2 * held_bytes_.capacity, held_size_ + length));
      if (held_size_ > 0) std::memcpy(bigger.data(), held_bytes_.data(), held_size_);
      BytePool::give(std::move(held_bytes_));
      held_bytes_ = std::move(bigger);
    }
    held_.push_back({arrival, address, held_size_, length});
    std::memcpy(held_bytes_.data() + held_size_, trans.get_data_ptr(), length);
    held_size_ += length;
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  set_arrival(delay, arrival);
}

}  // namespace tpu::model
