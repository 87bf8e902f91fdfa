#include "run/sweep_workload.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <new>
#include <random>
#include <type_traits>

#include "asm/assembler.h"
#include "common/exit_codes.h"
#include "common/file_io.h"
#include "common/npy.h"
#include "common/plural.h"
#include "compiler/gemm.h"
#include "formats/model_file.h"
#include "rtl_engine/rtl_engine.h"
#include "waves/wave_files.h"
#include "run/gemm_run.h"
#include "run/network_run.h"
#include "run/simulate.h"
#include "run/stats.h"

namespace tpu::sweep {
namespace {

std::mutex& simulation_mutex() {
  static std::mutex m;
  return m;
}

model::Requant parse_requant(const std::string& text) {
  try {
    return compiler::parse_requant(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("requant: {}", e.what()));
  }
}

std::string path_in(const std::string& base_dir, const std::string& path) {
  if (base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).string();
}

// A field of a workload, or a FileError naming it.
template <typename T>
T field(const nlohmann::json& w, const char* key, const std::string& what) {
  if (!w.contains(key)) throw FileError(fmt::format("{}: no \"{}\"", what, key));
  // A count or a seed: JSON's get<> would wrap a negative number around.
  if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && !std::is_same_v<T, bool>) {
    const nlohmann::json& v = w.at(key);
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
      throw FileError(fmt::format("{}: \"{}\" must be an integer >= 0, not {}", what, key, v.dump()));
  }
  try {
    return w.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw FileError(fmt::format("{}: \"{}\" has the wrong type ({})", what, key, w.at(key).dump()));
  }
}
template <typename T>
T field_or(const nlohmann::json& w, const char* key, T fallback, const std::string& what) {
  return w.contains(key) ? field<T>(w, key, what) : fallback;
}

compiler::MatrixI8 random_matrix(std::size_t rows, std::size_t cols, std::mt19937_64& gen,
                                 const std::string& what) {
  // More bytes than a vector can hold is not "out of memory" but a size no
  // machine has: say which.
  if (cols != 0 && rows > std::vector<std::int8_t>().max_size() / cols)
    throw FileError(fmt::format("{}: a {} x {} matrix is too large", what, rows, cols));
  compiler::MatrixI8 m;
  m.rows = rows;
  m.cols = cols;
  m.data.resize(rows * cols);
  for (auto& v : m.data) v = static_cast<std::int8_t>(static_cast<std::uint8_t>(gen() >> 56));
  return m;
}

void flatten_into(const nlohmann::json& j, const std::string& prefix, nlohmann::json& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten_into(v, prefix.empty() ? k : prefix + "." + k, out);
  } else if (!j.is_array()) {
    out[prefix] = j;
  }
}

}  // namespace

int exit_status_of(const std::exception& e) {
  if (dynamic_cast<const AsmError*>(&e)) return kExitAsmError;
  if (dynamic_cast<const FaultError*>(&e)) return kExitFault;
  if (dynamic_cast<const run::DivergenceError*>(&e)) return kExitDivergence;
  if (dynamic_cast<const CheckError*>(&e)) return kExitCheckFailed;
  if (dynamic_cast<const std::invalid_argument*>(&e)) return kExitUsage;
  return kExitBadInput;
}

std::string message_of(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e))
    return "out of memory: the configured memories (host_rows, weight_tiles, ub_rows, acc_rows) or "
           "the inputs are too large for this machine";
  return e.what();
}

isa::Program assemble_source(const std::string& source, const std::string& filename,
                             const ArchConfig* cfg, std::optional<unsigned> array_n) {
  assembler::Options opts;
  opts.array_n = array_n;
  opts.config = cfg;
  opts.default_array_n = static_cast<unsigned>(preset_config(kDefaultPreset).array_n);
  if (array_n && (*array_n < isa::kMinArrayN || *array_n > isa::kMaxArrayN))
    throw UsageError(fmt::format("array_n: {} is outside {}..{}", *array_n, isa::kMinArrayN,
                                 isa::kMaxArrayN));
  assembler::Result res = assembler::assemble(source, opts);
  if (!res.diagnostics.empty()) {
    const std::string text = assembler::format_diagnostics(filename, source, res.diagnostics) +
                             fmt::format("{} generated.", plural(res.diagnostics.size(), "error"));
    throw AsmError(text, std::move(res.diagnostics));
  }
  return std::move(*res.program);
}

void check_engine(const std::string& engine) {
  if (engine != "systemc" && engine != "rtl" && engine != "both")
    throw UsageError(fmt::format("engine: '{}' is not one of systemc, rtl, both", engine));
}

