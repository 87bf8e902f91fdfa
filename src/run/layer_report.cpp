#include "run/layer_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace tpu::run {
namespace {

std::string shape_text(std::uint64_t batch, const std::vector<std::size_t>& shape) {
  std::string s = std::to_string(batch);
  for (std::size_t d : shape) s += "x" + std::to_string(d);
  return s;
}

// RFC 4180 quoting when needed.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// A layer's cycles less its array-active, weight-stall and weight-shift
// cycles (network.h: the layer's cycles are these four).
std::uint64_t non_matrix_cycles(const compiler::LayerStats& ls) {
  return ls.cycles - ls.mmc_rows - ls.weight_stall_cycles - ls.weight_shift_cycles;
}

}  // namespace

double layer_utilization(std::uint64_t macs, std::uint64_t cycles, std::uint64_t array_n) {
  const double nn = static_cast<double>(array_n) * static_cast<double>(array_n);
  return cycles ? static_cast<double>(macs) / (static_cast<double>(cycles) * nn) : 0.0;
}

model::Energy layer_energy(const ArchConfig& cfg, const compiler::LayerStats& ls) {
  model::EnergyEvents events = ls.events;
  events.active_pe_macs = std::min(ls.useful_macs, ls.array_macs);
  events.idle_pe_macs = ls.array_macs - events.active_pe_macs;
  return model::energy_of(cfg, events, ls.cycles);
}

std::string layer_report_csv(const std::vector<LayerReportRow>& rows, const ArchConfig& cfg,
                             const std::vector<std::string>& extra_columns) {
  const std::uint64_t array_n = cfg.array_n;
  // Mapping efficiency: the layer's own MACs over the array's (padding lanes
  // and columns, bias passes and diagonal tiles cost array MACs that are not
  // useful).
  std::string csv =
      "layer,type,output_shape,program,cycles,instructions,array_active_cycles,array_macs,"
      "useful_macs,utilization_percent,mapping_efficiency_percent,host_read_bytes,"
      "host_write_bytes,weight_bytes,host_bytes_per_cycle,weight_bytes_per_cycle,"
      "weight_stall_cycles,weight_shift_cycles,non_matrix_cycles,raw_stall_cycles,"
      "input_data_stall_cycles,energy_uj,static_energy_uj,avg_power_w";
  for (const char* unit : model::kEnergyUnitNames) csv += fmt::format(",{}_energy_uj", unit);
  for (const std::string& c : extra_columns) csv += "," + csv_field(c);
  csv += "\n";
  for (const LayerReportRow& row : rows) {
    const compiler::LayerStats& ls = row.stats;
    const auto per_cycle = [&](std::uint64_t bytes) {
      return ls.cycles ? fmt::format("{:.3f}", static_cast<double>(bytes) / static_cast<double>(ls.cycles))
                       : std::string("0");
    };
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{:.3f},{},{},{},{},{},{}", csv_field(row.name), row.type,
        shape_text(row.batch, row.shape), ls.segment ? fmt::to_string(*ls.segment) : "host", ls.cycles,
        ls.instructions, ls.mmc_rows, ls.array_macs, ls.useful_macs,
        100.0 * layer_utilization(ls.array_macs, ls.cycles, array_n),
        ls.array_macs ? fmt::format("{:.3f}", 100.0 * static_cast<double>(ls.useful_macs) /
                                                  static_cast<double>(ls.array_macs))
                      : std::string(""),
        ls.host_read_bytes, ls.host_write_bytes, ls.weight_bytes,
        per_cycle(ls.host_read_bytes + ls.host_write_bytes), per_cycle(ls.weight_bytes));
    csv += fmt::format(",{},{},{},{},{}", ls.weight_stall_cycles, ls.weight_shift_cycles,
                       non_matrix_cycles(ls), ls.raw_stall_cycles, ls.input_data_stall_cycles);
    const model::Energy e = layer_energy(cfg, ls);
    csv += fmt::format(",{:.6g},{:.6g},{:.6g}", 1e6 * e.total_j, 1e6 * e.static_j, e.avg_power_w);
    for (double j : e.unit_j) csv += fmt::format(",{:.6g}", 1e6 * j);
    for (std::size_t c = 0; c < extra_columns.size(); ++c)
      csv += "," + (c < row.extra.size() ? csv_field(row.extra[c]) : std::string());
    csv += "\n";
  }
  return csv;
}

nlohmann::json layer_report_json(const LayerReportRow& row, const ArchConfig& cfg) {
  const std::uint64_t array_n = cfg.array_n;
  const compiler::LayerStats& ls = row.stats;
  nlohmann::json lj;
  lj["name"] = row.name;
  lj["type"] = row.type;
  lj["output_shape"] = row.shape;
  lj["program"] = ls.segment ? nlohmann::json(*ls.segment) : nlohmann::json(nullptr);
  lj["cycles"] = ls.cycles;
  lj["instructions"] = ls.instructions;
  lj["mmc_rows"] = ls.mmc_rows;
  lj["array_macs"] = ls.array_macs;
  lj["useful_macs"] = ls.useful_macs;
  lj["utilization"] = layer_utilization(ls.array_macs, ls.cycles, array_n);
  lj["host_read_bytes"] = ls.host_read_bytes;
  lj["host_write_bytes"] = ls.host_write_bytes;
  lj["weight_bytes"] = ls.weight_bytes;
  // The TPUv1 counters' split of the layer's cycles (docs/microarchitecture.md).
  lj["weight_stall_cycles"] = ls.weight_stall_cycles;
  lj["weight_shift_cycles"] = ls.weight_shift_cycles;
  lj["non_matrix_cycles"] = non_matrix_cycles(ls);
  lj["raw_stall_cycles"] = ls.raw_stall_cycles;
  lj["input_data_stall_cycles"] = ls.input_data_stall_cycles;
  // The energy model (docs/energy.md, "Per layer").
  const model::Energy e = layer_energy(cfg, ls);
  lj["energy_j"] = e.total_j;
  lj["static_energy_j"] = e.static_j;
  lj["avg_power_w"] = e.avg_power_w;
  for (unsigned u = 0; u < model::kNumEnergyUnits; ++u) lj["energy_by_unit_j"][model::kEnergyUnitNames[u]] = e.unit_j[u];
  return lj;
}

}  // namespace tpu::run
