// tpu-bench: simulation speed of every engine on GEMMs, against the host's own
// GEMM throughput (docs/performance.md).
//
//   tpu-bench [--csv FILE] [--markdown FILE] [--sizes N,...] [--engines E,...] [--smoke]
//
// For each array size N (the tpuv1 preset with array_n = N) and each GEMM
// M x K x Nout, every engine runs the program the GEMM compiler makes, on
// random int8 inputs, and reports simulated cycles, MACs, wall time, cycles
// and MACs per second and peak memory. Engines:
//   detailed  the SystemC model, every PE every cycle (Detail::Detailed)
//   fast      the SystemC model's fast path (Detail::Fast)
//   rtl       the Verilated RTL core (rtl::run_program), when this build has
//             an RTL build of the configuration (TPU_RTL_PRESETS "tpuv1/N")
// plus, per GEMM, Eigen's int32 and float products of the same matrices: the
// host's own GEMM rate; and first of all the host's int8 ceiling, the rate of
// the best int8 dot-product instruction on every core (int8_ceiling.h): each
// engine's MAC/s is also reported as a fraction of it, measured in this run.
//
// Every measurement runs in a child process of its own (fork), so that its
// peak resident memory (getrusage of the child) is its own. Wall time is the
// best of a few repetitions of the same steps for every engine: allocate the
// memories, load the images, run. Every engine's result is checked against
// the reference GEMM (a sample of elements for the largest GEMM).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/file_io.h"
#include "common/npy.h"
#include "common/plural.h"
#include "compiler/gemm.h"
#include "compiler/network.h"
#include "compiler/layer_reference.h"
#include "compiler/reference.h"
#include "formats/model_file.h"
#include "runtime/host_ops.h"
#include "runtime/run_network.h"
#include "config/arch_config.h"
#include "model/int8_gemm.h"
#include "model/tpu.h"
#include "rtl_engine/rtl_engine.h"

#include "int8_ceiling.h"

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
  // Whole networks (engine "network"): `macs` are the layers' useful MACs;
  // the GEMM kernels' share of the best run (model::gemm_profile).
  double kernel_macs = 0;  // MACs the kernels multiplied (the tiles' used extents)
  double kernel_busy_s = 0;  // wall time with a GEMM kernel running
  double compile_s = 0;  // of the wall time, compiling the network
  double cycles_per_s() const { return wall_s > 0 ? static_cast<double>(cycles) / wall_s : 0; }
  double macs_per_s() const { return wall_s > 0 ? macs / wall_s : 0; }
  // The useful MACs over the time the GEMM kernels ran: the matrix work's rate.
  double matrix_macs_per_s() const { return kernel_busy_s > 0 ? macs / kernel_busy_s : 0; }
};

// What a child reports back through its pipe: one line of fields.
struct ChildReport {
  std::uint64_t cycles = 0;
  double macs = 0, wall_s = 0, cpu_s = 0;
  unsigned reps = 0;
  std::string status = "ok", note;
  double kernel_macs = 0, kernel_busy_s = 0, compile_s = 0;  // whole networks
};

compiler::MatrixI8 random_matrix(std::size_t rows, std::size_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  compiler::MatrixI8 m{rows, cols, std::vector<std::int8_t>(rows * cols)};
  for (auto& v : m.data) v = static_cast<std::int8_t>(d(rng));
  return m;
}

// The tpuv1 preset with N x N PEs; host and weight memory grow when A, B and
// C do not fit in its 262144 rows and 131072 tiles (the larger GEMM on small
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