model::Detail parse_detail(const std::string& detail) {
  if (detail == "auto") return model::Detail::Auto;
  if (detail == "detailed") return model::Detail::Detailed;
  if (detail == "fast") return model::Detail::Fast;
  throw UsageError(fmt::format("detail: '{}' is not one of auto, detailed, fast", detail));
}

model::RunLog run_engine(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem,
                         const EngineOptions& opts) {
  check_engine(opts.engine);
  model::RunOptions ropts;
  ropts.max_cycles = opts.max_cycles;
  ropts.detail = opts.detail;
  ropts.vcd_path = opts.vcd;
  ropts.interrupted = opts.interrupted;
  if (!opts.vcd.empty() && opts.detail == model::Detail::Fast)
    throw UsageError("detail: fast has no per-cycle state for a waveform to show");
  if (opts.engine != "systemc") rtl::require_build(cfg);
  if (!opts.vcd.empty() && opts.engine != "systemc" && !rtl::has_waveforms(cfg))
    throw UsageError("vcd: " + rtl::no_waveforms_reason(cfg));
  std::lock_guard<std::mutex> lock(simulation_mutex());
  const auto checked = [](model::RunLog log) {
    if (log.interrupted) throw Interrupted();
    return log;
  };
  if (opts.engine == "systemc") return checked(model::run_program(cfg, prog, mem, ropts));
  if (opts.engine == "rtl") return checked(rtl::run_program(cfg, prog, mem, ropts));
  model::Memories systemc_mem = mem;
  const model::RunLog systemc_log = checked(model::run_program(cfg, prog, systemc_mem, ropts));
  if (!opts.vcd.empty()) ropts.vcd_path = wave::strip_extension(opts.vcd, ".vcd") + ".rtl.vcd";
  model::RunLog log = checked(rtl::run_program(cfg, prog, mem, ropts));
  if (const auto d = rtl::compare(prog, systemc_log, systemc_mem, log, mem))
    throw run::DivergenceError(d->message());
  return log;
}

GemmOutcome run_gemm(const ArchConfig& cfg, const compiler::MatrixI8& a, const compiler::MatrixI8& b,
                     const std::string& requant, const std::string& act, bool check,
                     const EngineOptions& opts) {
  const std::optional<model::ActFunction> act_fn = model::parse_act_function(act);
  if (!act_fn) throw UsageError(fmt::format("act: '{}' is not one of {}", act, model::act_function_list()));
  if (act != "none" && requant.empty()) throw UsageError("act needs requant");
  check_engine(opts.engine);
  compiler::GemmSpec spec;
  if (!requant.empty()) spec.requant = parse_requant(requant);
  spec.act = *act_fn;
  run::GemmRun g = run::compile_and_run_gemm(
      cfg, a, b, spec, [&](const isa::Program& prog, model::Memories& mem) { return run_engine(cfg, prog, mem, opts); });
  if (g.log.fault) throw FaultError(std::move(g.log));
  if (check)
    if (const auto mismatch = run::gemm_mismatch(a, b, spec, g.c, g.plan.n_out))
      throw CheckError("check failed: " + *mismatch);
  GemmOutcome out;
  out.c = std::move(g.c);
  out.int8_output = g.plan.int8_output;
  out.m = g.plan.m;
  out.k = g.plan.k;
  out.n_out = g.plan.n_out;
  out.program = std::move(g.plan.program);
  out.assembly = std::move(g.plan.assembly);
  out.log = std::move(g.log);
  return out;
}

NetOutcome run_net(const ArchConfig& cfg, const compiler::Network& net, const compiler::Tensor& x,
                   bool host_steps, bool check, const EngineOptions& opts,
                   const std::string& model_path) {
  check_engine(opts.engine);
  if (x.batch() == 0) throw FileError("the input batch is empty");
  run::NetworkRunSpec spec;
  spec.mode = host_steps ? compiler::CompileMode::Segments : compiler::CompileMode::Auto;
  spec.sim = [&](std::size_t k, std::size_t programs, const compiler::ProgramPlan& seg, model::Memories& mem) {
    if (opts.between_programs) opts.between_programs();
    EngineOptions per = opts;
    if (!opts.vcd.empty()) per.vcd = run::indexed_path(opts.vcd, k, programs);
    return run_engine(cfg, seg.program, mem, per);
  };
  run::NetworkOutcome o = run::compile_and_run(cfg, net, x, spec);
  if (o.run.fault) throw FaultError(o.run.logs.back());
  NetOutcome out;
  out.stats = run::net_stats_json(cfg, o.plan, o.run, model_path);
  if (check)
    if (const auto mismatch = run::reference_mismatch(net, x, o.run.output))
      throw CheckError("check failed: " + *mismatch);
  out.plan = std::move(o.plan);
  out.run = std::move(o.run);
  return out;
}

