// A run's statistics as the tools report them: the documented JSON object of
// --stats (docs/microarchitecture.md) and the summary printed on stdout.
#pragma once

#include <nlohmann/json.hpp>

#include "config/arch_config.h"
#include "model/energy.h"
#include "model/run_log.h"

namespace tpu::run {

// The statistics as the documented JSON object (docs/microarchitecture.md).
nlohmann::json stats_json(const ArchConfig& cfg, const model::RunLog& log);

// The energy object of the statistics (docs/energy.md, "Statistics"): the
// events, energy by event kind and by unit, static, dynamic and total joules,
// average power and TOPS/W (2 ops per MAC of `macs`).
nlohmann::json energy_json(const model::Energy& e, const model::EnergyEvents& events, std::uint64_t macs);

// The human-readable summary on stdout.
void print_summary(const ArchConfig& cfg, const model::RunLog& log);

}  // namespace tpu::run
