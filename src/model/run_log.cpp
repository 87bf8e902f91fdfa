#include "model/run_log.h"

#include <fmt/format.h>

namespace tpu::model {

const char* stall_cause_name(StallCause c) {
  switch (c) {
    case StallCause::Raw: return "raw_hazard";
    case StallCause::War: return "war_hazard";
    case StallCause::Waw: return "waw_hazard";
    case StallCause::UnitBusy: return "unit_busy";
    case StallCause::FifoFull: return "fifo_full";
    case StallCause::WeightsNotReady: return "weights_not_ready";
    case StallCause::Drain: return "drain";
  }
  return "?";
}

std::string Fault::message() const {
  return fmt::format("fault at pc {} ({}), cycle {}: {}", pc, instruction, cycle, reason);
}

}  // namespace tpu::model
