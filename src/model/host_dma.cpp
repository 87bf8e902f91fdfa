#include "model/host_dma.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "model/timing.h"

namespace tpu::model {

HostDma::HostDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log)
    : sc_module(name), memory("memory"), cfg_(cfg), mem_(mem), log_(log),
      stats_(log.stats.units["host_dma"]) {
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

Accepted HostDma::accept(const isa::Instruction& in, std::uint32_t seq, Cycle now) {
  const auto op0 = static_cast<std::uint64_t>(in.operands[0]);
  const auto op1 = static_cast<std::uint64_t>(in.operands[1]);
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  const std::uint64_t n = cfg_.array_n;
  const bool read = in.opcode == isa::Opcode::RHM;
  const bool acc = !read && in.has(isa::kFlagWhmAcc);
  const std::uint64_t row_bytes = host_row_bytes(cfg_, in);
  const Cycle start = now + 1;

  // The transfer this one follows may land its last rows in this very cycle
  // (it completes in `now` at the latest): they are written first, so that a
  // WHM reads them. This cycle's tick finds them done.
  if (job_) land(*job_, now);
  for (Job& p : planned_) land(p, now);

  Job job;
  job.seq = seq;
  job.in = in;
  job.lands = std::move(spare_lands_);
  job.lands.resize(rows);
  if (read) job.data = BytePool::take(rows * n);
  Cycle landed = start;
  for (std::uint64_t r = 0; r < rows; ++r) {
    unsigned char* data = nullptr;
    std::uint64_t host_row = op1 + r;
    if (read) {
      data = job.data.data() + r * n;
      host_row = op0 + r;
    } else if (!acc) {
      // The UB row as it is now: the hazard interlocks keep it until completion.
      data = reinterpret_cast<unsigned char*>(mem_.ub.row(op0 + r));
    } else {
      // One ACC row of N int32, little-endian, fills kHostRowsPerAccRow host rows.
      host_row = op1 + r * isa::kHostRowsPerAccRow;
      std::int32_t* src = mem_.acc.row(op0 + r);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      data = reinterpret_cast<unsigned char*>(src);  // the host's own int32 layout
#else
      scratch_.resize(row_bytes);
      for (std::uint64_t j = 0; j < n; ++j) {
        const auto v = static_cast<std::uint32_t>(src[j]);
        for (unsigned b = 0; b < 4; ++b) scratch_[4 * j + b] = static_cast<std::uint8_t>(v >> (8 * b));
      }
      data = scratch_.data();
#endif
    }
    trans_.set_command(read ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND);
    trans_.set_address(host_row * n);
    trans_.set_data_ptr(data);
    trans_.set_data_length(static_cast<unsigned>(row_bytes));
    trans_.set_streaming_width(static_cast<unsigned>(row_bytes));
    trans_.set_byte_enable_ptr(nullptr);
    trans_.set_byte_enable_length(0);
    trans_.set_dmi_allowed(false);
    trans_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_core::sc_time delay = kClockPeriod;  // requested at the start of `start`
    memory->b_transport(trans_, delay);
    if (trans_.is_response_error())
      return {0, fmt::format("host memory target answered {} for row {} (host byte {}, {} bytes)",
                             trans_.get_response_string(), r, host_row * n, row_bytes)};
    landed = std::max(landed, arrival_cycle(now, delay, start));
    job.lands[r] = landed;
  }
  job.completion = landed;
  planned_.push_back(std::move(job));
  return {landed, {}};
}

void HostDma::tick() {
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped within a transfer were busy.
  if (job_ && now > last_tick_ + 1) stats_.busy_cycles += now - last_tick_ - 1;
  last_tick_ = now;
  if (cmd.read().valid && !planned_.empty() && planned_.front().seq == cmd.read().seq) {
    job_ = std::move(planned_.front());
    planned_.pop_front();
    ++stats_.instructions;
    const isa::Instruction& in = job_->in;
    if (in.opcode == isa::Opcode::RHM)
      mem_.ub.prefault(static_cast<std::uint64_t>(in.operands[1]),
                       static_cast<std::uint64_t>(in.operands[2]));
  }
  busy.write(job_.has_value());
  if (!job_) return;
  ++stats_.busy_cycles;
  Job& j = *job_;
  land(j, now);
  if (j.rows_done == j.lands.size()) {
    log_.complete(j.seq, now);
    BytePool::give(std::move(j.data));
    spare_lands_ = std::move(j.lands);
    job_.reset();
  }
}

void HostDma::land(Job& j, Cycle now) {
  const std::uint64_t rows = j.lands.size();
  const bool read = j.in.opcode == isa::Opcode::RHM;
  const std::uint64_t n = cfg_.array_n;
  const auto ub_row = static_cast<std::uint64_t>(j.in.operands[1]);
  std::uint64_t r = j.rows_done;
  for (; r < rows && j.lands[r] <= now; ++r)
    if (read) std::memcpy(mem_.ub.row(ub_row + r), j.data.data() + r * n, n);
  j.rows_done = r;
}

}  // namespace tpu::model
