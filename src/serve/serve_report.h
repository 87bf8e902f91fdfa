// What tpu-sim serve reads and writes besides the simulation (docs/serving.md):
// an arrival trace file, and a summary as text and as the statistics JSON
// whose field names scripts rely on.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "serve/serving_sim.h"

namespace tpu::serve {

// A trace: one arrival time per line in milliseconds, nondecreasing; blank
// lines and text after '#' are ignored. Returns the times in seconds. Throws
// FileError ("PATH:LINE: ...") for a line that is not one finite time >= 0,
// times out of order, or a file without any time.
std::vector<double> read_trace(const std::string& path);

// The fields of docs/serving.md, "Statistics": requests, batches,
// mean_batch, latency_ms {p50, p90, p99, max, mean}, throughput_ips,
// tpu_busy_fraction, host_share_of_tpu_time, avg_power_w and
// energy_per_inference_j (null without an energy model).
nlohmann::json summary_json(const ServeSummary& s);

// Each batch size's cost: [{size, cycles, seconds, energy_j (null when
// absent)}], smallest size first.
nlohmann::json batch_costs_json(const std::map<std::size_t, BatchCost>& costs);

// One line per statistic, for the terminal.
std::string summary_text(const ServeSummary& s);

// The header and one row of the --sweep-batch table.
std::string sweep_header();
std::string sweep_row(std::size_t max_batch, const ServeSummary& s);

}  // namespace tpu::serve