// One of the array engines on the GEMM: "detailed", "fast" or "rtl".
ChildReport run_engine(const std::string& machine, unsigned n, const Shape& s,
                       const std::string& engine, const Budget& budget) {
  const ArchConfig cfg = config_for(machine, n, s);
  ChildReport r;
  if (engine == "rtl" && !rtl::available(cfg)) {
    r.status = fmt::format("not available: {} (see TPU_RTL_PRESETS)", rtl::unavailable(cfg));
    return r;
  }
  const compiler::MatrixI8 a = random_matrix(s.m, s.k, 1), b = random_matrix(s.k, s.n, 2);
  const compiler::GemmPlan plan = compiler::compile_gemm(a, b, {}, cfg);
  model::RunOptions opts;
  opts.detail = engine == "fast" ? model::Detail::Fast : model::Detail::Detailed;
  opts.max_cycles = ~model::Cycle{0} >> 24;
  std::vector<std::int32_t> c;
  double best = 1e300;
  const auto once = [&] {
    model::set_gemm_profiling(engine == "fast");
    const Stopwatch watch;
    model::Memories mem(cfg);
    // The image up to C, which the program writes whole (the memory starts zeroed, as the image's C rows are).
    const std::size_t inputs = plan.c_host_row * n;
    mem.host.prefault(0, plan.c_host_row);
    mem.weights.prefault(0, plan.weights.size() / (std::size_t{n} * n));
    std::copy(plan.host.begin(), plan.host.begin() + static_cast<std::ptrdiff_t>(inputs), mem.host.data().begin());
    std::copy(plan.weights.begin(), plan.weights.end(), mem.weights.data().begin());
    const model::RunLog log = engine == "rtl" ? rtl::run_program(cfg, plan.program, mem, opts)
                                              : model::run_program(cfg, plan.program, mem, opts);
    const Timing t = watch.stop();
    const model::GemmProfile profile = model::gemm_profile();
    model::set_gemm_profiling(false);
    if (log.fault) throw std::runtime_error(log.fault->message());
    r.cycles = log.stats.cycles;
    r.macs = static_cast<double>(log.stats.macs);
    if (t.wall < best) {  // the kernels' share of the best run
      best = t.wall;
      r.kernel_macs = profile.macs;
      r.kernel_busy_s = profile.busy_s;
    }
    c = compiler::extract_result(plan, mem.host.data().data(), n);
    return t;
  };
  best_of(once, budget.seconds, budget.max_reps, r);
  if (!check_result(a, b, c, s.macs() > 1e9 ? 1000 : 0)) r.status = "failed: result differs";
  if (engine == "fast")
    r.note = std::string("kernel ") + model::gemm_kernel_name(model::best_gemm_kernel());
  return r;
}

// A whole network: a saved int8 model (`tpu-sim net MODEL.onnx --save-model
// DIR` writes DIR/model.json) on an input batch (.npy: int8 as it is, float
// quantized with the model's input quantization).
struct NetSpec {
  std::string name, model, input;
};

compiler::Tensor read_network_input(const std::string& path, const compiler::Network& net) {
  const NpyArray a = read_npy(path);
  if (a.rank() != net.input_shape.size() + 1 ||
      !std::equal(net.input_shape.begin(), net.input_shape.end(), a.shape.begin() + 1) || a.shape[0] == 0)
    throw std::runtime_error(fmt::format("{}: expected a batch of inputs of shape (B, {})", path,
                                         fmt::join(net.input_shape, ", ")));
  if (a.dtype == Dtype::int8) {
    compiler::Tensor x;
    x.shape = a.shape;
    const std::vector<std::int8_t> v = a.values<std::int8_t>();
    x.data.assign(v.begin(), v.end());
    return x;
  }
  const std::vector<float> v = a.values<float>();  // throws for another dtype
  return compiler::quantize_input(net, a.shape, std::vector<double>(v.begin(), v.end()));
}

