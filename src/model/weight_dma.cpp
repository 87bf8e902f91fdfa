#include "model/weight_dma.h"

#include "model/timing.h"

namespace tpu::model {

WeightDma::WeightDma(sc_module_name name, const ArchConfig& cfg, RunLog& log)
    : sc_module(name), cfg_(cfg), log_(log), stats_(log.stats.units["weight_dma"]) {
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void WeightDma::tick() {
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped within a transfer were busy.
  if (!jobs_.empty() && now > last_tick_ + 1) stats_.busy_cycles += now - last_tick_ - 1;
  last_tick_ = now;
  if (cmd.read().valid) {
    last_completion_ = rw_completion(cfg_, now, last_completion_);
    jobs_.emplace_back(cmd.read(), last_completion_);
    ++stats_.instructions;
  }
  busy.write(!jobs_.empty());
  TilePush push;
  if (!jobs_.empty()) {
    ++stats_.busy_cycles;
    const auto& [job, completion] = jobs_.front();
    if (now == completion) {
      push.valid = true;
      push.tile = static_cast<std::uint32_t>(job.instr.operands[0]);
      log_.complete(job.seq, now);
      jobs_.pop_front();
    }
  }
  tile_push.write(push);
  pushed_ = push.valid;
}

}  // namespace tpu::model
