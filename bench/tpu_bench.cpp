// tpu-bench: simulation speed of every engine on GEMMs, against the host's own
// GEMM throughput (docs/performance.md).
//
//   tpu-bench [--csv FILE] [--markdown FILE] [--smoke] [--tpu-sim PATH]
//
// For each array size N (the tpuv1 preset with array_n = N) and each GEMM
// M x K x Nout, every engine runs the program the GEMM compiler makes, on
// random int8 inputs, and reports simulated cycles, MACs, wall time, cycles
// and MACs per second and peak memory. Engines:
//   detailed  the SystemC model, every PE every cycle (Detail::Detailed)
//   fast      the SystemC model's fast path (Detail::Fast)
//   rtl       `tpu-sim run --engine rtl` (Verilator), when tpu-sim has it
// plus, per GEMM, Eigen's int32 and float products of the same matrices: the
// host's own GEMM rate, the physical ceiling of a simulator that computes the
// products.
//
// Every measurement runs in a child process of its own (fork), so that its
// peak resident memory (getrusage of the child) is its own. Wall time is the
// best of a few repetitions of: allocate the memories, load the images, run
// (the in-process engines), or the whole `tpu-sim run` command (rtl: it
// includes the process start and the .npy files). Results are checked: the
// SystemC engines against the reference GEMM (a sample of elements for the
// largest GEMM), the rtl engine's cycles against the fast path's.
//
// Adding an engine: a row in engines() and a function with the signature of
// run_systemc / run_rtl.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "common/npy.h"
#include "compiler/gemm.h"
#include "compiler/reference.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/int8_gemm.h"
#include "model/tpu.h"

namespace {

using namespace tpu;
using Clock = std::chrono::steady_clock;

struct Shape {
  std::size_t m, k, n;
  std::string name() const { return fmt::format("{}x{}x{}", m, k, n); }
  double macs() const {
    return static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
  }
};

// One row of the results.
struct Result {
  std::string machine = "tpuv1";  // the preset; tpuv1 with array_n = N
  unsigned array_n = 0;           // 0: not an array engine (Eigen)
  std::string gemm, engine;
  std::string status = "ok";  // ok | not available | failed: ...
  std::uint64_t cycles = 0;
  double macs = 0;
  double wall_s = 0;
  double cpu_s = 0;  // CPU time (user + system) of the same run: less sensitive to other load
  double peak_mib = 0;
  unsigned reps = 0;
  std::string note;
  double cycles_per_s() const { return wall_s > 0 ? static_cast<double>(cycles) / wall_s : 0; }
  double macs_per_s() const { return wall_s > 0 ? macs / wall_s : 0; }
};

// What a child reports back through its pipe: one line of fields.
struct ChildReport {
  std::uint64_t cycles = 0;
  double macs = 0, wall_s = 0, cpu_s = 0;
  unsigned reps = 0;
  std::string status = "ok", note;
};

compiler::MatrixI8 random_matrix(std::size_t rows, std::size_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  compiler::MatrixI8 m{rows, cols, std::vector<std::int8_t>(rows * cols)};
  for (auto& v : m.data) v = static_cast<std::int8_t>(d(rng));
  return m;
}

// The tpuv1 preset with N x N PEs; host and weight memory grow when A, B and
// C do not fit in its 262144 rows and 1024 tiles (the larger GEMM on small
// arrays). Another preset is taken as it is (the RTL is built for some).
ArchConfig config_for(const std::string& machine, unsigned n, const Shape& s) {
  ArchConfig c = preset_config(machine);
  if (machine != "tpuv1") return c;
  c.array_n = n;
  const std::uint64_t kt = (s.k + n - 1) / n, nt = (s.n + n - 1) / n;
  c.host_rows = std::max<std::uint64_t>(c.host_rows, kt * s.m + nt * s.m * 4);
  c.weight_tiles = std::max<std::uint64_t>(c.weight_tiles, kt * nt);
  validate(c);
  return c;
}

// Wall time, and CPU time of this process and its finished children.
struct Timing {
  double wall = 0, cpu = 0;
};

class Stopwatch {
 public:
  Stopwatch() : wall0_(Clock::now()), cpu0_(cpu_now()) {}
  Timing stop() const {
    return {std::chrono::duration<double>(Clock::now() - wall0_).count(), cpu_now() - cpu0_};
  }

