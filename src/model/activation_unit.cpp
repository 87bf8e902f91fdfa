#include "model/activation_unit.h"

namespace tpu::model {
namespace {

// ACT's and VEC's activation flags are the same bits.
ActFunction function_of(const isa::Instruction& in) {
  if (in.has(isa::kFlagActRelu)) return ActFunction::Relu;
  if (in.has(isa::kFlagActSigmoid)) return ActFunction::Sigmoid;
  if (in.has(isa::kFlagActTanh)) return ActFunction::Tanh;
  return ActFunction::None;
}

}  // namespace

ActivationUnit::ActivationUnit(sc_module_name name, const ArchConfig& cfg, Memories& mem,
                               RunLog& log)
    : sc_module(name), cfg_(cfg), mem_(mem), log_(log), stats_(log.stats.units[std::string(isa::unit_name(isa::Unit::ActivationUnit))]),
      vec_values_(cfg.array_n) {
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void ActivationUnit::tick() {
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped (none in the detailed path): no
  // command arrived in them.
  for (Cycle t = last_tick_ + 1; t < now && active(); ++t) step(t, nullptr);
  last_tick_ = now;
  busy.write(step(now, cmd.read().valid ? &cmd.read() : nullptr));
}

bool ActivationUnit::step(Cycle now, const UnitCommand* command) {
  if (command) {
    jobs_.push_back({*command, now});
    const isa::Instruction& in = command->instr;
    mem_.ub.prefault(static_cast<std::uint64_t>(in.operands[1]),
                     static_cast<std::uint64_t>(in.operands[2]));
    completions_.push_back(now + duration(cfg_, in, command->conv) - 1);
    ++stats_.instructions;
  }
  // This cycle's read (an ACC row of an ACT, or a window position of a POOL),
  // before this cycle's writes: a write is visible from the next cycle on.
  if (!jobs_.empty()) {
    switch (jobs_.front().cmd.instr.opcode) {
      case isa::Opcode::POOL: read_pool(now); break;
      case isa::Opcode::VEC: read_vec(now); break;
      default: read_act(now); break;
    }
  }
  // Writes leaving the pipeline this cycle.
  bool retired_now = false;
  while (!pipeline_.empty() && pipeline_.front().due == now) {
    PendingWrite& w = pipeline_.front();
    std::copy(w.data.begin(), w.data.end(), mem_.ub.row(w.ub_row));
    if (w.retire_seq >= 0) {
      log_.complete(static_cast<std::size_t>(w.retire_seq), now);
      completions_.pop_front();
      retired_now = true;
    }
    pipeline_.pop_front();
  }
  // Busy from an instruction's start to its completion cycle, as every unit.
  const bool busy_now = retired_now || active();
  if (busy_now) ++stats_.busy_cycles;
  return busy_now;
}

void ActivationUnit::read_act(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const Cycle i = now - job.start;
  const auto rows = static_cast<Cycle>(in.operands[2]);
  const std::int32_t* acc = mem_.acc.row(static_cast<std::uint64_t>(in.operands[0]) + i);
  PendingWrite w{now + cfg_.act_latency, static_cast<std::uint64_t>(in.operands[1]) + i,
                 std::vector<std::int8_t>(cfg_.array_n),
                 i + 1 == rows ? static_cast<std::int64_t>(job.cmd.seq) : -1};
  activate_row(acc, cfg_.array_n, job.cmd.requant, function_of(in), w.data.data());
  pipeline_.push_back(std::move(w));
  if (i + 1 == rows) jobs_.pop_front();
}

// Row i reads A's row and B's (or B's one row, broadcast) at start + i and
// writes like an ACT: v, exact in int32, is ACT's accumulator value.
void ActivationUnit::read_vec(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const isa::VecRegs& r = job.cmd.conv.vec;
  const Cycle i = now - job.start;
  const auto rows = static_cast<Cycle>(in.operands[2]);
  const std::int8_t* a = mem_.ub.row(static_cast<std::uint64_t>(in.operands[0]) + i);
  const std::int8_t* b = mem_.ub.row(std::uint64_t{r.b_row} + (r.broadcast ? 0 : i));
  PendingWrite w{now + cfg_.act_latency, static_cast<std::uint64_t>(in.operands[1]) + i,
                 std::vector<std::int8_t>(cfg_.array_n),
                 i + 1 == rows ? static_cast<std::int64_t>(job.cmd.seq) : -1};
  std::int32_t* v = vec_values_.data();
  for (std::size_t j = 0; j < cfg_.array_n; ++j) v[j] = vec_combine(a[j], b[j], r);
  activate_row(v, cfg_.array_n, job.cmd.requant, function_of(in), w.data.data());
  pipeline_.push_back(std::move(w));
  if (i + 1 == rows) jobs_.pop_front();
}

// Window position p of output pixel i is read at start + i * K + p (K window
// positions, row-major); the pixel is written one cycle after its last read.
void ActivationUnit::read_pool(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const isa::ConvGeometry& g = job.cmd.conv;
  const std::uint64_t k = g.window(), t = now - job.start, i = t / k, p = t % k;
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  const bool average = in.has(isa::kFlagPoolAverage);
  const std::size_t n = cfg_.array_n;
  if (p == 0) {
    pool_acc_.assign(n, 0);
    pool_any_ = false;
  }
  const std::int64_t r = g.input_row(i, static_cast<std::uint32_t>(p / g.win_w),
                                     static_cast<std::uint32_t>(p % g.win_w));
  if (r >= 0) {
    const std::int8_t* x = mem_.ub.row(static_cast<std::uint64_t>(in.operands[0]) +
                                       static_cast<std::uint64_t>(r));
    for (std::size_t j = 0; j < n; ++j) {
      if (average)
        pool_acc_[j] += x[j] - g.pad;  // padding adds pad - pad = 0
      else
        pool_acc_[j] = pool_any_ ? std::max<std::int32_t>(pool_acc_[j], x[j]) : x[j];
    }
    pool_any_ = true;
  }
  if (p + 1 < k) return;
  PendingWrite w{now + 1, static_cast<std::uint64_t>(in.operands[1]) + i,
                 std::vector<std::int8_t>(n),
                 i + 1 == rows ? static_cast<std::int64_t>(job.cmd.seq) : -1};
  if (average)
    activate_row(pool_acc_.data(), n, job.cmd.requant, ActFunction::None, w.data.data());
  else
    for (std::size_t j = 0; j < n; ++j) w.data[j] = pool_any_ ? static_cast<std::int8_t>(pool_acc_[j]) : g.pad;
  pipeline_.push_back(std::move(w));
  if (i + 1 == rows) jobs_.pop_front();
}

}  // namespace tpu::model
