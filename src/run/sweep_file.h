// A sweep file (docs/python.md, "Sweeps"), read and checked once for both
// front ends, `tpu-sim sweep` and tpusim.sweep_file, so that a bad file gets
// the same status (3) and the same message, "FILE: reason", from either:
//   {"base": {...}, "grid": {"field": [values], ...}, "workloads": [...],
//    "engine": "systemc", "detail": "auto", "max_cycles": C, "timeout_s": S}
// A workload itself is checked when it runs: a bad one is its rows' error.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "run/sweep_workload.h"

namespace tpu::sweep {

struct SweepFile {
  nlohmann::json base = nlohmann::json::object();
  Grid grid;                          // in the file's order
  std::vector<nlohmann::json> points; // expand_grid(grid)
  std::vector<nlohmann::json> workloads;
  std::vector<std::string> names;     // workload_name() of each, unique
  EngineOptions opts;                 // engine, detail, max_cycles
  std::string detail = "auto";        // opts.detail by name
  std::optional<double> timeout_s;    // a run's wall-clock limit, seconds
  std::string base_dir;               // the file's folder, absolute: workload paths start here
};

// Reads and checks `path`; throws FileError "PATH: reason".
SweepFile load_sweep_file(const std::string& path);

// max_cycles as the tools take it: an integer >= 0, else UsageError
// "max_cycles: expected ..., got VALUE".
model::Cycle check_max_cycles(const nlohmann::json& value);

// timeout_s: a number of seconds > 0 (UsageError otherwise).
double check_timeout(const nlohmann::json& value);

}  // namespace tpu::sweep
