#include "model/host_dma.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "model/timing.h"

namespace tpu::model {

namespace {

// ACC rows of N int32 as the host sees them: little-endian bytes.
void acc_to_host(const std::int32_t* src, unsigned char* dst, std::uint64_t values) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  std::memcpy(dst, src, values * 4);  // the host's own int32 layout
#else
  for (std::uint64_t j = 0; j < values; ++j) {
    const auto v = static_cast<std::uint32_t>(src[j]);
    for (unsigned b = 0; b < 4; ++b) dst[4 * j + b] = static_cast<unsigned char>(v >> (8 * b));
  }
#endif
}

// The weight tile an HWT makes of `rows` host rows of N bytes at `src`
// (docs/microarchitecture.md): tile row r is row r, or with .T tile row k,
// lane r is lane k of row r; every other byte is zero.
void lay_out_tile(const unsigned char* src, std::uint64_t rows, std::uint64_t n, bool transpose,
                  unsigned char* tile) {
  std::memset(tile, 0, n * n);
  if (!transpose) {
    std::memcpy(tile, src, rows * n);
    return;
  }
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t k = 0; k < n; ++k) tile[k * n + r] = src[r * n + k];
}

}  // namespace

HostDma::HostDma(sc_module_name name, const ArchConfig& cfg, Memories& mem, RunLog& log)
    : sc_module(name), memory("memory"), cfg_(cfg), mem_(mem), log_(log),
      stats_(log.stats.units[std::string(isa::unit_name(isa::Unit::HostDma))]) {
  memory.bind(port_);  // the backward path
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

Accepted HostDma::accept(const isa::Instruction& in, std::uint32_t seq, Cycle now) {
  const auto op0 = static_cast<std::uint64_t>(in.operands[0]);
  const auto op1 = static_cast<std::uint64_t>(in.operands[1]);
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  const std::uint64_t n = cfg_.array_n;
  const bool hwt = in.opcode == isa::Opcode::HWT;
  const bool read = in.opcode == isa::Opcode::RHM || hwt;
  const bool acc = in.opcode == isa::Opcode::WHM && in.has(isa::kFlagWhmAcc);
  const std::uint64_t row_bytes = host_row_bytes(cfg_, in);

  // The transfer this one follows may land its last rows in this very cycle
  // (it completes in `now` at the latest): they are written first, so that a
  // WHM reads them. This cycle's tick finds them done.
  if (job_) land(*job_, now);
  for (Job& p : planned_) land(p, now);

  Job job;
  job.seq = seq;
  job.read = read;
  job.acc = acc;
  job.host_row = read ? op0 : op1;
  job.chip_row = read ? op1 : op0;  // an HWT's weight tile
  job.lands = std::move(spare_lands_);
  job.lands.resize(rows);
  const std::uint64_t bytes = rows * row_bytes;
  if (bytes > std::numeric_limits<unsigned>::max())  // a generic payload's length is 32 bits
    return {0, fmt::format("a host transfer of {} bytes exceeds a TLM transaction's 4 GiB", bytes)};
  // The rows are contiguous in host memory and on chip: one transaction. If
  // it is sent (no DMI), a read goes to a staging buffer until its rows land,
  // and a write sends the rows as they are now (the hazard interlocks keep
  // them until completion).
  auto stage = [&]() -> unsigned char* {
    if (read) {
      job.data = BytePool::take(bytes);
      return job.data.data();
    }
    if (!acc) return reinterpret_cast<unsigned char*>(mem_.ub.row(job.chip_row));
    job.data = BytePool::take(bytes);
    acc_to_host(mem_.acc.row(job.chip_row), job.data.data(), rows * n);
    return job.data.data();
  };
  const PortClient::Sent sent =
      port_.send(*memory.operator->(), read ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND, job.host_row * n,
                 stage, rows, row_bytes, job.lands.data(), now);
  if (!sent.refused.empty())
    return {0, fmt::format("host memory target answered {} for {} rows from host byte {} ({} bytes)",
                           sent.refused, rows, job.host_row * n, bytes)};
  job.direct = sent.direct;
  job.completion = sent.last;
  if (hwt) {
    // Only the host DMA writes host memory, and after this completes: the
    // rows as they are now are the rows the host lays out.
    ByteBuffer tile = BytePool::take(n * n);
    const unsigned char* src = sent.direct ? port_.direct(job.host_row * n) : job.data.data();
    lay_out_tile(src, rows, n, in.has(isa::kFlagHwtTranspose), tile.data());
    BytePool::give(std::move(job.data));
    job.data = std::move(tile);
    job.direct = false;
    job.to_weights = true;
    job.completion = std::max(sent.last, now + duration(cfg_, in));
  }
  const Cycle completion = job.completion;
  planned_.push_back(std::move(job));
  return {completion, {}};
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
    if (job_->read && !job_->to_weights) mem_.ub.prefault(job_->chip_row, job_->lands.size());
    // A WHM storing through the direct pointer: its host rows (those of
    // mem_.host, where the pointer lies in it), 4 per ACC row for WHM.A.
    if (!job_->read && job_->direct) {
      const std::uint64_t n = cfg_.array_n, per = job_->acc ? isa::kHostRowsPerAccRow : 1;
      mem_.host.prefault_bytes(port_.direct(job_->host_row * n), job_->lands.size() * per * n);
    }
  }
  busy.write(job_.has_value());
  if (!job_) return;
  ++stats_.busy_cycles;
  Job& j = *job_;
  land(j, now);
  if (j.rows_done == j.lands.size() && now >= j.completion) {
    if (j.to_weights) std::memcpy(mem_.weights.row(j.chip_row), j.data.data(), cfg_.array_n * cfg_.array_n);
    log_.complete(j.seq, now);
    BytePool::give(std::move(j.data));
    spare_lands_ = std::move(j.lands);
    job_.reset();
  }
}

void HostDma::land(Job& j, Cycle now) {
  const std::uint64_t rows = j.lands.size();
  std::uint64_t r = j.rows_done;
  while (r < rows && j.lands[r] <= now) ++r;
  if (r == j.rows_done) return;
  if (j.to_weights) {  // an HWT's rows were laid out at acceptance
    j.rows_done = r;
    return;
  }
  // Rows [rows_done, r) land now. They are contiguous on chip, in host
  // memory and in the staging buffer.
  const std::uint64_t n = cfg_.array_n, first = j.rows_done, count = r - first;
  if (j.read) {
    const unsigned char* src = j.direct ? port_.direct((j.host_row + first) * n) : j.data.data() + first * n;
    std::memcpy(mem_.ub.row(j.chip_row + first), src, count * n);
  } else if (j.direct) {  // WHM: the DMA stores the rows itself
    if (j.acc) {
      acc_to_host(mem_.acc.row(j.chip_row + first),
                  port_.direct((j.host_row + first * isa::kHostRowsPerAccRow) * n), count * n);
    } else {
      std::memcpy(port_.direct((j.host_row + first) * n), mem_.ub.row(j.chip_row + first), count * n);
    }
  }
  j.rows_done = r;
}

}  // namespace tpu::model
