#include "model/systolic_array.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace tpu::model {

SystolicArray::SystolicArray(sc_module_name name, const ArchConfig& cfg, Memories& mem,
                             RunLog& log, bool fast, GemmKernel kernel,
                             const GemmThreading& threading)
    : sc_module(name),
      mem_(mem),
      log_(log),
      stats_(log.stats.units[std::string(isa::unit_name(isa::Unit::MatrixUnit))]),
      n_(cfg.array_n),
      fast_(fast),
      kernel_(gemm_kernel_available(kernel) ? kernel : GemmKernel::Scalar),
      threading_(threading) {
  weights_[0].assign(n_ * n_, 0);
  weights_[1].assign(n_ * n_, 0);
  if (!fast_) {
    // The PE registers and the rows in the array, of the detailed path only.
    history_.resize(2 * n_ + 2);
    x_reg_.assign(n_ * n_, 0);
    x_set_.assign(n_ * n_, 0);
    psum_reg_.assign(n_ * n_, 0);
    for (RowSlot& s : history_) s.x.assign(n_, 0);
  }
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

// Column j's sum left PE (N-1, j) last cycle, for the row read at now - 1 - N - j.
void SystolicArray::write_accumulators(Cycle now) {
  bool wrote = false;
  retired_now_ = false;
  // No row has been read in the last 2N + 1 cycles (step_pes says so): no sum
  // leaves the array now.
  if (!any_rows_) {
    acc_write.write(false);
    return;
  }
  for (std::size_t j = 0; j < n_; ++j) {
    if (now < 1 + n_ + j) break;
    const Cycle u = now - 1 - n_ - j;
    const RowSlot& s = slot(u);
    if (!s.valid) continue;
    std::int32_t* acc = mem_.acc.row(s.acc_row);
    const auto sum = static_cast<std::uint32_t>(psum_reg_[(n_ - 1) * n_ + j]);
    // Two's-complement wrap-around, without signed overflow.
    acc[j] = static_cast<std::int32_t>(s.overwrite ? sum : static_cast<std::uint32_t>(acc[j]) + sum);
    wrote = true;
    if (j + 1 == n_ && !jobs_.empty()) {
      const Job& job = jobs_.front();
      if (u + 1 == job.start + static_cast<Cycle>(job.cmd.instr.operands[2])) {
        log_.complete(job.cmd.seq, now);
        jobs_.pop_front();
        retired_now_ = true;
      }
    }
  }
  acc_write.write(wrote);
}

void SystolicArray::handle_command(Cycle now) {
  const UnitCommand& c = cmd.read();
  if (!c.valid) return;
  ++stats_.instructions;
  // The controller sends the next MMC only once this one has started.
  if (pending_)
    throw std::logic_error(fmt::format("matrix unit: pc {} arrived at cycle {} while pc {} waits",
                                       c.pc, now, pending_->pc));
  pending_ = c;
}

// docs/microarchitecture.md, "Weight buffers": an MMC starts in the cycle it
// arrives, an MMC.S once the shadow has held its tile for a cycle (the
// loaded state is registered). The controller computed the same cycle at
// issue (UnitCommand::start); the detailed path, which ticks every cycle,
// checks that the unit could not start earlier, and both that it can then.
void SystolicArray::try_start(Cycle now) {
  if (!pending_) return;
  const UnitCommand& c = *pending_;
  const bool ready =
      !c.instr.has(isa::kFlagMmcSwitch) || (shadow_ == Shadow::Loaded && now >= loaded_at_ + 1);
  if (now < c.start && !(ready && !fast_)) return;
  if (now != c.start || !ready)
    throw std::logic_error(fmt::format(
        "matrix unit: pc {} {} at cycle {}, where the controller computed its start at {}", c.pc,
        ready ? "could start" : "cannot start", now, c.start));
  start_job(c, now);
  pending_.reset();
}

void SystolicArray::start_job(const UnitCommand& c, Cycle now) {
  if (c.instr.has(isa::kFlagMmcSwitch)) {
    const std::uint8_t old = active_;
    active_ = static_cast<std::uint8_t>(1 - active_);
    shadow_ = Shadow::Free;
    shadow_free_from_ = used_[old] ? std::max<Cycle>(now, last_use_[old] + n_ + 1) : now;
  }
  const auto rows = static_cast<Cycle>(c.instr.operands[2]);
  jobs_.push_back({c, now, now + rows + 2 * n_ - 1, active_});
  if (fast_) {
    maybe_start_in_background(jobs_.back());
    // What read_row records row by row in the detailed path, for all rows at
    // once: they are read in cycles now .. now + rows - 1 with the active set.
    last_use_[active_] = now + rows - 1;
    used_[active_] = true;
  }
}

void SystolicArray::run_loader(Cycle now) {
  if (shadow_ == Shadow::Loading && now == load_start_ + n_ - 1) {
    weights_[1 - active_] = std::move(loading_tile_);
    packed_valid_[1 - active_] = false;
    shadow_ = Shadow::Loaded;
    loaded_at_ = now + 1;
    used_[1 - active_] = false;
    ++loaded_;
  }
  if (shadow_ == Shadow::Free && now >= shadow_free_from_ && !fifo_.empty()) {
    loading_tile_ = std::move(fifo_.front());
    fifo_.pop_front();
    ++popped_;
    shadow_ = Shadow::Loading;
    load_start_ = now;
  }
}

const std::int8_t* SystolicArray::input_row(const UnitCommand& command, std::uint64_t i) {
  const auto base = static_cast<std::uint64_t>(command.instr.operands[0]);
  if (!command.instr.has(isa::kFlagMmcConvolve)) return mem_.ub.row(base + i);
  const std::int64_t r = command.conv.input_row(i);
  if (r >= 0) return mem_.ub.row(base + static_cast<std::uint64_t>(r));
  if (pad_row_.size() != n_ || pad_row_[0] != command.conv.pad) pad_row_.assign(n_, command.conv.pad);
  return pad_row_.data();
}

void SystolicArray::read_row(Cycle now) {
  RowSlot& s = slot(now);
  s.valid = false;
  row_valid.write(false);
  // The newest MMC whose rows are still being read (at most one).
  for (const Job& job : jobs_) {
    const auto rows = static_cast<Cycle>(job.cmd.instr.operands[2]);
    if (now < job.start || now >= job.start + rows) continue;
    const Cycle i = now - job.start;
    s.valid = true;
    s.overwrite = job.cmd.instr.has(isa::kFlagMmcOverwrite);
    s.weight_set = active_;
    s.acc_row = static_cast<std::uint64_t>(job.cmd.instr.operands[1]) + i;
    const std::int8_t* x = input_row(job.cmd, i);
    std::copy(x, x + n_, s.x.begin());
    last_use_[active_] = now;
    used_[active_] = true;
    row_valid.write(true);
    any_rows_ = true;
    rows_in_flight_until_ = now + 2 * n_ + 1;
    break;
  }
}

// One clock of every PE. Updating from the bottom-right corner backwards lets
// each PE read its neighbours' values from the previous cycle in place.
void SystolicArray::step_pes(Cycle now) {
  if (!any_rows_) return;
  if (now > rows_in_flight_until_) {
    any_rows_ = false;
    return;
  }
  for (std::size_t k = n_; k-- > 0;) {
    // x entering PE (k, 0) was read from the UB at now - 1 - k.
    std::int8_t x_in = 0;
    std::uint8_t set_in = 0;
    if (now >= 1 + k) {
      const RowSlot& s = slot(now - 1 - k);
      if (s.valid) {
        x_in = s.x[k];
        set_in = s.weight_set;
      }
    }
    std::int8_t* xr = &x_reg_[k * n_];
    std::uint8_t* xs = &x_set_[k * n_];
    std::int32_t* ps = &psum_reg_[k * n_];
    const std::int32_t* ps_above = k ? &psum_reg_[(k - 1) * n_] : nullptr;
    const std::int8_t* w0 = &weights_[0][k * n_];
    const std::int8_t* w1 = &weights_[1][k * n_];
    for (std::size_t j = n_; j-- > 0;) {
      const std::int8_t x = j ? xr[j - 1] : x_in;
      const std::uint8_t set = j ? xs[j - 1] : set_in;
      const std::int32_t w = set ? w1[j] : w0[j];
      const auto above = ps_above ? static_cast<std::uint32_t>(ps_above[j]) : 0u;
      ps[j] = static_cast<std::int32_t>(above + static_cast<std::uint32_t>(x * w));
      xr[j] = x;
      xs[j] = set;
    }
  }
}

void SystolicArray::trace_edges(Waveform& wave, const std::string& unit) {
  traced_ = true;
  edge_x_.assign(n_, 0);
  edge_sum_.assign(n_, 0);
  edge_x_valid_ = std::make_unique<bool[]>(n_);
  edge_sum_valid_ = std::make_unique<bool[]>(n_);
  for (std::size_t i = 0; i < n_; ++i) {
    const auto add = [&](const int& v, const std::string& name, int width) {
      sc_trace(wave.file(), v, unit + "." + name, width);
      wave.note(unit, name, width);
    };
    wave.add(edge_x_valid_[i], unit, fmt::format("x_in_valid_{}", i));
    add(edge_x_[i], fmt::format("x_in_{}", i), 8);
    wave.add(edge_sum_valid_[i], unit, fmt::format("sum_out_valid_{}", i));
    add(edge_sum_[i], fmt::format("sum_out_{}", i), 32);
  }
}

// x entering PE (k, 0) this cycle, and the sums that left the bottom row last
// cycle and are written to the accumulators now.
void SystolicArray::sample_edges(Cycle now) {
  for (std::size_t i = 0; i < n_; ++i) {
    const RowSlot* in = now >= 1 + i ? &slot(now - 1 - i) : nullptr;
    edge_x_valid_[i] = in != nullptr && in->valid;
    edge_x_[i] = edge_x_valid_[i] ? in->x[i] : 0;
    const RowSlot* out = now >= 1 + n_ + i ? &slot(now - 1 - n_ - i) : nullptr;
    edge_sum_valid_[i] = out != nullptr && out->valid;
    edge_sum_[i] = edge_sum_valid_[i] ? psum_reg_[(n_ - 1) * n_ + i] : 0;
  }
}

const PackedWeights& SystolicArray::packed(std::uint8_t set) {
  if (!packed_valid_[set]) {
    packed_[set] = pack_weights(weights_[set].data(), n_, kernel_);
    packed_valid_[set] = true;
  }
  return packed_[set];
}

void SystolicArray::gather_rows(const UnitCommand& command, std::vector<const std::int8_t*>& rows_out,
                                std::vector<std::int8_t>& pad) const {
  const isa::Instruction& in = command.instr;
  const auto rows = static_cast<std::size_t>(in.operands[2]);
  const auto base = static_cast<std::uint64_t>(in.operands[0]);
  rows_out.resize(rows);
  if (in.has(isa::kFlagMmcConvolve)) {
    pad.assign(n_, command.conv.pad);
    for (std::size_t i = 0; i < rows; ++i) {
      const std::int64_t r = command.conv.input_row(i);
      rows_out[i] = r >= 0 ? mem_.ub.row(base + static_cast<std::uint64_t>(r)) : pad.data();
    }
  } else {
    const std::int8_t* x = mem_.ub.row(base);
    for (std::size_t i = 0; i < rows; ++i) rows_out[i] = x + i * n_;
  }
}

void SystolicArray::compute_mmc(const Job& job) {
  const isa::Instruction& in = job.cmd.instr;
  mem_.acc.prefault(static_cast<std::uint64_t>(in.operands[1]), static_cast<std::uint64_t>(in.operands[2]));
  gather_rows(job.cmd, row_ptrs_, pad_row_);
  int8_gemm_rows(row_ptrs_.data(), row_ptrs_.size(), packed(job.weight_set),
                 mem_.acc.row(static_cast<std::uint64_t>(in.operands[1])),
                 in.has(isa::kFlagMmcOverwrite), threading_);
}

// An MMC of at least async_macs MACs, all of whose predecessors in flight are
// in the background too, is computed from its start on the queue's thread
// (so that MMCs into the same rows keep their order). It reads what the
// synchronous computation at d would read: the UB rows and the weight set
// are not written before d, and no one reads or writes its ACC rows before
// d + 1 (systolic_array.h). An overwriting MMC first keeps the rows it
// overwrites, so that a fault can undo it (undo_background).
void SystolicArray::maybe_start_in_background(Job& job) {
  const isa::Instruction& in = job.cmd.instr;
  const auto rows = static_cast<std::size_t>(in.operands[2]);
  if (rows == 0) return;
  for (const Job& ahead : jobs_)
    if (&ahead != &job && !ahead.background) return;
  const PackedWeights& w = packed(job.weight_set);
  const std::size_t per_row = w.macs_per_row();
  if (rows * per_row < std::max<std::size_t>(threading_.async_macs, 1)) return;
  auto bg = std::make_unique<Background>();
  gather_rows(job.cmd, bg->rows, bg->pad);
  bg->overwrite = in.has(isa::kFlagMmcOverwrite);
  const auto acc_row = static_cast<std::uint64_t>(in.operands[1]);
  mem_.acc.prefault(acc_row, rows);
  Background* b = bg.get();
  std::int32_t* acc = mem_.acc.row(acc_row);
  const std::size_t n = n_;
  const GemmThreading threading = threading_;
  job.background = std::move(bg);
  job.ticket = queue_.submit([b, acc, n, rows, &w, threading] {
    if (b->overwrite) b->kept.assign(acc, acc + rows * n);
    int8_gemm_rows(b->rows.data(), rows, w, acc, b->overwrite, threading);
  });
}

// After a fault: the MMCs computed in the background are taken back, latest
// first, so that flush_partial finds the accumulators as they were before
// them: an overwriting MMC's rows from what it kept, an accumulating one's by
// subtracting its products (int32 wrap-around both ways).
void SystolicArray::undo_background() {
  queue_.wait_all();
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    if (!it->background) continue;
    const Background& b = *it->background;
    const isa::Instruction& in = it->cmd.instr;
    const auto rows = static_cast<std::size_t>(in.operands[2]);
    std::int32_t* acc = mem_.acc.row(static_cast<std::uint64_t>(in.operands[1]));
    if (b.overwrite) {
      std::copy(b.kept.begin(), b.kept.end(), acc);
      continue;
    }
    std::vector<std::int32_t> products(rows * n_);
    int8_gemm_rows(b.rows.data(), rows, packed(it->weight_set), products.data(), true, threading_);
    for (std::size_t e = 0; e < products.size(); ++e)
      acc[e] = static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[e]) -
                                         static_cast<std::uint32_t>(products[e]));
  }
}