 private:
  static double cpu_now() {
    double s = 0;
    for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
      struct rusage ru {};
      getrusage(who, &ru);
      s += static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    }
    return s;
  }
  Clock::time_point wall0_;
  double cpu0_;
};

// Repeats `once` (returning its timing) until `budget_s` of wall time is
// spent or `max_reps` runs; keeps the best wall and the best CPU time.
void best_of(const std::function<Timing()>& once, double budget_s, unsigned max_reps,
             ChildReport& r) {
  double spent = 0;
  r.wall_s = r.cpu_s = 1e300;
  r.reps = 0;
  while (r.reps < max_reps && (r.reps == 0 || spent < budget_s)) {
    const Timing t = once();
    r.wall_s = std::min(r.wall_s, t.wall);
    r.cpu_s = std::min(r.cpu_s, t.cpu);
    spent += t.wall;
    ++r.reps;
  }
}

// Checks C against the reference: every element, or `sample` random ones
// (dot products) when sample > 0.
bool check_result(const compiler::MatrixI8& a, const compiler::MatrixI8& b,
                  const std::vector<std::int32_t>& c, std::size_t sample) {
  if (sample == 0) return c == compiler::reference_gemm(a, b, {});
  std::mt19937 rng(7);
  for (std::size_t s = 0; s < sample; ++s) {
    const std::size_t i = rng() % a.rows, j = rng() % b.cols;
    std::int64_t sum = 0;
    for (std::size_t k = 0; k < a.cols; ++k) sum += a.at(i, k) * b.at(k, j);
    if (c[i * b.cols + j] != static_cast<std::int32_t>(static_cast<std::uint32_t>(sum)))
      return false;
  }
  return true;
}

struct Budget {
  double seconds;
  unsigned max_reps;
};

// ---- engines ------------------------------------------------------------------

ChildReport run_systemc(const std::string& machine, unsigned n, const Shape& s,
                        model::Detail detail, const Budget& budget) {
  const ArchConfig cfg = config_for(machine, n, s);
  const compiler::MatrixI8 a = random_matrix(s.m, s.k, 1), b = random_matrix(s.k, s.n, 2);
  const compiler::GemmPlan plan = compiler::compile_gemm(a, b, {}, cfg);
  model::RunOptions opts;
  opts.detail = detail;
  opts.max_cycles = ~model::Cycle{0} >> 24;
  ChildReport r;
  std::vector<std::int32_t> c;
  const auto once = [&] {
    const Stopwatch watch;
    model::Memories mem(cfg);
    std::copy(plan.host.begin(), plan.host.end(), mem.host.data().begin());
    std::copy(plan.weights.begin(), plan.weights.end(), mem.weights.data().begin());
    const model::RunLog log = model::run_program(cfg, plan.program, mem, opts);
    const Timing t = watch.stop();
    if (log.fault) throw std::runtime_error(log.fault->message());
    r.cycles = log.stats.cycles;
    r.macs = static_cast<double>(log.stats.macs);
    c = compiler::extract_result(plan, mem.host.data().data(), n);
    return t;
  };
  best_of(once, budget.seconds, budget.max_reps, r);
  if (!check_result(a, b, c, s.macs() > 1e9 ? 1000 : 0)) r.status = "failed: result differs";
  if (detail == model::Detail::Fast)
    r.note = std::string("kernel ") + model::gemm_kernel_name(model::best_gemm_kernel());
  return r;
}

std::string tpu_sim_path;

bool tpu_sim_has_rtl() {
  if (tpu_sim_path.empty() || !std::filesystem::exists(tpu_sim_path)) return false;
  const std::string cmd = fmt::format("'{}' run --help 2>&1", tpu_sim_path);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return false;
  std::string out;
  char buf[4096];
  while (std::size_t got = std::fread(buf, 1, sizeof buf, p)) out.append(buf, got);
  pclose(p);
  return out.find("--engine") != std::string::npos;
}

