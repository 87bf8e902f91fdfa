#include "model/weight_dma.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/timing.h"

namespace tpu::model {

WeightDma::WeightDma(sc_module_name name, const ArchConfig& cfg, RunLog& log)
    : sc_module(name), memory("memory"), cfg_(cfg), log_(log), stats_(log.stats.units["weight_dma"]),
      tile_(BytePool::take(cfg.array_n * cfg.array_n)) {
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

Accepted WeightDma::accept(const isa::Instruction& in, std::uint32_t seq, Cycle now) {
  const auto tile = static_cast<std::uint64_t>(in.operands[0]);
  const std::uint64_t bytes = cfg_.array_n * cfg_.array_n;
  const Cycle start = now + 1;
  trans_.set_command(tlm::TLM_READ_COMMAND);
  trans_.set_address(tile * bytes);
  trans_.set_data_ptr(tile_.data());
  trans_.set_data_length(static_cast<unsigned>(bytes));
  trans_.set_streaming_width(static_cast<unsigned>(bytes));
  trans_.set_byte_enable_ptr(nullptr);
  trans_.set_byte_enable_length(0);
  trans_.set_dmi_allowed(false);
  trans_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  sc_core::sc_time delay = kClockPeriod;  // requested at the start of `start`
  memory->b_transport(trans_, delay);
  if (trans_.is_response_error())
    return {0, fmt::format("weight memory target answered {} for tile {} (byte {}, {} bytes)",
                           trans_.get_response_string(), tile, tile * bytes, bytes)};
  last_completion_ = std::max(arrival_cycle(now, delay, start), last_completion_ + 1);
  planned_.push_back({seq, static_cast<std::uint32_t>(tile), last_completion_});
  return {last_completion_, {}};
}

void WeightDma::tick() {
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped within a transfer were busy.
  if (!jobs_.empty() && now > last_tick_ + 1) stats_.busy_cycles += now - last_tick_ - 1;
  last_tick_ = now;
  if (cmd.read().valid && !planned_.empty() && planned_.front().seq == cmd.read().seq) {
    jobs_.push_back(planned_.front());
    planned_.pop_front();
    ++stats_.instructions;
  }
  busy.write(!jobs_.empty());
  TilePush push;
  if (!jobs_.empty()) {
    ++stats_.busy_cycles;
    const Job& job = jobs_.front();
    if (now == job.completion) {
      push.valid = true;
      push.tile = job.tile;
      log_.complete(job.seq, now);
      jobs_.pop_front();
    }
  }
  tile_push.write(push);
  pushed_ = push.valid;
}

}  // namespace tpu::model