std::vector<nlohmann::json> expand_grid(const Grid& grid) {
  // The number of points first: a few bytes of lists multiply to more points
  // than memory holds.
  std::uint64_t count = 1;
  for (const auto& [key, values] : grid) {
    const std::uint64_t n = values.is_array() ? values.size() : 1;
    if (n == 0) throw FileError(fmt::format("grid: \"{}\" has no values", key));
    if (__builtin_mul_overflow(count, n, &count) || count > kMaxGridPoints)
      throw FileError(fmt::format("grid: more than {} points (the product of the lists' lengths)", kMaxGridPoints));
  }
  std::vector<nlohmann::json> points{nlohmann::json::object()};
  for (const auto& [key, values] : grid) {
    const nlohmann::json list = values.is_array() ? values : nlohmann::json::array({values});
    std::vector<nlohmann::json> next;
    for (const nlohmann::json& p : points)
      for (const nlohmann::json& v : list) {
        nlohmann::json q = p;
        q[key] = v;
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

ArchConfig config_of(const nlohmann::json& base, const nlohmann::json& point) {
  nlohmann::json fields = base.is_null() ? nlohmann::json::object() : base;
  if (!fields.is_object()) throw ConfigError("the base configuration must be an object");
  for (const auto& [k, v] : point.items()) fields[k] = v;
  std::string preset(kDefaultPreset);
  if (fields.contains("preset")) {
    if (!fields["preset"].is_string()) throw ConfigError("preset: expected a name");
    preset = fields["preset"].get<std::string>();
    fields.erase("preset");
  }
  ArchConfig cfg = preset_config(preset);
  if (!fields.empty()) apply_json_overrides(cfg, fields.dump(), "configuration");
  validate(cfg);
  return cfg;
}

std::string workload_name(const nlohmann::json& w, std::size_t index) {
  if (w.is_object() && w.contains("name") && w["name"].is_string()) {
    std::string name = w["name"].get<std::string>();
    if (name.empty()) throw UsageError(fmt::format("workload {}: \"name\" is empty", index));
    // The name goes into messages, the results' rows and file names: one
    // printable line (a newline would split a message; fuzz_sweep found it).
    for (const char c : name)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        throw UsageError(fmt::format("workload {}: \"name\" holds a control character (byte {:#04x})", index,
                                     static_cast<unsigned>(static_cast<unsigned char>(c))));
    return name;
  }
  const std::string kind =
      w.is_object() && w.contains("kind") && w["kind"].is_string() ? w["kind"].get<std::string>() : "workload";
  return fmt::format("{}{}", kind, index);
}

nlohmann::json flatten(const nlohmann::json& j) {
  nlohmann::json out = nlohmann::json::object();
  flatten_into(j, "", out);
  return out;
}

nlohmann::json run_workload(const ArchConfig& cfg, const nlohmann::json& w, const std::string& base_dir,
                            const EngineOptions& opts, const std::string& name) {
  if (!w.is_object()) throw FileError("a workload must be an object with a \"kind\"");
  const std::string what = fmt::format("workload {}", name.empty() ? workload_name(w, 0) : name);
  const std::string kind = field<std::string>(w, "kind", what);
  if (kind == "gemm") {
    compiler::MatrixI8 a, b;
    if (w.contains("a") || w.contains("b")) {
      a = run::read_matrix(path_in(base_dir, field<std::string>(w, "a", what)), "A");
      b = run::read_matrix(path_in(base_dir, field<std::string>(w, "b", what)), "B");
    } else {
      std::mt19937_64 gen(field_or<std::uint64_t>(w, "seed", 0, what));
      const auto m = field<std::size_t>(w, "m", what), k = field<std::size_t>(w, "k", what),
                 n = field<std::size_t>(w, "n", what);
      a = random_matrix(m, k, gen, what);
      b = random_matrix(k, n, gen, what);
    }
    const GemmOutcome g = run_gemm(cfg, a, b, field_or<std::string>(w, "requant", "", what),
                                   field_or<std::string>(w, "act", "none", what),
                                   field_or<bool>(w, "check", false, what), opts);
    nlohmann::json row = flatten(run::stats_json(cfg, g.log));
    row["m"] = g.m;
    row["k"] = g.k;
    row["n"] = g.n_out;
    return row;
  }
  if (kind == "net") {
    const compiler::Network net = compiler::load_network(path_in(base_dir, field<std::string>(w, "model", what)));
    const std::string input = path_in(base_dir, field<std::string>(w, "input", what));
    const NpyArray arr = read_npy(input);
    if (arr.rank() != net.input_shape.size() + 1 ||
        !std::equal(net.input_shape.begin(), net.input_shape.end(), arr.shape.begin() + 1))
      throw FileError(fmt::format("{}: expected a batch of inputs of shape (B, {}), got shape {}", input,
                                  fmt::join(net.input_shape, ", "), format_shape(arr.shape)));
    std::size_t batch = arr.shape[0];
    if (w.contains("batch")) batch = std::min(batch, field<std::size_t>(w, "batch", what));
    const std::size_t per = arr.element_count() / std::max<std::size_t>(arr.shape[0], 1);
    compiler::Tensor x;
    std::vector<std::size_t> shape = arr.shape;
    shape[0] = batch;
    if (arr.dtype == Dtype::int8) {
      const std::vector<std::int8_t> v = arr.values<std::int8_t>();
      x.shape = shape;
      x.data.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(batch * per));
    } else {
      std::vector<double> v;
      if (arr.dtype == Dtype::float32) {
        const std::vector<float> f = arr.values<float>();
        v.assign(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(batch * per));
      } else if (arr.dtype == Dtype::float64) {
        v = arr.values<double>();
        v.resize(batch * per);
      } else {
        throw FileError(fmt::format("{}: the input must be int8 (quantized) or float32/float64, got {}",
                                    input, dtype_name(arr.dtype)));
      }
      x = compiler::quantize_input(net, shape, v);
    }
    const NetOutcome o = run_net(cfg, net, x, field_or<bool>(w, "host_steps", false, what),
                                 field_or<bool>(w, "check", false, what), opts);
    nlohmann::json row = flatten(o.stats["total"]);
    row["batch"] = batch;
    row["programs"] = o.run.logs.size();
    // Sums over the programs of what a run reports.
    std::uint64_t instructions = 0, active = 0;
    std::map<std::string, std::uint64_t> stalls;
    for (const model::RunLog& log : o.run.logs) {
      instructions += log.stats.instructions;
      active += log.stats.array_active_cycles;
      for (unsigned c = 0; c < model::kNumStallCauses; ++c)
        stalls[model::stall_cause_name(static_cast<model::StallCause>(c))] += log.stats.stall_cycles[c];
    }
    row["instructions"] = instructions;
    row["array_active_cycles"] = active;
    for (const auto& [cause, cycles] : stalls) row["stall_cycles." + cause] = cycles;
    return row;
  }
  if (kind == "run") {
    const std::string path = path_in(base_dir, field<std::string>(w, "program", what));
    isa::Program prog;
    if (path.size() > 2 && path.compare(path.size() - 2, 2, ".s") == 0)
      prog = assemble_source(read_file_text(path), path, &cfg, static_cast<unsigned>(cfg.array_n));
    else
      prog = isa::load_program(path);
    if (prog.array_n != cfg.array_n)
      throw FileError(fmt::format("{}: assembled for N={}, but the configuration has array_n = {}",
                                  path, prog.array_n, cfg.array_n));
    model::Memories mem(cfg);
    const auto load = [&](const char* key, std::size_t rank, auto* dest, std::size_t capacity) {
      if (!w.contains(key)) return;
      const std::string p = path_in(base_dir, field<std::string>(w, key, what));
      const NpyArray arr = read_npy(p);
      expect(arr, Dtype::int8, rank, key);
      if (arr.shape.back() != cfg.array_n || (rank == 3 && arr.shape[1] != cfg.array_n))
        throw FileError(fmt::format("{}: shape {} does not match the array N={}", p,
                                    format_shape(arr.shape), cfg.array_n));
      if (arr.data.size() > capacity)
        throw FileError(fmt::format("{}: does not fit in the configured memory", p));
      std::memcpy(dest, arr.data.data(), arr.data.size());
    };
    load("hostmem", 2, mem.host.data().data(), mem.host.data().size());
    load("weights", 3, mem.weights.data().data(), mem.weights.data().size());
    model::RunLog log = run_engine(cfg, prog, mem, opts);
    if (log.fault) throw FaultError(std::move(log));
    return flatten(run::stats_json(cfg, log));
  }
  throw FileError(fmt::format("{}: unknown kind \"{}\" (gemm, net, run)", what, kind));
}

}  // namespace tpu::sweep