void SystolicArray::flush_partial(Cycle t) {
  undo_background();
  for (const Job& job : jobs_) {
    const isa::Instruction& in = job.cmd.instr;
    const auto rows = static_cast<Cycle>(in.operands[2]);
    const bool overwrite = in.has(isa::kFlagMmcOverwrite);
    const std::int8_t* w = weights_[job.weight_set].data();
    for (Cycle i = 0; i < rows; ++i) {
      const Cycle u = job.start + i;  // read cycle of row i
      if (u > t) continue;
      const std::int8_t* x = input_row(job.cmd, static_cast<std::uint64_t>(i));
      std::int32_t* acc = mem_.acc.row(static_cast<std::uint64_t>(in.operands[1]) + i);
      // Column j is written at u + N + j + 1.
      for (std::size_t j = 0; j < n_ && u + n_ + j + 1 <= t; ++j) {
        std::uint32_t sum = 0;
        for (std::size_t k = 0; k < n_; ++k)
          sum += static_cast<std::uint32_t>(x[k] * w[k * n_ + j]);
        const std::uint32_t old = static_cast<std::uint32_t>(acc[j]);
        acc[j] = static_cast<std::int32_t>(overwrite ? sum : old + sum);
      }
    }
  }
  jobs_.clear();
}

Cycle SystolicArray::next_activity(Cycle now) const {
  if (counters_changed_) return now + 1;
  Cycle next = jobs_.empty() ? kNever : jobs_.front().completion;
  if (pending_) next = std::min(next, std::max<Cycle>(pending_->start, now + 1));
  if (shadow_ == Shadow::Loading) next = std::min(next, load_start_ + n_ - 1);
  if (shadow_ == Shadow::Free && !fifo_.empty())
    next = std::min(next, std::max(shadow_free_from_, now + 1));
  return next;
}