// `tpu-sim run --engine rtl` on the same program and images; wall time of the
// whole command.
ChildReport run_rtl(const std::string& machine, unsigned n, const Shape& s, const Budget& budget) {
  const ArchConfig cfg = config_for(machine, n, s);
  const compiler::MatrixI8 a = random_matrix(s.m, s.k, 1), b = random_matrix(s.k, s.n, 2);
  const compiler::GemmPlan plan = compiler::compile_gemm(a, b, {}, cfg);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("tpu-bench-{}", getpid());
  std::filesystem::create_directories(dir);
  const std::string prog = (dir / "gemm.tpu").string(), host = (dir / "host.npy").string(),
                    weights = (dir / "weights.npy").string(), stats = (dir / "stats.json").string(),
                    out = (dir / "out.npy").string(), config = (dir / "config.json").string(),
                    err = (dir / "stderr.txt").string();
  nlohmann::json config_json{{"preset", machine}};
  if (machine == "tpuv1") {
    config_json["array_n"] = n;
    config_json["host_rows"] = cfg.host_rows;
    config_json["weight_tiles"] = cfg.weight_tiles;
  }
  write_file_atomic(config, config_json.dump());
  const std::vector<std::uint8_t> bytes = isa::serialize(plan.program);
  write_file_atomic(prog, std::string(bytes.begin(), bytes.end()));
  write_npy(host, NpyArray::of<std::int8_t>({plan.host_rows_used, n}, plan.host));
  write_npy(weights, NpyArray::of<std::int8_t>({plan.weight_tiles_used, n, n}, plan.weights));
  const std::string cmd = fmt::format(
      "'{}' run '{}' --hostmem '{}' --weights '{}' --config '{}' --engine rtl "
      "--max-cycles 1000000000000 --stats '{}' --out '{}' >/dev/null 2>'{}'",
      tpu_sim_path, prog, host, weights, config, stats, out, err);
  ChildReport r;
  bool unavailable = false;
  const auto once = [&] {
    const Stopwatch watch;
    const int rc = std::system(cmd.c_str());
    const Timing t = watch.stop();
    if (rc != 0) {
      std::ifstream e(err);
      std::string line;
      std::getline(e, line);
      // Exit status 3: no RTL build has this configuration.
      if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
        unavailable = true;
        throw std::runtime_error("not available: " + line);
      }
      throw std::runtime_error(fmt::format("tpu-sim exit status {}: {}", rc, line));
    }
    return t;
  };
  try {
    best_of(once, budget.seconds, budget.max_reps, r);
  } catch (const std::exception& e) {
    std::filesystem::remove_all(dir);
    if (!unavailable) throw;
    r.status = e.what();
    return r;
  }
  std::ifstream in(stats);
  const nlohmann::json j = nlohmann::json::parse(in);
  r.cycles = j.at("cycles").get<std::uint64_t>();
  r.macs = j.at("macs").get<double>();
  const NpyArray o = read_npy(out);
  std::vector<std::int32_t> c =
      compiler::extract_result(plan, reinterpret_cast<const std::int8_t*>(o.data.data()), n);
  if (!check_result(a, b, c, s.macs() > 1e9 ? 1000 : 0)) r.status = "failed: result differs";
  r.note = "whole tpu-sim command";
  std::filesystem::remove_all(dir);
  return r;
}

template <typename T>
ChildReport run_eigen(const Shape& s, const Budget& budget) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const compiler::MatrixI8 a8 = random_matrix(s.m, s.k, 1), b8 = random_matrix(s.k, s.n, 2);
  Mat a(s.m, s.k), b(s.k, s.n), c(s.m, s.n);
  for (std::size_t i = 0; i < s.m; ++i)
    for (std::size_t k = 0; k < s.k; ++k) a(i, k) = static_cast<T>(a8.at(i, k));
  for (std::size_t k = 0; k < s.k; ++k)
    for (std::size_t j = 0; j < s.n; ++j) b(k, j) = static_cast<T>(b8.at(k, j));
  ChildReport r;
  const auto once = [&] {
    const Stopwatch watch;
    c.noalias() = a * b;
    return watch.stop();
  };
  best_of(once, budget.seconds, budget.max_reps, r);
  r.macs = s.macs();
  r.note = fmt::format("c[0][0] = {}", static_cast<double>(c(0, 0)));  // keeps the product live
  return r;
}

