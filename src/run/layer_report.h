// The per-layer report of `tpu-sim net` and `tpu-sim topo`: the --report CSV
// (one row per layer, units in the column names; docs/quantization.md,
// "Model files") and each layer's object in the --stats JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "compiler/network.h"
#include "config/arch_config.h"
#include "model/energy.h"
#include "runtime/layer_stats.h"

namespace tpu::run {

struct LayerReportRow {
  std::string name;
  std::string type;                // compiler::layer_kind_name
  std::uint64_t batch = 0;
  std::vector<std::size_t> shape;  // one sample's output
  compiler::LayerStats stats;
  std::vector<std::string> extra;  // values of the caller's extra columns
};

// Array MACs over cycles x N^2 (0 for no cycles).
double layer_utilization(std::uint64_t macs, std::uint64_t cycles, std::uint64_t array_n);

// A layer's energy (docs/energy.md, "Per layer"): its instructions' events,
// its MACs split into active PEs (its own useful MACs) and idle ones (the
// rest of its array MACs), and the static power over its cycles.
model::Energy layer_energy(const ArchConfig& cfg, const compiler::LayerStats& ls);

// The CSV: a header line, then one line per row; `extra_columns` (names,
// with their units) come after the common columns, their values from each
// row's `extra`.
std::string layer_report_csv(const std::vector<LayerReportRow>& rows, const ArchConfig& cfg,
                             const std::vector<std::string>& extra_columns = {});

// A layer's object in the --stats JSON (name, type, output_shape, program,
// cycles, instructions, mmc_rows, array_macs, useful_macs, utilization,
// host_read_bytes, host_write_bytes, weight_bytes, the TPUv1 counters'
// cycles, energy_j, static_energy_j, avg_power_w, energy_by_unit_j).
nlohmann::json layer_report_json(const LayerReportRow& row, const ArchConfig& cfg);

}  // namespace tpu::run