void SystolicArray::tick_fast(Cycle now) {
  // Cycles the clock skipped: busy if an MMC was in flight (none completed).
  if (!jobs_.empty() && now > last_tick_ + 1) stats_.busy_cycles += now - last_tick_ - 1;
  last_tick_ = now;
  const std::uint32_t popped = popped_, loaded = loaded_;
  // MMCs completing now (every completion cycle is ticked), before the loader.
  retired_now_ = false;
  while (!jobs_.empty() && jobs_.front().completion <= now) {
    if (jobs_.front().ticket)
      queue_.wait(jobs_.front().ticket);
    else
      compute_mmc(jobs_.front());
    log_.complete(jobs_.front().cmd.seq, now);
    jobs_.pop_front();
    retired_now_ = true;
  }
  accept_and_load(now);
  count_busy_and_publish();
  counters_changed_ = popped_ != popped || loaded_ != loaded;
}

void SystolicArray::tick() {
  const Cycle now = current_cycle();
  if (fast_) return tick_fast(now);
  if (traced_) sample_edges(now);
  write_accumulators(now);
  accept_and_load(now);
  read_row(now);
  step_pes(now);
  count_busy_and_publish();
}

// Both paths, each cycle: take the tile the weight DMA pushes into the FIFO,
// the controller's command, start an MMC and run the weight loader.
void SystolicArray::accept_and_load(Cycle now) {
  if (tile_push.read().valid) {
    const std::int8_t* t = tile_push.read().data;
    fifo_.emplace_back(t, t + n_ * n_);
  }
  handle_command(now);
  try_start(now);
  run_loader(now);
}

// Busy from an MMC's start to its completion cycle, as every unit; the tile
// counters and the FIFO's occupancy to the controller.
void SystolicArray::count_busy_and_publish() {
  if (retired_now_ || !jobs_.empty()) ++stats_.busy_cycles;
  tiles_popped.write(popped_);
  tiles_loaded.write(loaded_);
  fifo_count.write(static_cast<std::uint32_t>(fifo_.size()));
}

}  // namespace tpu::model