// The network on tpuv1's fast path as `tpu-sim net MODEL --input X --preset
// tpuv1` runs it, timed from the loaded model to the output: compiling it,
// the host images, every program and the host steps between. The best of a
// few runs; the output is checked against the independent int8 reference.
ChildReport run_network_bench(const NetSpec& spec, const Budget& budget) {
  const ArchConfig cfg = preset_config("tpuv1");
  const compiler::Network net = compiler::load_network(spec.model);
  const compiler::Tensor x = read_network_input(spec.input, net);
  model::RunOptions opts;
  opts.detail = model::Detail::Fast;
  ChildReport r;
  compiler::Tensor y;
  double best = 1e300;
  const auto once = [&] {
    model::set_gemm_profiling(true);
    const Stopwatch watch;
    const compiler::NetworkPlan plan = compiler::compile_network(net, x.batch(), cfg, compiler::CompileMode::Auto);
    const double compiled = watch.stop().wall;
    compiler::NetworkRun run = compiler::run_network(
        plan, x, cfg, [&](std::size_t, const compiler::ProgramPlan& seg, model::Memories& mem) {
          return model::run_program(cfg, seg.program, mem, opts);
        });
    const Timing t = watch.stop();
    const model::GemmProfile profile = model::gemm_profile();
    model::set_gemm_profiling(false);
    if (run.fault) throw std::runtime_error(run.logs.back().fault ? run.logs.back().fault->message() : "fault");
    if (t.wall < best) {
      best = t.wall;
      r.cycles = 0;
      for (const model::RunLog& log : run.logs) r.cycles += log.stats.cycles;
      r.macs = 0;
      for (const compiler::LayerStats& l : run.layers) r.macs += static_cast<double>(l.useful_macs);
      r.kernel_macs = profile.macs;
      r.kernel_busy_s = profile.busy_s;
      r.compile_s = compiled;
      y = std::move(run.output);
    }
    return t;
  };
  best_of(once, budget.seconds, budget.max_reps, r);
  if (y.data != compiler::reference_network(net, x).data) r.status = "failed: output differs from the int8 reference";
  r.note = fmt::format("batch {}, kernel {}", x.batch(), model::gemm_kernel_name(model::best_gemm_kernel()));
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
      line = fmt::format("{}\t{:.17g}\t{:.17g}\t{}\t{}\t{}\t{:.17g}\t{:.17g}\t{:.17g}\t{:.17g}\n", r.cycles,
                         r.macs, r.wall_s, r.reps, r.status, r.note, r.cpu_s, r.kernel_macs, r.kernel_busy_s,
                         r.compile_s);
    } catch (const std::exception& e) {
      line = fmt::format("0\t0\t0\t0\tfailed: {}\t\t0\t0\t0\t0\n", e.what());
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
  if (f.size() < 10 || !WIFEXITED(wstatus)) {
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
  res.kernel_macs = std::stod(f[7]);
  res.kernel_busy_s = std::stod(f[8]);
  res.compile_s = std::stod(f[9]);
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
      "peak_mib,reps,note,kernel_macs,kernel_busy_s,compile_s\n";
  const auto quote = [](std::string v) {
    std::string q = "\"";
    for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  for (const Result& r : rs)
    s += fmt::format("{},{},{},{},{},{},{:.0f},{:.6g},{:.6g},{:.6g},{:.6g},{:.1f},{},{},{:.0f},{:.6g},{:.6g}\n",
                     r.array_n ? r.machine : "host", r.array_n ? std::to_string(r.array_n) : "",
                     r.gemm, r.engine, quote(r.status), r.cycles ? std::to_string(r.cycles) : "",
                     r.macs, r.wall_s, r.cpu_s, r.cycles_per_s(), r.macs_per_s(), r.peak_mib,
                     r.reps, quote(r.note), r.kernel_macs, r.kernel_busy_s, r.compile_s);
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

// The host's name and CPU model (/proc/cpuinfo's first "model name").
std::string machine_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  std::ifstream in("/proc/cpuinfo");
  std::string line, cpu = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  return fmt::format("host {} ({})", host[0] ? host : "unknown", cpu);
}

// The first three fields of /proc/loadavg: how busy the machine was.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

std::string markdown(const std::vector<Result>& rs, const std::vector<unsigned>& sizes,
                     const std::vector<Shape>& shapes, unsigned big_n, const std::string& load,
                     const bench::Int8Ceiling& ceiling, double first, double last) {
  std::string s = load + "\n\n";
  if (ceiling.macs_per_s > 0)
    s += fmt::format("Int8 ceiling of this host: {} MAC/s ({} on {}), the best of {} bursts before the "
                     "measurements ({} MAC/s) and after them ({} MAC/s); every fraction below is of it.\n\n",
                     fmt_rate(ceiling.macs_per_s), ceiling.instruction, plural(ceiling.threads, "thread"),
                     ceiling.bursts, fmt_rate(first), fmt_rate(last));
  else
    s += "Int8 ceiling: not measured (no AVX2 or AVX-512 VNNI).\n\n";
  s += "| N | GEMM | engine | cycles | wall | CPU | sim cycles/s | sim MACs/s | peak MiB |\n"
       "|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  std::string unavailable;  // the first reason an engine was not available
  for (const Result& r : rs) {
    if (r.engine == "network") continue;  // their own table below
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
  // Whole networks on tpuv1's fast path: useful MACs (the layers' own) over
  // the wall time, and over the time the GEMM kernels ran (the matrix work).
  std::string nets;
  const auto of_ceiling = [&](double rate) {
    return ceiling.macs_per_s > 0 ? fmt::format(" ({:.1f}%)", 100 * rate / ceiling.macs_per_s) : std::string();
  };
  for (const Result& r : rs) {
    if (r.engine != "network") continue;
    if (r.status != "ok") {
      nets += fmt::format("| {} | {} | | | | | | | | |\n", r.gemm, r.status);
      continue;
    }
    nets += fmt::format("| {} | {} | {:.4g} s | {:.4g} s | {:.4g} s | {} | {}{} | {:.4g} s | {}{} | {:.0f} |\n", r.gemm,
                        r.cycles, r.wall_s, r.cpu_s, r.compile_s, fmt_rate(r.cycles_per_s()), fmt_rate(r.macs_per_s()),
                        of_ceiling(r.macs_per_s()), r.kernel_busy_s, fmt_rate(r.matrix_macs_per_s()),
                        of_ceiling(r.matrix_macs_per_s()), r.peak_mib);
  }
  if (!nets.empty())
    s += "\nWhole networks on tpuv1's fast path (`--net`; the best of a few runs, from the loaded model to "
         "the output; useful MACs are the layers' own; the share of the ceiling in brackets):\n\n"
         "| network | cycles | wall | CPU | of it compiling | sim cycles/s | useful MACs/s over the wall | "
         "GEMM kernels busy | useful MACs/s over the kernels' time | peak MiB |\n"
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" + nets;
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
  // Detailed SystemC against the RTL at every N where both ran; N = 128 is the target.
  for (unsigned n : sizes) {
    for (const Shape& sh : shapes) {
      const Result* d = find(rs, n, sh.name(), "detailed");
      const Result* r = find(rs, n, sh.name(), "rtl");
      if (!d || (!r && n != 128)) continue;
      const std::string what = n == 128 ? "detailed no slower than the RTL" : "detailed vs RTL";
      if (!r) {
        s += fmt::format("| {}, N={}, {} | RTL not measured | n/a |\n", what, n, sh.name());
        continue;
      }
      s += fmt::format("| {}, N={}, {} | {:.2f}x the RTL's speed (CPU time: {:.2f}x) | {} |\n",
                       what, n, sh.name(), r->wall_s / d->wall_s, r->cpu_s / d->cpu_s,
                       d->wall_s <= r->wall_s ? "yes" : "no");
    }
  }
  // The fast path against the host's measured int8 ceiling (issue 31's targets
  // name 50% at 4096x1024x1024, N = 256).
  for (const Result& f : rs) {
    if (f.engine != "fast" || f.array_n != big_n || f.status != "ok" || ceiling.macs_per_s <= 0) continue;
    const double frac = f.macs_per_s() / ceiling.macs_per_s;
    const std::string kernels =
        f.kernel_busy_s > 0 ? fmt::format(" (the GEMM kernels alone: {:.1f}%, busy {:.0f}% of the wall)",
                                          100 * f.kernel_macs / f.kernel_busy_s / ceiling.macs_per_s,
                                          100 * f.kernel_busy_s / f.wall_s)
                            : std::string();
    s += fmt::format("| fast MACs/s >= 50% of the int8 ceiling, N={}, {} | {:.1f}%{} | {} |\n", big_n, f.gemm,
                     100 * frac, kernels, frac >= 0.5 ? "yes" : "no");
  }
  // Issue 31's whole-network targets: ResNet-18 at batch 8 in a second, and
  // the matrix work of a network at 25% of the ceiling.
  for (const Result& r : rs) {
    if (r.engine != "network" || r.status != "ok") continue;
    if (r.gemm.rfind("resnet18", 0) == 0)
      s += fmt::format("| {} end to end <= 1 s wall | {:.3f} s | {} |\n", r.gemm, r.wall_s,
                       r.wall_s <= 1.0 ? "yes" : "no");
    if (ceiling.macs_per_s > 0) {
      const double frac = r.matrix_macs_per_s() / ceiling.macs_per_s;
      s += fmt::format("| {}: useful MACs/s over the GEMM kernels' time >= 25% of the int8 ceiling | {:.1f}% "
                       "(over the whole wall time: {:.1f}%) | {} |\n",
                       r.gemm, 100 * frac, 100 * r.macs_per_s() / ceiling.macs_per_s, frac >= 0.25 ? "yes" : "no");
    }
  }
  double peak = 0;
  bool measured = false;  // none with --nets-only
  for (const Result& r : rs)
    if (r.array_n == big_n && r.machine == "tpuv1" && r.status == "ok" && r.engine != "rtl" && r.engine != "network") {
      peak = std::max(peak, r.peak_mib);
      measured = true;
    }
  if (measured)
    s += fmt::format("| tpuv1 (N={}) peak memory < 256 MiB | {:.0f} MiB | {} |\n", big_n, peak,
                     peak < 256 ? "yes" : "no");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // A reader that closes early (`| head`) ends the output, not the run (as in every tool).
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"tpu-bench: simulation speed of the engines on GEMMs, against Eigen's GEMM"};
  std::string csv_path = "bench-results.csv", md_path;
  bool smoke = false;
  std::vector<unsigned> sizes{16, 64, 128, 256};
  std::vector<std::string> engines{"detailed", "fast", "rtl"};
  app.add_option("--csv", csv_path, "write every measurement here")->capture_default_str();
  app.add_option("--markdown", md_path, "write the Markdown tables here");
  app.add_option("--sizes", sizes, "array sizes N (tpuv1 with array_n = N)")
      ->delimiter(',')
      ->check(CLI::Range(4u, 256u))
      ->capture_default_str();
  app.add_option("--engines", engines, "array engines to run")
      ->delimiter(',')
      ->check(CLI::IsMember({"detailed", "fast", "rtl"}))
      ->capture_default_str();
  std::vector<std::string> gemms;
  app.add_option("--gemms", gemms,
                 "GEMMs MxKxN to run instead of 256x256x256,1024x256x256 (and 4096x1024x1024 "
                 "on the fast path)")
      ->delimiter(',');
  std::vector<unsigned> rtl_sizes;
  std::size_t rtl_max_macs = 0;
  app.add_option("--rtl-sizes", rtl_sizes, "run the RTL at these N only (default: every N)")
      ->delimiter(',');
  app.add_option("--rtl-max-macs", rtl_max_macs,
                 "run the RTL on GEMMs of at most this many MACs only (0: no limit); it "
                 "simulates some 170 cycles/s at N = 128")
      ->capture_default_str();
  app.add_flag("--smoke", smoke, "a run of a few seconds: N = 16, small GEMMs (CTest)");
  std::vector<std::string> net_args;
  app.add_option("--net", net_args,
                 "also time a whole network on tpuv1's fast path: NAME=MODEL.json:INPUT.npy (a model "
                 "saved by tpu-sim net --save-model, an int8 or float input batch); repeatable")
      ->type_name("NAME=MODEL:INPUT");
  bool nets_only = false;
  app.add_flag("--nets-only", nets_only, "time the --net networks only (no GEMMs, no Eigen)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::vector<NetSpec> nets;
  for (const std::string& a : net_args) {
    const std::size_t eq = a.find('='), colon = a.rfind(':');
    if (eq == std::string::npos || colon == std::string::npos || colon < eq || eq == 0 || colon == eq + 1 ||
        colon + 1 == a.size()) {
      std::cerr << fmt::format("tpu-bench: error: --net: '{}' is not NAME=MODEL.json:INPUT.npy\n", a);
      return 2;
    }
    nets.push_back({a.substr(0, eq), a.substr(eq + 1, colon - eq - 1), a.substr(colon + 1)});
    for (const std::string& f : {nets.back().model, nets.back().input})
      if (!std::filesystem::is_regular_file(f)) {
        std::cerr << fmt::format("tpu-bench: error: --net {}: no file {}\n", nets.back().name, f);
        return 2;
      }
  }
  if (nets_only && nets.empty()) {
    std::cerr << "tpu-bench: error: --nets-only needs at least one --net\n";
    return 2;
  }
  if (smoke) sizes = {16};
  std::vector<Shape> shapes = smoke ? std::vector<Shape>{{64, 64, 64}}
                                    : std::vector<Shape>{{256, 256, 256}, {1024, 256, 256}};
  std::optional<Shape> big;  // the fast path only
  if (!gemms.empty()) {
    shapes.clear();
    for (const std::string& g : gemms) {
      Shape sh{};
      char x1 = 0, x2 = 0;
      std::istringstream in(g);
      if (!(in >> sh.m >> x1 >> sh.k >> x2 >> sh.n) || x1 != 'x' || x2 != 'x' || !in.eof() ||
          sh.m == 0 || sh.k == 0 || sh.n == 0) {
        std::cerr << fmt::format("tpu-bench: error: --gemms: '{}' is not MxKxN\n", g);
        return 2;
      }
      shapes.push_back(sh);
    }
  } else {
    big = smoke ? Shape{128, 128, 128} : Shape{4096, 1024, 1024};
  }
  const unsigned big_n = *std::max_element(sizes.begin(), sizes.end());
  const Budget quick{smoke ? 0.0 : 1.0, smoke ? 1u : 20u};
  const Budget slow{smoke ? 0.0 : 3.0, smoke ? 1u : 5u};
  const std::string load_before = load_average();
  // The ceiling: the best of three bursts now and three after the run (the
  // lines below use the first three's; the tables the best of all six).
  const unsigned ceiling_threads = std::max(1u, std::thread::hardware_concurrency());
  const double burst_s = smoke ? 0.02 : 0.35;
  const bench::Int8Ceiling first_ceiling = bench::best_int8_ceiling(ceiling_threads, burst_s, 3);
  std::cerr << fmt::format("int8 ceiling: {} MAC/s ({} on {}; the best of {} bursts)\n",
                           fmt_rate(first_ceiling.macs_per_s),
                           first_ceiling.instruction.empty() ? "none" : first_ceiling.instruction,
                           plural(first_ceiling.threads, "thread"), first_ceiling.bursts);
  const bench::Int8Ceiling& ceiling = first_ceiling;

  std::vector<Result> results;
  const auto report = [&](Result r) {
    std::cerr << fmt::format(
        "{:>12} {:>15} {:>12}  {}  cycles {:>10}  wall {:>9.4f} s  CPU {:>9.4f} s  "
        "{:>10} MAC/s ({:5.1f}% of the ceiling)  peak {:>6.0f} MiB\n",
        label(r), r.gemm, r.engine, r.status, r.cycles, r.wall_s, r.cpu_s, fmt_rate(r.macs_per_s()),
        ceiling.macs_per_s > 0 ? 100 * r.macs_per_s() / ceiling.macs_per_s : 0.0, r.peak_mib);
    results.push_back(std::move(r));
  };
  std::vector<Shape> all_shapes = shapes;
  if (big) all_shapes.push_back(*big);
  if (nets_only) {
    all_shapes.clear();
    sizes.clear();
  }
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
  for (unsigned n : sizes) {
    for (const Shape& s : all_shapes) {
      const bool is_big = big && s.name() == big->name();
      for (const std::string& e : engines) {
        if (is_big && e != "fast") continue;  // the per-cycle engines take minutes there
        if (e == "rtl" && ((!rtl_sizes.empty() &&
                            std::find(rtl_sizes.begin(), rtl_sizes.end(), n) == rtl_sizes.end()) ||
                           (rtl_max_macs != 0 && s.macs() > static_cast<double>(rtl_max_macs))))
          continue;
        Result r;
        r.array_n = n;
        r.gemm = s.name();
        r.engine = e;
        measure(r, [&] { return run_engine("tpuv1", n, s, e, e == "fast" ? quick : slow); });
        report(r);
      }
    }
  }
  for (const NetSpec& net : nets) {
    Result r;
    r.array_n = 256;
    r.gemm = net.name;
    r.engine = "network";
    measure(r, [&] { return run_network_bench(net, quick); });
    report(r);
    if (r.status == "ok")
      std::cerr << fmt::format(
          "{:>12} {:>15} {:>12}  compile {:.4f} s; GEMM kernels busy {:.4f} s ({:.1f}% of the wall), "
          "{} MACs multiplied; useful MACs over the kernels' time {} MAC/s ({:.1f}% of the ceiling)\n",
          "", r.gemm, "", r.compile_s, r.kernel_busy_s, 100 * r.kernel_busy_s / r.wall_s, fmt_rate(r.kernel_macs),
          fmt_rate(r.matrix_macs_per_s()),
          ceiling.macs_per_s > 0 ? 100 * r.matrix_macs_per_s() / ceiling.macs_per_s : 0.0);
  }
  const bench::Int8Ceiling last_ceiling = bench::best_int8_ceiling(ceiling_threads, burst_s, 3);
  const bench::Int8Ceiling best_ceiling = bench::better_ceiling(first_ceiling, last_ceiling);
  std::cerr << fmt::format("int8 ceiling after the run: {} MAC/s; the tables use {} MAC/s\n",
                           fmt_rate(last_ceiling.macs_per_s), fmt_rate(best_ceiling.macs_per_s));
  write_file_atomic(csv_path, csv(results));
  const std::string md = markdown(
      results, sizes, shapes, big_n,
      fmt::format("{}, {}; load average (1, 5, 15 min) before: {}, after: {}; GEMM kernel: {}",
                  machine_name(), plural(sysconf(_SC_NPROCESSORS_ONLN), "CPU"), load_before, load_average(),
                  model::gemm_kernel_name(model::best_gemm_kernel())),
      best_ceiling, first_ceiling.macs_per_s, last_ceiling.macs_per_s);
  if (!md_path.empty()) write_file_atomic(md_path, md);
  std::cout << md << fmt::format("\nCSV: {}\n", csv_path);
  // A failing SystemC engine is an error; the RTL may not support every N.
  for (const Result& r : results)
    if (r.status.rfind("failed", 0) == 0 && r.engine != "rtl") return 1;
  return 0;
}
