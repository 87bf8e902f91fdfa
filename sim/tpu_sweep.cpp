#include "tpu_sweep.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "common/exit_codes.h"
#include "common/file_io.h"
#include "sweep_workload.h"

namespace tpu::cli {
namespace {

// One run: a grid point and a workload.
struct Task {
  std::size_t index = 0;
  nlohmann::json point;
  std::string name;
  nlohmann::json workload;
};

// A run's row: the grid point, the workload, its status and statistics.
nlohmann::json run_task(const Task& t, const nlohmann::json& base, const std::string& base_dir,
                        const sweep::EngineOptions& opts) {
  nlohmann::json row = nlohmann::json::object();
  const auto start = std::chrono::steady_clock::now();
  try {
    const ArchConfig cfg = sweep::config_of(base, t.point);
    nlohmann::json stats = sweep::run_workload(cfg, t.workload, base_dir, opts);
    for (const auto& [k, v] : stats.items()) row[k] = v;
    row["status"] = "ok";
    row["error_code"] = 0;
    row["error"] = "";
  } catch (const std::exception& e) {
    row["status"] = "error";
    row["error_code"] = sweep::exit_status_of(e);
    row["error"] = sweep::message_of(e);
  }
  row["wall_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return row;
}

std::string csv_field(const nlohmann::json& v) {
  std::string s;
  if (v.is_null()) return "";
  if (v.is_string()) s = v.get<std::string>();
  else if (v.is_boolean()) s = v.get<bool>() ? "True" : "False";
  else s = v.dump();
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

class Sweep final : public SweepCommand {
 public:
  explicit Sweep(CLI::App& app) {
    cmd_ = app.add_subcommand(
        "sweep", "run workloads (GEMMs, networks, programs) on every configuration of a grid");
    cmd_->add_option("sweep", path_,
                     "sweep file (.json): base, grid, workloads (docs/python.md, \"Sweeps\")")
        ->required();
    cmd_->add_option("-j,--jobs", jobs_, "worker processes (default: one per CPU)")
        ->check(CLI::Range(1u, 1024u));
    cmd_->add_option("--out", out_, "write the results here (.csv; default: standard output)");
    auto* on = cmd_->add_flag("--progress", progress_on_,
                              "print progress on stderr (default: when it is a terminal)");
    cmd_->add_flag("--no-progress", progress_off_, "print no progress")->excludes(on);
  }
  bool parsed() const override { return cmd_->parsed(); }
  int run() override;

 private:
  CLI::App* cmd_ = nullptr;
  std::string path_;
  unsigned jobs_ = 0;
  std::string out_;
  bool progress_on_ = false, progress_off_ = false;
};

int Sweep::run() {
  nlohmann::ordered_json spec;  // the grid's fields in their order
  try {
    spec = nlohmann::ordered_json::parse(read_file_text(path_));
  } catch (const nlohmann::json::exception& e) {
    throw FileError(fmt::format("{}: not valid JSON: {}", path_, e.what()));
  }
  if (!spec.is_object()) throw FileError(fmt::format("{}: expected a JSON object", path_));
  static const std::set<std::string> kKeys = {"base", "grid", "workloads", "engine", "detail", "max_cycles"};
  for (const auto& [k, v] : spec.items())
    if (!kKeys.count(k))
      throw FileError(fmt::format("{}: unknown field \"{}\" (base, grid, workloads, engine, detail, "
                                  "max_cycles)",
                                  path_, k));
  const nlohmann::json base = nlohmann::json::parse(spec.value("base", nlohmann::ordered_json::object()).dump());
  const nlohmann::json workloads =
      nlohmann::json::parse(spec.value("workloads", nlohmann::ordered_json::array()).dump());
  const nlohmann::ordered_json grid_json = spec.value("grid", nlohmann::ordered_json::object());
  if (!grid_json.is_object())
    throw FileError(fmt::format("{}: \"grid\" must be an object {{\"field\": [values], ...}}", path_));
  sweep::Grid grid;
  for (const auto& [k, v] : grid_json.items()) grid.emplace_back(k, nlohmann::json::parse(v.dump()));
  if (!workloads.is_array() || workloads.empty())
    throw FileError(fmt::format("{}: \"workloads\" must be a non-empty list", path_));
  sweep::EngineOptions opts;
  try {
    opts.engine = spec.value("engine", std::string("systemc"));
    opts.detail = sweep::parse_detail(spec.value("detail", std::string("auto")));
    opts.max_cycles = spec.value("max_cycles", opts.max_cycles);
    sweep::check_engine(opts.engine);
  } catch (const std::exception& e) {
    throw FileError(fmt::format("{}: {}", path_, e.what()));
  }
  std::vector<nlohmann::json> points;
  try {
    points = sweep::expand_grid(grid);
  } catch (const std::exception& e) {
    throw FileError(fmt::format("{}: {}", path_, e.what()));
  }
  const std::string base_dir = std::filesystem::absolute(path_).parent_path().string();

  std::vector<Task> tasks;
  std::set<std::string> names;
  for (const nlohmann::json& point : points)
    for (std::size_t w = 0; w < workloads.size(); ++w) {
      const std::string name = sweep::workload_name(workloads[w], w);
      if (tasks.size() < workloads.size() && !names.insert(name).second)
        throw FileError(fmt::format("{}: two workloads are named \"{}\"", path_, name));
      tasks.push_back({tasks.size(), point, name, workloads[w]});
    }

  // Each run in a child process of its own (SystemC's kernel is process-
  // global), at most `jobs` at a time; a child writes its row into a file of
  // its own in a private folder, so a run that dies loses only its row.
  const unsigned jobs = jobs_ ? jobs_ : std::max(1u, std::thread::hardware_concurrency());
  char tmpl_buf[4096];
  const std::string tmpl = (std::filesystem::path(temp_folder()) / "tpu-sweep.XXXXXX").string();
  std::snprintf(tmpl_buf, sizeof tmpl_buf, "%s", tmpl.c_str());
  if (!mkdtemp(tmpl_buf)) throw FileError(fmt::format("{}: cannot create a folder", tmpl));
  const std::filesystem::path scratch(tmpl_buf);
  const auto row_path = [&](std::size_t i) { return scratch / fmt::format("run-{:06}.json", i); };

  const bool show = progress_on_ || (!progress_off_ && isatty(STDERR_FILENO) == 1);
  std::vector<nlohmann::json> rows(tasks.size());
  std::map<pid_t, std::size_t> running;
  std::size_t next = 0, done = 0, failed = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto collect = [&](pid_t pid, int status) {
    const std::size_t i = running.at(pid);
    running.erase(pid);
    nlohmann::json row;
    try {
      std::ifstream in(row_path(i));
      row = nlohmann::json::parse(in);
    } catch (const std::exception&) {
      row = nlohmann::json::object();
      row["status"] = "error";
      row["error_code"] = kExitBadInput;
      row["error"] = WIFSIGNALED(status)
                         ? fmt::format("the run was lost: its process was killed by signal {}",
                                       WTERMSIG(status))
                         : fmt::format("the run was lost: its process exited with status {}",
                                       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    std::filesystem::remove(row_path(i));
    rows[i] = std::move(row);
    ++done;
    failed += rows[i]["status"] != "ok";
    if (show)
      std::cerr << fmt::format("\rtpu-sim sweep: {}/{} runs, {} failed, {:.0f} s", done, tasks.size(),
                               failed,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())
                << std::flush;
  };
  while (done < tasks.size()) {
    if (next < tasks.size() && running.size() < jobs) {
      std::cout.flush();
      std::cerr.flush();
      const pid_t pid = fork();
      if (pid < 0) {
        if (running.empty()) throw FileError(fmt::format("cannot start a run: fork failed"));
      } else if (pid == 0) {
        int rc = 0;
        try {
          const nlohmann::json row = run_task(tasks[next], base, base_dir, opts);
          write_file_atomic(row_path(next).string(), row.dump());
        } catch (...) {
          rc = 1;
        }
        std::_Exit(rc);
      } else {
        running[pid] = next++;
        continue;
      }
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid > 0 && running.count(pid)) collect(pid, status);
  }
  if (show) std::cerr << '\n';
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);

  // The table: run, grid fields, workload, status, error, statistics (sorted).
  std::vector<std::string> fields;
  for (const auto& [k, v] : grid) fields.push_back(k);
  const std::set<std::string> fixed(fields.begin(), fields.end());
  std::set<std::string> stats;
  static const std::set<std::string> kFirst = {"status", "error_code", "error", "wall_seconds"};
  for (const nlohmann::json& r : rows)
    for (const auto& [k, v] : r.items())
      if (!kFirst.count(k) && !fixed.count(k)) stats.insert(k);
  std::vector<std::string> columns{"run"};
  columns.insert(columns.end(), fields.begin(), fields.end());
  for (const char* c : {"workload", "status", "error_code", "error"}) columns.emplace_back(c);
  stats.erase("workload");
  stats.erase("run");
  columns.insert(columns.end(), stats.begin(), stats.end());
  columns.emplace_back("wall_seconds");
  std::string csv;
  for (std::size_t c = 0; c < columns.size(); ++c) csv += (c ? "," : "") + csv_field(columns[c]);
  csv += '\n';
  for (const Task& t : tasks) {
    nlohmann::json r = rows[t.index];
    r["run"] = t.index;
    r["workload"] = t.name;
    for (const auto& [k, v] : t.point.items()) r[k] = v;
    for (std::size_t c = 0; c < columns.size(); ++c)
      csv += (c ? "," : "") + (r.contains(columns[c]) ? csv_field(r[columns[c]]) : std::string());
    csv += '\n';
  }
  if (out_.empty()) std::cout << csv;
  else write_file_atomic(out_, csv);
  std::cerr << fmt::format("tpu-sim sweep: {} runs ({} configurations x {} workloads), {} failed\n",
                           tasks.size(), points.size(), workloads.size(), failed);
  return kExitOk;
}

}  // namespace

std::unique_ptr<SweepCommand> add_sweep_command(CLI::App& app) { return std::make_unique<Sweep>(app); }

}  // namespace tpu::cli
