#include "model/activation_unit.h"

namespace tpu::model {
namespace {

ActFunction function_of(const isa::Instruction& in) {
  if (in.has(isa::kFlagActRelu)) return ActFunction::Relu;
  if (in.has(isa::kFlagActSigmoid)) return ActFunction::Sigmoid;
  if (in.has(isa::kFlagActTanh)) return ActFunction::Tanh;
  return ActFunction::None;
}

}  // namespace

ActivationUnit::ActivationUnit(sc_module_name name, const ArchConfig& cfg, Memories& mem,
                               RunLog& log)
    : sc_module(name), cfg_(cfg), mem_(mem), log_(log), stats_(log.stats.units["activation_unit"]) {
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
  if (command) {
    jobs_.push_back({*command, now});
    mem_.ub.prefault(static_cast<std::uint64_t>(command->instr.operands[1]),
                     static_cast<std::uint64_t>(command->instr.operands[2]));
    const auto rows = static_cast<Cycle>(command->instr.operands[2]);
    completions_.push_back(now + rows + cfg_.act_latency - 1);
    ++stats_.instructions;
  }
  // Read one accumulator row.
  if (!jobs_.empty()) {
    const Job& job = jobs_.front();
    const isa::Instruction& in = job.cmd.instr;
    const Cycle i = now - job.start;
    const auto rows = static_cast<Cycle>(in.operands[2]);
    const std::int32_t* acc = mem_.acc.row(static_cast<std::uint64_t>(in.operands[0]) + i);
    PendingWrite w{now + cfg_.act_latency, static_cast<std::uint64_t>(in.operands[1]) + i,
                   std::vector<std::int8_t>(cfg_.array_n),
                   i + 1 == rows ? static_cast<std::int64_t>(job.cmd.seq) : -1};
    const ActFunction f = function_of(in);
    for (std::size_t j = 0; j < cfg_.array_n; ++j)
      w.data[j] = activate(requantize(acc[j], job.cmd.requant), f, job.cmd.requant.zero_point);
    pipeline_.push_back(std::move(w));
    if (i + 1 == rows) jobs_.pop_front();
  }
  // Busy from an ACT's start to its completion cycle, as every unit.
  const bool busy_now = retired_now || active();
  if (busy_now) ++stats_.busy_cycles;
  return busy_now;
}

}  // namespace tpu::model
