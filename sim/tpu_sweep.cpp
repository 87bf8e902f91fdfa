// tpu-sim sweep (subcommand.h): its options, the runs in child processes
// (each a run layer workload, run/sweep_workload.h) and the results as CSV.
#include "subcommand.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/exit_codes.h"
#include "common/file_io.h"
#include "run/sweep_file.h"
#include "run/sweep_workload.h"

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
    nlohmann::json stats = sweep::run_workload(cfg, t.workload, base_dir, opts, t.name);
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

// SIGINT, SIGTERM or SIGHUP while the runs go: set by the handler, acted on by the
// loop that waits for the children (which kills them, see run_children).
volatile std::sig_atomic_t g_stop_signal = 0;
void note_stop_signal(int sig) { g_stop_signal = sig; }

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};

// Installs note_stop_signal for the stop signals whose action is the default
// (one that is ignored, as under nohup, stays ignored) and restores the
// previous actions on destruction. No SA_RESTART: a nap ends at once.
class StopSignals {
 public:
  StopSignals() {
    for (std::size_t k = 0; k < std::size(kStopSignals); ++k) {
      struct sigaction sa {};
      sa.sa_handler = note_stop_signal;
      sigemptyset(&sa.sa_mask);
      ::sigaction(kStopSignals[k], nullptr, &old_[k]);
      if ((old_[k].sa_flags & SA_SIGINFO) == 0 && old_[k].sa_handler == SIG_DFL)
        ::sigaction(kStopSignals[k], &sa, nullptr);
    }
  }
  ~StopSignals() {
    for (std::size_t k = 0; k < std::size(kStopSignals); ++k) ::sigaction(kStopSignals[k], &old_[k], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_[std::size(kStopSignals)] {};
};

// A timed-out run's error_code, as timeout(1) exits: no tool's exit status.
constexpr int kTimedOutCode = 124;

// A running child: its task and when it started.
struct Child {
  std::size_t task;
  std::chrono::steady_clock::time_point start;
  bool timed_out = false;
};

// The row of a child that left none: timed out, killed or exited.
nlohmann::json lost_row(const Child& c, int status, std::optional<double> timeout_s) {
  nlohmann::json row = nlohmann::json::object();
  if (c.timed_out) {
    row["status"] = "timeout";
    row["error_code"] = kTimedOutCode;
    row["error"] = fmt::format("the run took longer than timeout_s = {} s and was stopped", *timeout_s);
    return row;
  }
  row["status"] = "error";
  row["error_code"] = kExitBadInput;
  row["error"] = WIFSIGNALED(status)
                     ? fmt::format("the run was lost: its process was killed by signal {}", WTERMSIG(status))
                     : fmt::format("the run was lost: its process exited with status {}",
                                   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return row;
}

// Runs tasks[i] in a child process of its own process group, which writes
// its row to `row_file` and exits; returns its pid (-1: fork failed).
pid_t start_child(const Task& task, const sweep::SweepFile& file, const std::string& row_file) {
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid != 0) {
    if (pid > 0) ::setpgid(pid, pid);  // also in the child: whichever runs first
    return pid;
  }
  // The child: in its own group, so that a terminal's Ctrl-C reaches only
  // the sweep, which then ends its children itself; the signals' default
  // actions (the sweep's handler is no business of the child's).
  ::setpgid(0, 0);
  for (const int sig : kStopSignals) ::signal(sig, SIG_DFL);
  int rc = 0;
  try {
    const nlohmann::json row = run_task(task, file.base, file.base_dir, file.opts);
    write_file_atomic(row_file, row.dump());
  } catch (...) {
    rc = 1;
  }
  std::_Exit(rc);
}

void kill_child(pid_t pid) { ::kill(-pid, SIGKILL); }

class Sweep final : public Subcommand {
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
    cmd_->add_option("--timeout", timeout_s_,
                     "stop a run after this many seconds of wall time and report it as timed out "
                     "(default: the file's timeout_s, else none)")
        ->check(CLI::PositiveNumber);
    auto* on = cmd_->add_flag("--progress", progress_on_,
                              "print progress on stderr (default: when it is a terminal)");
    cmd_->add_flag("--no-progress", progress_off_, "print no progress")->excludes(on);
  }
  bool parsed() const override { return cmd_->parsed(); }
  int run() override;

 private:
  // Runs every task in child processes, at most `jobs` at a time, into rows;
  // returns the stop signal (SIGINT, SIGTERM, SIGHUP) if one came, after
  // killing and reaping the children.
  int run_children(const std::vector<Task>& tasks, const sweep::SweepFile& file,
                   std::vector<nlohmann::json>& rows, std::size_t& failed);

  CLI::App* cmd_ = nullptr;
  std::string path_;
  unsigned jobs_ = 0;
  std::string out_;
  std::optional<double> timeout_s_;
  bool progress_on_ = false, progress_off_ = false;
};

int Sweep::run_children(const std::vector<Task>& tasks, const sweep::SweepFile& file,
                        std::vector<nlohmann::json>& rows, std::size_t& failed) {
  // A child writes its row into a file of its own in a private folder, so a
  // run that dies loses only its row.
  const unsigned jobs = jobs_ ? jobs_ : std::max(1u, std::thread::hardware_concurrency());
  char tmpl_buf[4096];
  const std::string tmpl = (std::filesystem::path(temp_folder()) / "tpu-sweep.XXXXXX").string();
  std::snprintf(tmpl_buf, sizeof tmpl_buf, "%s", tmpl.c_str());
  if (!mkdtemp(tmpl_buf)) throw FileError(fmt::format("{}: cannot create a folder", tmpl));
  const std::filesystem::path scratch(tmpl_buf);
  const auto row_path = [&](std::size_t i) { return scratch / fmt::format("run-{:06}.json", i); };
  const std::optional<double> timeout_s = timeout_s_ ? timeout_s_ : file.timeout_s;

  const bool show = progress_on_ || (!progress_off_ && isatty(STDERR_FILENO) == 1);
  std::map<pid_t, Child> running;
  std::size_t next = 0, done = 0;
  const auto start = std::chrono::steady_clock::now();
  const auto collect = [&](pid_t pid, int status) {
    const Child c = running.at(pid);
    running.erase(pid);
    nlohmann::json row;
    try {
      if (c.timed_out) throw std::runtime_error("timed out");
      std::ifstream in(row_path(c.task));
      row = nlohmann::json::parse(in);
    } catch (const std::exception&) {
      row = lost_row(c, status, timeout_s);
      row["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
    }
    std::error_code ec;
    std::filesystem::remove(row_path(c.task), ec);
    rows[c.task] = std::move(row);
    ++done;
    failed += rows[c.task]["status"] != "ok";
    if (show)
      std::cerr << fmt::format("\rtpu-sim sweep: {}/{} runs, {} failed, {:.0f} s", done, tasks.size(),
                               failed,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())
                << std::flush;
  };
  const auto check_timeouts = [&] {
    if (!timeout_s) return;
    const auto now = std::chrono::steady_clock::now();
    for (auto& [pid, c] : running)
      if (!c.timed_out && std::chrono::duration<double>(now - c.start).count() > *timeout_s) {
        c.timed_out = true;
        kill_child(pid);
      }
  };

  const StopSignals stop_signals;
  g_stop_signal = 0;
  while (done < tasks.size() && g_stop_signal == 0) {
    if (next < tasks.size() && running.size() < jobs) {
      const pid_t pid = start_child(tasks[next], file, row_path(next).string());
      if (pid < 0 && running.empty()) throw FileError("cannot start a run: fork failed");
      if (pid > 0) {
        running[pid] = {next++, std::chrono::steady_clock::now()};
        continue;
      }
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      collect(pid, status);
      continue;
    }
    check_timeouts();
    // Short naps: a signal ends one at once, a child's end waits at most this.
    const struct timespec nap {0, 5'000'000};
    ::nanosleep(&nap, nullptr);
  }
  const int sig = g_stop_signal;
  for (const auto& [pid, c] : running) kill_child(pid);
  for (const auto& [pid, c] : running) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (show) std::cerr << '\n';
  std::error_code ec;
  std::filesystem::remove_all(scratch, ec);
  return sig;
}

int Sweep::run() {
  const sweep::SweepFile file = sweep::load_sweep_file(path_);
  std::vector<Task> tasks;
  for (const nlohmann::json& point : file.points)
    for (std::size_t w = 0; w < file.workloads.size(); ++w)
      tasks.push_back({tasks.size(), point, file.names[w], file.workloads[w]});

  std::vector<nlohmann::json> rows(tasks.size());
  std::size_t failed = 0;
  if (const int sig = run_children(tasks, file, rows, failed)) {
    // Stopped: the children are gone and their folder removed; end as the
    // signal would have ended us (the shell sees 128 + its number).
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return 128 + sig;
  }
  const sweep::Grid& grid = file.grid;
  const std::vector<nlohmann::json>& points = file.points;
  const std::vector<nlohmann::json>& workloads = file.workloads;

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

std::unique_ptr<Subcommand> add_sweep_command(CLI::App& app) { return std::make_unique<Sweep>(app); }

}  // namespace tpu::cli
