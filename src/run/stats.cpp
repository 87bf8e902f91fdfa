#include "run/stats.h"

#include <fmt/format.h>

#include <iostream>
#include <utility>

#include "common/plural.h"

namespace tpu::run {

nlohmann::json energy_json(const model::Energy& e, const model::EnergyEvents& events, std::uint64_t macs) {
  nlohmann::json j;
  for (std::size_t k = 0; k < model::kEnergyEventFields.size(); ++k) {
    const model::EnergyEventField& f = model::kEnergyEventFields[k];
    j["events"][f.name] = events.*f.member;
    j["by_event_j"][f.name] = e.event_j[k];
  }
  j["by_event_j"]["static"] = e.static_j;
  for (unsigned u = 0; u < model::kNumEnergyUnits; ++u) j["by_unit_j"][model::kEnergyUnitNames[u]] = e.unit_j[u];
  j["static_j"] = e.static_j;
  j["dynamic_j"] = e.dynamic_j;
  j["total_j"] = e.total_j;
  j["avg_power_w"] = e.avg_power_w;
  j["tops_per_w"] = e.total_j > 0 ? 2.0 * static_cast<double>(macs) / e.total_j / 1e12 : 0.0;
  return j;
}

nlohmann::json stats_json(const ArchConfig& cfg, const model::RunLog& log) {
  const model::Stats& s = log.stats;
  nlohmann::json j;
  j["array_n"] = cfg.array_n;
  j["cycles"] = s.cycles;
  j["instructions"] = s.instructions;
  j["macs"] = s.macs;
  j["array_active_cycles"] = s.array_active_cycles;
  const double peak = static_cast<double>(s.cycles) * static_cast<double>(cfg.array_n * cfg.array_n);
  j["utilization"] = peak > 0 ? static_cast<double>(s.macs) / peak : 0.0;
  // At the configured clock: 2 operations per MAC of the array's work (the
  // MACs above, padding lanes and columns included).
  const double seconds = static_cast<double>(s.cycles) / (static_cast<double>(cfg.clock_mhz) * 1e6);
  j["clock_mhz"] = cfg.clock_mhz;
  j["seconds"] = seconds;
  j["tops"] = seconds > 0 ? 2.0 * static_cast<double>(s.macs) / seconds / 1e12 : 0.0;
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    j["stall_cycles"][model::stall_cause_name(static_cast<model::StallCause>(c))] = s.stall_cycles[c];
  for (const auto& [name, u] : s.units) {
    j["units"][name]["instructions"] = u.instructions;
    j["units"][name]["busy_cycles"] = u.busy_cycles;
  }
  // The TPUv1 paper's Table 3 rows (docs/microarchitecture.md, "The TPUv1 counters").
  const model::PerfCounters& p = s.tpuv1;
  nlohmann::json& t = j["tpuv1"];
  t["array_active_cycles"] = p.array_active_cycles;
  t["weight_stall_cycles"] = p.weight_stall_cycles;
  t["weight_shift_cycles"] = p.weight_shift_cycles;
  t["non_matrix_cycles"] = p.non_matrix_cycles;
  t["raw_stall_cycles"] = p.raw_stall_cycles;
  t["input_data_stall_cycles"] = p.input_data_stall_cycles;
  t["useful_macs"] = p.useful_macs;
  t["unused_macs"] = p.unused_macs;
  j["halted"] = log.halted;
  if (log.fault) j["fault"] = log.fault->message();
  j["energy"] = energy_json(model::energy_of(cfg, s.events, s.cycles), s.events, s.macs);
  return j;
}

void print_summary(const ArchConfig& cfg, const model::RunLog& log) {
  const nlohmann::json j = stats_json(cfg, log);
  std::cout << fmt::format("cycles        {}\ninstructions  {}\nMACs          {}\n", log.stats.cycles,
                           log.stats.instructions, log.stats.macs);
  std::cout << fmt::format("utilization   {:.2f}% of {}x{} MACs per cycle\n",
                           100.0 * j["utilization"].get<double>(), cfg.array_n, cfg.array_n);
  std::cout << fmt::format("array active  {}\n", plural(log.stats.array_active_cycles, "cycle"));
  std::cout << fmt::format("time          {:.6g} s at {} MHz, {:.4g} TOPS (2 ops per MAC)\n",
                           j["seconds"].get<double>(), cfg.clock_mhz, j["tops"].get<double>());
  const model::PerfCounters& p = log.stats.tpuv1;
  const auto share = [&](std::uint64_t v) {
    return log.stats.cycles ? 100.0 * static_cast<double>(v) / static_cast<double>(log.stats.cycles) : 0.0;
  };
  const double peak = static_cast<double>(log.stats.cycles) * static_cast<double>(cfg.array_n * cfg.array_n);
  const auto of_peak = [&](std::uint64_t macs) { return peak > 0 ? 100.0 * static_cast<double>(macs) / peak : 0.0; };
  std::cout << "TPUv1 counters (the paper's Table 3; % of cycles, MACs % of peak):\n";
  std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", "array active", p.array_active_cycles,
                           share(p.array_active_cycles));
  std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", "useful MACs", p.useful_macs, of_peak(p.useful_macs));
  std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", "unused MACs", p.unused_macs, of_peak(p.unused_macs));
  for (const auto& [name, v] : {std::pair{"weight stall", p.weight_stall_cycles},
                                std::pair{"weight shift", p.weight_shift_cycles},
                                std::pair{"non-matrix", p.non_matrix_cycles},
                                std::pair{"RAW stall", p.raw_stall_cycles},
                                std::pair{"input data stall", p.input_data_stall_cycles}})
    std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", name, v, share(v));
  const nlohmann::json& e = j["energy"];
  std::cout << fmt::format("energy        {:.6g} J ({:.6g} J static), {:.4g} W average, {:.4g} TOPS/W\n",
                           e["total_j"].get<double>(), e["static_j"].get<double>(),
                           e["avg_power_w"].get<double>(), e["tops_per_w"].get<double>());
  std::cout << "energy by unit (J):\n";
  for (const char* unit : model::kEnergyUnitNames)
    std::cout << fmt::format("  {:<18} {:>12.6g}\n", unit, e["by_unit_j"][unit].get<double>());
  std::cout << "unit busy cycles:\n";
  for (const auto& [name, u] : log.stats.units)
    std::cout << fmt::format("  {:<16} {:>10}  ({})\n", name, u.busy_cycles,
                             plural(u.instructions, "instruction"));
  std::cout << "controller stall cycles:\n";
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    std::cout << fmt::format("  {:<18} {:>8}\n",
                             model::stall_cause_name(static_cast<model::StallCause>(c)),
                             log.stats.stall_cycles[c]);
}

}  // namespace tpu::run
