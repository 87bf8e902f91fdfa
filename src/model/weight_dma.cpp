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
  if (job_ && now > last_tick_ + 1) stats_.busy_cycles += now - last_tick_ - 1;
  last_tick_ = now;
  if (cmd.read().valid) {
    job_.emplace(cmd.read(), now + duration(cfg_, cmd.read().instr) - 1);
    ++stats_.instructions;
  }
  busy.write(job_.has_value());
  TilePush push;
  if (job_) {
    ++stats_.busy_cycles;
    if (now == job_->second) {
      push.valid = true;
      push.tile = static_cast<std::uint32_t>(job_->first.instr.operands[0]);
      log_.complete(job_->first.seq, now);
      job_.reset();
    }
  }
  tile_push.write(push);
  pushed_ = push.valid;
}

}  // namespace tpu::model