// ---- child processes ------------------------------------------------------------

// Runs `work` in a child process; fills the timing fields of `res` and its
// peak resident memory.
void measure(Result& res, const std::function<ChildReport()>& work) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fds[0]);
    std::string line;
    try {
      const ChildReport r = work();
      line = fmt::format("{}\t{:.17g}\t{:.17g}\t{}\t{}\t{}\t{:.17g}\n", r.cycles, r.macs, r.wall_s,
                         r.reps, r.status, r.note, r.cpu_s);
    } catch (const std::exception& e) {
      line = fmt::format("0\t0\t0\t0\tfailed: {}\t\t0\n", e.what());
    }
    // One line of tab-separated fields: no newlines inside.
    std::replace(line.begin(), line.end() - 1, '\n', ' ');
    const ssize_t w = write(fds[1], line.data(), line.size());
    _exit(w == static_cast<ssize_t>(line.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(got));
  close(fds[0]);
  int wstatus = 0;
  struct rusage ru {};
  wait4(pid, &wstatus, 0, &ru);
  res.peak_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
  std::istringstream in(out);
  std::string field;
  std::vector<std::string> f;
  while (std::getline(in, field, '\t')) f.push_back(field);
  if (f.size() < 7 || !WIFEXITED(wstatus)) {
    res.status = "failed: the measurement process died";
    return;
  }
  res.cycles = std::stoull(f[0]);
  res.macs = std::stod(f[1]);
  res.wall_s = std::stod(f[2]);
  res.reps = static_cast<unsigned>(std::stoul(f[3]));
  res.status = f[4];
  res.note = f[5];
  res.cpu_s = std::stod(f[6]);
}

// ---- output -----------------------------------------------------------------------

std::string fmt_rate(double v) {
  if (v <= 0) return "-";
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f} k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

std::string csv(const std::vector<Result>& rs) {
  std::string s =
      "machine,array_n,gemm,engine,status,cycles,macs,wall_s,cpu_s,sim_cycles_per_s,sim_macs_per_s,"
      "peak_mib,reps,note\n";
  const auto quote = [](std::string v) {
    std::string q = "\"";
    for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const Result& r : rs)
    s += fmt::format("{},{},{},{},{},{},{:.0f},{:.6g},{:.6g},{:.6g},{:.6g},{:.1f},{},{}\n",
                     r.array_n ? r.machine : "host", r.array_n ? std::to_string(r.array_n) : "",
                     r.gemm, r.engine, quote(r.status), r.cycles ? std::to_string(r.cycles) : "",
                     r.macs, r.wall_s, r.cpu_s, r.cycles_per_s(), r.macs_per_s(), r.peak_mib,
                     r.reps, quote(r.note));
  return s;
}

const Result* find(const std::vector<Result>& rs, unsigned n, const std::string& gemm,
                   const std::string& engine, const std::string& machine = "tpuv1") {
  for (const Result& r : rs)
    if (r.array_n == n && r.gemm == gemm && r.engine == engine && r.status == "ok" &&
        (n == 0 || r.machine == machine))
      return &r;
  return nullptr;
}

std::string label(const Result& r) {
  if (!r.array_n) return "host";
  return r.machine == "tpuv1" ? std::to_string(r.array_n)
                              : fmt::format("{} ({})", r.array_n, r.machine);
}

// The first three fields of /proc/loadavg: how busy the machine was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

