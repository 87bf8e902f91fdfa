#include "model/host_dma.h"

#include <algorithm>
#include <cstring>

#include "model/timing.h"

namespace tpu::model {

HostDma::HostDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log)
    : sc_module(name), cfg_(cfg), mem_(mem), log_(log), stats_(log.stats.units["host_dma"]) {
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void HostDma::move_row(const isa::Instruction& in, std::uint64_t r) {
  const auto op0 = static_cast<std::uint64_t>(in.operands[0]);
  const auto op1 = static_cast<std::uint64_t>(in.operands[1]);
  const std::uint64_t n = cfg_.array_n;
  if (in.opcode == isa::Opcode::RHM) {
    std::memcpy(mem_.ub.row(op1 + r), mem_.host.row(op0 + r), n);
  } else if (!in.has(isa::kFlagWhmAcc)) {
    std::memcpy(mem_.host.row(op1 + r), mem_.ub.row(op0 + r), n);
  } else {
    // One ACC row of N int32, little-endian, fills kHostRowsPerAccRow host rows.
    const std::int32_t* src = mem_.acc.row(op0 + r);
    auto* dst = reinterpret_cast<std::uint8_t*>(mem_.host.row(op1 + r * isa::kHostRowsPerAccRow));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    // The host's own int32 layout is the one written.
    std::memcpy(dst, src, 4 * n);
    return;
#endif
    for (std::uint64_t j = 0; j < n; ++j) {
      const auto v = static_cast<std::uint32_t>(src[j]);
      for (unsigned b = 0; b < 4; ++b) dst[4 * j + b] = static_cast<std::uint8_t>(v >> (8 * b));
    }
  }
}

void HostDma::tick() {
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped within a transfer were busy.
  if (job_ && now > last_tick_ + 1) stats_.busy_cycles += now - last_tick_ - 1;
  last_tick_ = now;
  if (cmd.read().valid) {
    job_ = Job{cmd.read(), now, 0, now + duration(cfg_, cmd.read().instr) - 1};
    ++stats_.instructions;
    const isa::Instruction& in = job_->cmd.instr;
    const auto dst = static_cast<std::uint64_t>(in.operands[1]);
    const auto rows = static_cast<std::uint64_t>(in.operands[2]);
    if (in.opcode == isa::Opcode::RHM) mem_.ub.prefault(dst, rows);
    else mem_.host.prefault(dst, in.has(isa::kFlagWhmAcc) ? rows * isa::kHostRowsPerAccRow : rows);
  }
  busy.write(job_.has_value());
  if (!job_) return;
  ++stats_.busy_cycles;
  const Job& j = *job_;
  if (now < j.start + cfg_.host_latency) return;
  const isa::Instruction& in = j.cmd.instr;
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  const std::uint64_t row_bytes = host_row_bytes(cfg_, in);
  const std::uint64_t bytes =
      std::min(rows * row_bytes, (now - j.start - cfg_.host_latency + 1) * cfg_.host_bytes_per_cycle);
  const std::uint64_t rows_done = bytes / row_bytes;
  for (std::uint64_t r = j.rows_done; r < rows_done; ++r) move_row(in, r);
  job_->rows_done = rows_done;
  if (rows_done == rows) {
    log_.complete(j.cmd.seq, now);
    job_.reset();
  }
}

}  // namespace tpu::model
