#include "model/host_memory_target.h"

#include <algorithm>
#include <cstring>

namespace tpu::model {

HostMemoryTarget::HostMemoryTarget(sc_core::sc_module_name name, RowMemory<std::int8_t>& host,
                                   std::uint64_t latency, std::uint64_t bytes_per_cycle, bool grants_dmi)
    : MemoryTargetBase(name, reinterpret_cast<unsigned char*>(host.data().data()), host.data().size(), true,
                       grants_dmi),
      host_(host), latency_(latency), bytes_per_cycle_(std::max<std::uint64_t>(bytes_per_cycle, 1)) {}

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
  std::size_t done = 0;
  for (HeldWrite& w : held_) {
    // Rows r with streamed(pre + (r + 1) * row_bytes) <= last: the first
    // (last + 1 - burst_begin) * Bh bytes of the burst have streamed by then.
    if (last < w.burst_begin) break;
    const Cycle span = last - w.burst_begin + 1;
    std::uint64_t landed = w.rows;
    if (span < ceil_div(w.pre + w.rows * w.row_bytes, bytes_per_cycle_)) {
      const std::uint64_t bytes = span * bytes_per_cycle_;
      landed = bytes <= w.pre ? 0 : (bytes - w.pre) / w.row_bytes;
    }
    if (landed > w.stored) {
      const std::uint64_t from = w.stored * w.row_bytes, length = (landed - w.stored) * w.row_bytes;
      if (host_.width() > 0)
        host_.prefault((w.address + from) / host_.width(), ceil_div(length, host_.width()) + 1);
      std::memcpy(host_.data().data() + w.address + from, held_bytes_.data() + w.offset + from, length);
      w.stored = landed;
    }
    if (w.stored < w.rows) break;  // later writes land later still
    ++done;
  }
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(done));
  if (held_.empty()) held_size_ = 0;
}

void HostMemoryTarget::b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay) {
  const Cycle t = request_cycle(delay);
  const std::uint64_t address = trans.get_address();
  const std::uint64_t length = trans.get_data_length();
  bool moves_data = true;  // not a timing query
  const tlm::tlm_command command = check(trans, &moves_data);
  if (command == tlm::TLM_IGNORE_COMMAND) return;
  // Writes that landed before this request are in memory when it is served.
  if (t > 0) store_through(t - 1);
  if (!streaming_ || t > last_arrival_) {  // the channel is idle: a new burst
    streaming_ = true;
    burst_request_ = t;
    burst_bytes_ = 0;
  }
  const Cycle burst_begin = burst_request_ + latency_;
  const Cycle arrival = length == 0 ? std::max<Cycle>(burst_begin, 1) - 1
                                    : streamed(burst_begin, burst_bytes_ + length);
  // Rows asked for: each lands with its last byte (ceil((pre + (r + 1) * b) / Bh)
  // kept as a quotient and a remainder, without a division per row).
  RowLandings* rows = RowLandings::rows_of(trans, length);
  const bool per_row = rows != nullptr;
  if (per_row) {
    const std::uint64_t step_q = rows->row_bytes / bytes_per_cycle_;
    const std::uint64_t step_r = rows->row_bytes % bytes_per_cycle_;
    // q, rem: floor and remainder of (pre + (r + 1) * b + Bh - 1) / Bh.
    const std::uint64_t first = burst_bytes_ + rows->row_bytes + bytes_per_cycle_ - 1;
    std::uint64_t q = first / bytes_per_cycle_, rem = first % bytes_per_cycle_;
    for (std::uint64_t r = 0; r < rows->rows; ++r) {
      rows->lands[r] = burst_begin + q - 1;
      q += step_q;
      rem += step_r;
      if (rem >= bytes_per_cycle_) {
        ++q;
        rem -= bytes_per_cycle_;
      }
    }
    rows->filled = true;
  }
  const std::uint64_t pre = burst_bytes_;
  burst_bytes_ += length;
  last_arrival_ = std::max(last_arrival_, arrival);
  if (!moves_data) {
    // A timing query: the DMA moves the bytes through DMI.
  } else if (command == tlm::TLM_READ_COMMAND) {
    std::memcpy(trans.get_data_ptr(), host_.data().data() + address, length);
  } else if (length > 0) {
    if (held_size_ + length > held_bytes_.capacity) {
      ByteBuffer bigger = BytePool::take(std::max(2 * held_bytes_.capacity, held_size_ + length));
      if (held_size_ > 0) std::memcpy(bigger.data(), held_bytes_.data(), held_size_);
      BytePool::give(std::move(held_bytes_));
      held_bytes_ = std::move(bigger);
    }
    std::memcpy(held_bytes_.data() + held_size_, trans.get_data_ptr(), length);
    // Held as its rows (each stored in the cycle it lands) or whole.
    held_.push_back({burst_begin, pre, per_row ? rows->row_bytes : length, per_row ? rows->rows : 1, 0,
                     address, held_size_});
    held_size_ += length;
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
  set_arrival(delay, arrival);
}

}  // namespace tpu::model
