#include "model/run_log.h"

#include <fmt/format.h>

namespace tpu::model {

const char* stall_cause_name(StallCause c) {
  const auto i = static_cast<unsigned>(c);
  return i < kNumStallCauses ? kStallCauseNames[i] : "?";
}

const char* fault_reason(FaultCode c) {
  switch (c) {
    case FaultCode::None: return "no fault";
    case FaultCode::PastEnd: return "ran past the last instruction without HLT";
    case FaultCode::BadAddress: return "address past the end of a memory";
    case FaultCode::DeadlockMmc: return "deadlock: MMC.S waits for a weight tile but no RW is pending";
    case FaultCode::DeadlockRw:
      return "deadlock: RW waits for room in the weight FIFO, which drains only when a later "
             "MMC.S takes the tile in the shadow weights";
    case FaultCode::RwuNoPath:
      return "RWU needs the configuration's ub_weight_path (a weight path from the unified buffer, "
             "beyond TPUv1), which is off";
  }
  return "unknown fault";
}

std::string Fault::message() const {
  return fmt::format("fault at pc {} ({}), cycle {}: {}", pc, instruction, cycle, reason);
}

}  // namespace tpu::model
