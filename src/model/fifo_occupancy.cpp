#include "model/fifo_occupancy.h"

#include <algorithm>

#include "model/timing.h"

namespace tpu::model {

std::vector<FifoStep> fifo_occupancy(const ArchConfig& cfg, const isa::Program& prog, const RunLog& log) {
  const Cycle n = cfg.array_n;
  std::vector<Cycle> arrival;    // per RW or RWU, in issue order: in the FIFO from then (kNever: not arrived)
  std::vector<Cycle> shadow_free;  // per switch k: the shadow is free for tile k + 1 from then
  ShadowFree shadow;
  for (const RetireRecord& r : log.retired) {
    const isa::Instruction& in = prog.code[r.pc];
    if (pushes_tile(in)) arrival.push_back(r.completed ? r.completion + 1 : kNever);
    if (in.opcode != isa::Opcode::MMC) continue;
    if (in.has(isa::kFlagMmcSwitch)) shadow_free.push_back(shadow.on_switch(r.start, n));
    shadow.on_rows(r.start, static_cast<Cycle>(in.operands[2]));
  }
  std::vector<FifoStep> steps;
  for (std::size_t k = 0; k < arrival.size(); ++k) {
    if (arrival[k] == kNever) continue;
    steps.push_back({arrival[k], +1});
    const Cycle free = k == 0 ? 0 : (k - 1 < shadow_free.size() ? shadow_free[k - 1] : kNever);
    if (free != kNever) steps.push_back({std::max(arrival[k], free), -1});
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const FifoStep& a, const FifoStep& b) { return a.cycle < b.cycle; });
  return steps;
}

}  // namespace tpu::model
