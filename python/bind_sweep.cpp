// One sweep run from Python (tpusim.sweep, python/tpusim/_sweep.py): a
// workload on a configuration, sweep files, grids, and the run options'
// checks, all as `tpu-sim sweep` does them (run/sweep_workload.h).
#include <nlohmann/json.hpp>

#include <string>

#include "module.h"
#include "run/sweep_file.h"
#include "run/sweep_workload.h"

namespace tpu::python {
namespace {

py::dict run_workload(py::handle config, py::handle workload, const std::string& base_dir,
                      const std::string& engine, const std::string& detail, py::handle max_cycles,
                      const std::string& name) {
  const ArchConfig cfg = config_arg(config);
  const nlohmann::json w = to_json(workload, "workload");
  const sweep::EngineOptions opts = engine_options(engine, detail, max_cycles, py::none());
  nlohmann::json row;
  {
    py::gil_scoped_release release;
    row = sweep::run_workload(cfg, w, base_dir, opts, name);
  }
  return to_python(row);
}

py::dict sweep_file_dict(py::handle path) {
  const sweep::SweepFile f = sweep::load_sweep_file(path_of(path, "path"));
  py::dict d, grid;
  d["base"] = to_python(f.base);
  for (const auto& [k, v] : f.grid) grid[py::str(k)] = to_python(v);
  d["grid"] = grid;
  d["workloads"] = to_python(nlohmann::json(f.workloads));
  d["names"] = py::cast(f.names);
  d["engine"] = f.opts.engine;
  d["detail"] = f.detail;
  d["max_cycles"] = f.opts.max_cycles;
  d["timeout_s"] = f.timeout_s ? py::object(py::float_(*f.timeout_s)) : py::none();
  d["base_dir"] = f.base_dir;
  return d;
}

}  // namespace

void bind_sweep(py::module_& m) {
  m.def("run_workload", &run_workload, py::arg("config"), py::arg("workload"), py::kw_only(),
        py::arg("base_dir") = "", py::arg("engine") = "systemc", py::arg("detail") = "auto",
        py::arg("max_cycles") = kMaxCycles, py::arg("name") = "",
        R"doc(Runs one sweep workload (a dict, docs/python.md "Workloads") on a configuration
and returns its statistics as one flat dict, as `tpu-sim sweep` does. name: the
workload's name in error messages (default: its "name", else KIND0).)doc");
  m.def("load_sweep_file", &sweep_file_dict, py::arg("path"),
        R"doc(Reads and checks a sweep file as `tpu-sim sweep` does (the same checks and
messages; InputError "PATH: reason"); returns a dict: base, grid (in the file's
order), workloads, names, engine, detail, max_cycles, timeout_s (None if not
given), base_dir.)doc");
  m.def("check_run_options",
        [](const std::string& engine, const std::string& detail, py::handle max_cycles) {
          engine_options(engine, detail, max_cycles, py::none());
        },
        py::arg("engine"), py::arg("detail"), py::arg("max_cycles"),
        "Checks engine, detail and max_cycles as the tools do (UsageError).");
  m.def("expand_grid",
        [](py::handle grid) {
          py::list l;
          if (!py::isinstance<py::dict>(grid)) raise_error(kExitUsage, "grid: expected a dict {field: [values]}");
          sweep::Grid g;
          for (auto item : py::reinterpret_borrow<py::dict>(grid))
            g.emplace_back(py::str(item.first).cast<std::string>(), to_json(item.second, "grid"));
          for (const auto& p : sweep::expand_grid(g)) l.append(to_python(p));
          return l;
        },
        py::arg("grid"), "The points of a grid {field: [values]}: the cartesian product, the last field fastest.");
}

}  // namespace tpu::python
