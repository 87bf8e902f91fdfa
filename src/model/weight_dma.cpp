#include "model/weight_dma.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/timing.h"

namespace tpu::model {

WeightDma::WeightDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log)
    : sc_module(name), memory("memory"), cfg_(cfg), mem_(mem), log_(log), stats_(log.stats.units[std::string(isa::unit_name(isa::Unit::WeightDma))]) {
  memory.bind(port_);  // the backward path
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

WeightDma::~WeightDma() {
  for (ByteBuffer& b : pushed_data_) BytePool::give(std::move(b));
  for (Job& j : planned_) BytePool::give(std::move(j.data));
  for (Job& j : jobs_) BytePool::give(std::move(j.data));
}

Accepted WeightDma::accept_rwu(const isa::Instruction& in, std::uint32_t seq, Cycle now) {
  const auto ub_row = static_cast<std::uint64_t>(in.operands[0]);
  const auto rows = static_cast<std::uint64_t>(in.operands[1]);
  const std::uint64_t n = cfg_.array_n;
  Job job{seq, 0, 0, BytePool::take(n * n), false};
  std::int8_t* tile = reinterpret_cast<std::int8_t*>(job.data.data());
  std::fill(tile, tile + n * n, std::int8_t{0});
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::int8_t* row = mem_.ub.row(ub_row + r);
    if (in.has(isa::kFlagRwuTranspose)) {
      for (std::uint64_t k = 0; k < n; ++k) tile[k * n + r] = row[k];
    } else {
      std::copy(row, row + n, tile + r * n);
    }
  }
  job.completion = last_completion_ = std::max(now + duration(cfg_, in), last_completion_ + 1);
  planned_.push_back(std::move(job));
  return {last_completion_, {}};
}

Accepted WeightDma::accept(const isa::Instruction& in, std::uint32_t seq, Cycle now) {
  if (in.opcode == isa::Opcode::RWU) return accept_rwu(in, seq, now);
  const auto tile = static_cast<std::uint64_t>(in.operands[0]);
  const std::uint64_t bytes = cfg_.array_n * cfg_.array_n;
  Job job{seq, static_cast<std::uint32_t>(tile), 0, {}, false};
  Cycle landed = 0;
  const PortClient::Sent sent = port_.send(
      *memory.operator->(), tlm::TLM_READ_COMMAND, tile * bytes,
      [&] {
        job.data = BytePool::take(bytes);
        return job.data.data();
      },
      1, bytes, &landed, now);
  if (!sent.refused.empty()) {
    BytePool::give(std::move(job.data));
    return {0, fmt::format("weight memory target answered {} for tile {} (byte {}, {} bytes)", sent.refused,
                           tile, tile * bytes, bytes)};
  }
  job.direct = sent.direct;
  job.completion = last_completion_ = std::max(sent.last, last_completion_ + 1);
  planned_.push_back(std::move(job));
  return {last_completion_, {}};
}

void WeightDma::tick() {
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped within a transfer were busy.
  if (!jobs_.empty() && now > last_tick_ + 1) stats_.busy_cycles += now - last_tick_ - 1;
  last_tick_ = now;
  if (cmd.read().valid && !planned_.empty() && planned_.front().seq == cmd.read().seq) {
    jobs_.push_back(std::move(planned_.front()));
    planned_.pop_front();
    ++stats_.instructions;
  }
  busy.write(!jobs_.empty());
  TilePush push;
  if (!jobs_.empty()) {
    ++stats_.busy_cycles;
    Job& job = jobs_.front();
    if (now == job.completion) {
      push.valid = true;
      push.tile = job.tile;
      if (job.direct) {
        push.data = reinterpret_cast<const std::int8_t*>(port_.direct(job.tile * cfg_.array_n * cfg_.array_n));
      } else {
        ByteBuffer& slot = pushed_data_[pushes_++ % 2];
        BytePool::give(std::move(slot));
        slot = std::move(job.data);
        push.data = reinterpret_cast<const std::int8_t*>(slot.data());
      }
      log_.complete(job.seq, now);
      jobs_.pop_front();
    }
  }
  tile_push.write(push);
  pushed_ = push.valid;
}

}  // namespace tpu::model
