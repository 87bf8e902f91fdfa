#include "run/sweep_file.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "common/file_io.h"

namespace tpu::sweep {

model::Cycle check_max_cycles(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<model::Cycle>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return v.get<model::Cycle>();
  throw UsageError(fmt::format("max_cycles: expected a number of cycles (an integer >= 0), got {}", v.dump()));
}

double check_timeout(const nlohmann::json& v) {
  if (v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0) return v.get<double>();
  throw UsageError(fmt::format("timeout_s: expected a number of seconds > 0, got {}", v.dump()));
}

namespace {

// The file's top level as an ordered object (the grid keeps its order).
nlohmann::ordered_json read_spec(const std::string& path) {
  nlohmann::ordered_json spec;
  try {
    spec = nlohmann::ordered_json::parse(read_file_text(path));
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (!spec.is_object()) throw FileError(fmt::format("{}: expected a JSON object", path));
  static const std::set<std::string> kKeys = {"base",   "grid",       "workloads",
                                              "engine", "detail",     "max_cycles", "timeout_s"};
  for (const auto& [k, v] : spec.items())
    if (!kKeys.count(k))
      throw FileError(fmt::format("{}: unknown field \"{}\" (base, grid, workloads, engine, detail, "
                                  "max_cycles, timeout_s)",
                                  path, k));
  return spec;
}

nlohmann::json plain(const nlohmann::ordered_json& j) { return nlohmann::json::parse(j.dump()); }

void read_options(const nlohmann::ordered_json& spec, SweepFile& f) {
  const auto text = [&](const char* key, const char* fallback) {
    if (!spec.contains(key)) return std::string(fallback);
    if (!spec[key].is_string()) throw UsageError(fmt::format("{}: expected a name, got {}", key, spec[key].dump()));
    return spec[key].get<std::string>();
  };
  f.opts.engine = text("engine", "systemc");
  check_engine(f.opts.engine);
  f.detail = text("detail", "auto");
  f.opts.detail = parse_detail(f.detail);
  if (spec.contains("max_cycles")) f.opts.max_cycles = check_max_cycles(plain(spec["max_cycles"]));
  if (spec.contains("timeout_s")) f.timeout_s = check_timeout(plain(spec["timeout_s"]));
}

}  // namespace

SweepFile load_sweep_file(const std::string& path) {
  const nlohmann::ordered_json spec = read_spec(path);
  SweepFile f;
  try {
    if (spec.contains("base") && !spec["base"].is_null()) {
      if (!spec["base"].is_object())
        throw UsageError("\"base\" must be an object {\"preset\": ..., \"field\": value, ...}");
      f.base = plain(spec["base"]);
    }
    const nlohmann::ordered_json grid = spec.value("grid", nlohmann::ordered_json::object());
    if (!grid.is_object()) throw UsageError("\"grid\" must be an object {\"field\": [values], ...}");
    for (const auto& [k, v] : grid.items()) f.grid.emplace_back(k, plain(v));
    const nlohmann::json workloads = plain(spec.value("workloads", nlohmann::ordered_json::array()));
    if (!workloads.is_array() || workloads.empty())
      throw UsageError("\"workloads\" must be a non-empty list");
    read_options(spec, f);
    f.points = expand_grid(f.grid);
    std::set<std::string> seen;
    for (std::size_t w = 0; w < workloads.size(); ++w) {
      f.workloads.push_back(workloads[w]);
      f.names.push_back(workload_name(workloads[w], w));
      if (!seen.insert(f.names.back()).second)
        throw UsageError(fmt::format("two workloads are named \"{}\"", f.names.back()));
    }
  } catch (const std::exception& e) {
    throw FileError(fmt::format("{}: {}", path, e.what()));
  }
  f.base_dir = std::filesystem::absolute(path).parent_path().string();
  return f;
}

}  // namespace tpu::sweep