std::string markdown(const std::vector<Result>& rs, const std::vector<unsigned>& sizes,
                     const std::vector<Shape>& shapes, unsigned big_n, const std::string& load) {
  std::string s = load + "\n\n";
  s += "| N | GEMM | engine | cycles | wall | CPU | sim cycles/s | sim MACs/s | peak MiB |\n"
       "|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  std::string unavailable;  // the first reason an engine was not available
  for (const Result& r : rs) {
    if (r.status != "ok") {
      const bool na = r.status.rfind("not available", 0) == 0;
      if (na && unavailable.empty() && r.status.size() > 15) unavailable = r.status.substr(15);
      s += fmt::format("| {} | {} | {} | {} | | | | | |\n", label(r), r.gemm, r.engine,
                       na ? std::string("not available") : r.status);
      continue;
    }
    s += fmt::format("| {} | {} | {} | {} | {:.4g} s | {:.4g} s | {} | {} | {:.0f} |\n", label(r),
                     r.gemm, r.engine, r.cycles ? std::to_string(r.cycles) : "", r.wall_s, r.cpu_s,
                     fmt_rate(r.cycles_per_s()), fmt_rate(r.macs_per_s()), r.peak_mib);
  }
  if (!unavailable.empty()) s += "\nNot available: " + unavailable + "\n";
  // The targets of the issue, as ratios measured in this run.
  s += "\n| target | measured | met |\n|---|---|---|\n";
  for (const Shape& sh : shapes) {
    const Result* f = find(rs, big_n, sh.name(), "fast");
    const Result* d = find(rs, big_n, sh.name(), "detailed");
    if (f && d)
      s += fmt::format("| fast >= 100x detailed, N={}, {} | {:.0f}x (CPU time: {:.0f}x) | {} |\n",
                       big_n, sh.name(), d->wall_s / f->wall_s, d->cpu_s / f->cpu_s,
                       d->wall_s / f->wall_s >= 100 ? "yes" : "no");
  }
  for (const Result& f : rs) {
    if (f.engine != "fast" || f.array_n != big_n || f.status != "ok") continue;
    if (const Result* e = find(rs, 0, f.gemm, "eigen-int32"))
      s += fmt::format(
          "| fast MACs/s >= 25% of Eigen int32, N={}, {} | {:.0f}% (CPU time: {:.0f}%) | {} |\n",
          big_n, f.gemm, 100 * f.macs_per_s() / e->macs_per_s(),
          100 * e->cpu_s / f.cpu_s * (f.macs / e->macs),
          f.macs_per_s() >= 0.25 * e->macs_per_s() ? "yes" : "no");
  }
  for (const Shape& sh : shapes) {
    const Result* d = find(rs, 128, sh.name(), "detailed");
    const Result* r = find(rs, 128, sh.name(), "rtl");
    if (d)
      s += fmt::format("| detailed no slower than the RTL, N=128, {} | {} | {} |\n", sh.name(),
                       r ? fmt::format("{:.2f}x the RTL's speed", r->wall_s / d->wall_s)
                         : std::string("RTL not available"),
                       r ? (d->wall_s <= r->wall_s ? "yes" : "no") : "n/a");
  }
  // Where an RTL build exists (the small presets), the same comparison there.
  for (const Result& r : rs) {
    if (r.engine != "rtl" || r.status != "ok" || r.machine == "tpuv1") continue;
    if (const Result* d = find(rs, r.array_n, r.gemm, "detailed", r.machine))
      s += fmt::format(
          "| detailed vs RTL, {} (N={}), {} | {:.2f}x the RTL's speed (CPU time: "
          "{:.2f}x) | {} |\n",
          r.machine, r.array_n, r.gemm, r.wall_s / d->wall_s, r.cpu_s / d->cpu_s,
          d->wall_s <= r.wall_s ? "yes" : "no");
  }
  double peak = 0;
  for (const Result& r : rs)
    if (r.array_n == big_n && r.machine == "tpuv1" && r.status == "ok" && r.engine != "rtl")
      peak = std::max(peak, r.peak_mib);
  s += fmt::format("| tpuv1 (N={}) peak memory < 256 MiB | {:.0f} MiB | {} |\n", big_n, peak,
                   peak < 256 ? "yes" : "no");
  (void)sizes;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string csv_path = "bench-results.csv", md_path;
  bool smoke = false;
#ifdef TPU_SIM_PATH
  tpu_sim_path = TPU_SIM_PATH;
#endif
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke")
      smoke = true;
    else if (a == "--csv" && i + 1 < argc)
      csv_path = argv[++i];
    else if (a == "--markdown" && i + 1 < argc)
      md_path = argv[++i];
    else if (a == "--tpu-sim" && i + 1 < argc)
      tpu_sim_path = argv[++i];
    else {
      std::cerr << "usage: tpu-bench [--csv FILE] [--markdown FILE] [--smoke] [--tpu-sim PATH]\n";
      return 2;
    }
  }
  const std::vector<unsigned> sizes =
      smoke ? std::vector<unsigned>{16} : std::vector<unsigned>{16, 64, 128, 256};
  const std::vector<Shape> shapes = smoke ? std::vector<Shape>{{64, 64, 64}}
                                          : std::vector<Shape>{{256, 256, 256}, {1024, 256, 256}};
  const Shape big = smoke ? Shape{128, 128, 128} : Shape{4096, 1024, 1024};
  const unsigned big_n = smoke ? 16 : 256;
  const Budget quick{smoke ? 0.0 : 1.0, smoke ? 1u : 20u};
  const Budget slow{smoke ? 0.0 : 3.0, smoke ? 1u : 5u};
  const bool have_rtl = tpu_sim_has_rtl();
  const std::string load_before = load_average();

  std::vector<Result> results;
  const auto report = [&](Result r) {
    std::cerr << fmt::format(
        "{:>12} {:>15} {:>12}  {}  cycles {:>10}  wall {:>9.4f} s  CPU {:>9.4f} s  "
        "{:>10} MAC/s  peak {:>6.0f} MiB\n",
        label(r), r.gemm, r.engine, r.status, r.cycles, r.wall_s, r.cpu_s, fmt_rate(r.macs_per_s()),
        r.peak_mib);
    results.push_back(std::move(r));
  };
  std::vector<Shape> all_shapes = shapes;
  all_shapes.push_back(big);
  for (const Shape& s : all_shapes) {
    for (const char* engine : {"eigen-int32", "eigen-float"}) {
      Result r;
      r.gemm = s.name();
      r.engine = engine;
      measure(r, [&] {
        return std::string(engine) == "eigen-int32" ? run_eigen<std::int32_t>(s, quick)
                                                    : run_eigen<float>(s, quick);
      });
      report(r);
    }
  }
  // (machine, N, GEMMs): tpuv1 at every N, and the preset the RTL is built for.
  struct Case {
    std::string machine;
    unsigned n;
    std::vector<Shape> shapes;
  };
  std::vector<Case> cases;
  for (unsigned n : sizes) cases.push_back({"tpuv1", n, all_shapes});
  if (have_rtl && !smoke) cases.push_back({"small16", 16, {shapes.front()}});
  for (const Case& c : cases) {
    for (const Shape& s : c.shapes) {
      const bool is_big = s.name() == big.name();
      for (const char* engine : {"detailed", "fast", "rtl"}) {
        const std::string e = engine;
        if (is_big && e != "fast") continue;  // the detailed engines take minutes there
        Result r;
        r.machine = c.machine;
        r.array_n = c.n;
        r.gemm = s.name();
        r.engine = e;
        if (e == "rtl" && !have_rtl) {
          r.status = "not available";
          report(r);
          continue;
        }
        measure(r, [&] {
          if (e == "rtl") return run_rtl(c.machine, c.n, s, slow);
          return run_systemc(c.machine, c.n, s,
                             e == "fast" ? model::Detail::Fast : model::Detail::Detailed,
                             e == "fast" ? quick : slow);
        });
        report(r);
      }
    }
  }
  write_file_atomic(csv_path, csv(results));
  const std::string md = markdown(
      results, sizes, shapes, big_n,
      fmt::format("{} CPUs; load average (1, 5, 15 min) before: {}, after: {}; GEMM kernel: {}",
                  sysconf(_SC_NPROCESSORS_ONLN), load_before, load_average(),
                  model::gemm_kernel_name(model::best_gemm_kernel())));
  if (!md_path.empty()) write_file_atomic(md_path, md);
  std::cout << md << fmt::format("\nCSV: {}\n", csv_path);
  // A failing SystemC engine is an error; the RTL may not support every N.
  for (const Result& r : results)
    if (r.status.rfind("failed", 0) == 0 && r.engine != "rtl") return 1;
  return 0;
}
