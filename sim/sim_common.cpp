#include "sim_common.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "common/file_io.h"
#include "common/npy.h"
#include "common/plural.h"
#include "model/tpu.h"
#include "progress.h"
#include "rtl_engine/rtl_engine.h"
#include "waves/wave_files.h"
#include "timeline.h"

namespace tpu::cli {
namespace {

// Where one engine's waveform goes: --vcd as it is; --fst through a scratch
// VCD that finish() converts. The RTL's of --engine both is NAME.rtl.EXT.
struct WaveTarget {
  std::unique_ptr<wave::FstFromVcd> fst;
  std::string vcd_path;  // for RunOptions::vcd_path; empty: no waveform

  WaveTarget(const SimArgs& args, bool rtl_of_both) {
    const bool is_fst = !args.fst.empty();
    std::string path = is_fst ? args.fst : args.vcd;
    if (path.empty()) return;
    const char* ext = is_fst ? ".fst" : ".vcd";
    if (rtl_of_both) path = wave::strip_extension(path, ext) + ".rtl" + ext;
    if (is_fst) {
      fst = std::make_unique<wave::FstFromVcd>(path);
      vcd_path = fst->scratch_vcd();
    } else {
      vcd_path = path;
    }
  }
  void finish() {
    if (fst) fst->finish();
  }
};

}  // namespace

void SimArgs::add_to(CLI::App& app) {
  app.add_option("--stats", stats, "write statistics as JSON here");
  auto* vcd_opt = app.add_option(
      "--vcd", vcd,
      "write a waveform here (.vcd) and a GTKWave save file beside it (.gtkw): the SystemC "
      "model's units, or with --engine rtl every signal of the RTL core; --engine both writes "
      "both, the RTL's as NAME.rtl.vcd and NAME.rtl.gtkw");
  app.add_option("--fst", fst,
                 "like --vcd, in GTKWave's compressed FST format (converted from the VCD): "
                 "NAME.fst and NAME.gtkw, and NAME.rtl.fst with --engine both")
      ->excludes(vcd_opt);
  app.add_flag("--trace", trace,
               "print one line per instruction (issue, start, completion) and the stall runs before it");
  app.add_option("--timeline", timeline,
                 "write the run as a Chrome trace (.json; open in Perfetto or chrome://tracing)");
  app.add_option("--max-cycles", max_cycles, "stop with a fault after this many cycles")
      ->capture_default_str();
  // Advanced, for tests and benchmarks: both levels give identical results.
  app.add_option("--detail", detail,
                 "model detail: auto (detailed iff --vcd), detailed (every PE, every cycle) or "
                 "fast (one GEMM per MMC, idle cycles skipped); results are identical")
      ->check(CLI::IsMember({"auto", "detailed", "fast"}))
      ->group("");
  app.add_option("--engine", engine,
                 "systemc (the SystemC model), rtl (the Verilated RTL core) or both (in lock "
                 "step, reporting the first divergence)")
      ->check(CLI::IsMember({"systemc", "rtl", "both"}))
      ->capture_default_str();
  cfg.add_to(app);
}

std::uint64_t output_rows(const isa::Program& prog, std::uint64_t input_rows) {
  std::uint64_t rows = input_rows;
  for (const isa::Instruction& in : prog.code)
    for (const isa::Access& a : isa::accesses(in))
      if (a.space == isa::Space::HostMem && a.is_write) rows = std::max(rows, a.base + a.count);
  return rows;
}

compiler::MatrixI8 read_matrix(const std::string& path, std::string_view what) {
  const NpyArray arr = read_npy(path);
  compiler::MatrixI8 m;
  m.data = expect_int8(arr, 2, what);
  m.rows = arr.shape[0];
  m.cols = arr.shape[1];
  return m;
}

model::Detail detail_of(const SimArgs& args) {
  if (args.detail == "fast") {
    if (!args.vcd.empty() || !args.fst.empty())
      throw CLI::ValidationError("--detail", fmt::format("fast has no per-cycle state for {} to show",
                                                         args.vcd.empty() ? "--fst" : "--vcd"));
    return model::Detail::Fast;
  }
  return args.detail == "detailed" ? model::Detail::Detailed : model::Detail::Auto;
}

nlohmann::json stats_json(const ArchConfig& cfg, const model::RunLog& log) {
  const model::Stats& s = log.stats;
  nlohmann::json j;
  j["array_n"] = cfg.array_n;
  j["cycles"] = s.cycles;
  j["instructions"] = s.instructions;
  j["macs"] = s.macs;
  j["array_active_cycles"] = s.array_active_cycles;
  const double peak = static_cast<double>(s.cycles) * static_cast<double>(cfg.array_n * cfg.array_n);
  j["utilization"] = peak > 0 ? static_cast<double>(s.macs) / peak : 0.0;
  // At the configured clock: 2 operations per MAC of the array's work (the
  // MACs above, padding lanes and columns included).
  const double seconds = static_cast<double>(s.cycles) / (static_cast<double>(cfg.clock_mhz) * 1e6);
  j["clock_mhz"] = cfg.clock_mhz;
  j["seconds"] = seconds;
  j["tops"] = seconds > 0 ? 2.0 * static_cast<double>(s.macs) / seconds / 1e12 : 0.0;
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    j["stall_cycles"][model::stall_cause_name(static_cast<model::StallCause>(c))] = s.stall_cycles[c];
  for (const auto& [name, u] : s.units) {
    j["units"][name]["instructions"] = u.instructions;
    j["units"][name]["busy_cycles"] = u.busy_cycles;
  }
  // The TPUv1 paper's Table 3 rows (docs/microarchitecture.md, "The TPUv1 counters").
  const model::PerfCounters& p = s.tpuv1;
  nlohmann::json& t = j["tpuv1"];
  t["array_active_cycles"] = p.array_active_cycles;
  t["weight_stall_cycles"] = p.weight_stall_cycles;
  t["weight_shift_cycles"] = p.weight_shift_cycles;
  t["non_matrix_cycles"] = p.non_matrix_cycles;
  t["raw_stall_cycles"] = p.raw_stall_cycles;
  t["input_data_stall_cycles"] = p.input_data_stall_cycles;
  t["useful_macs"] = p.useful_macs;
  t["unused_macs"] = p.unused_macs;
  j["halted"] = log.halted;
  if (log.fault) j["fault"] = log.fault->message();
  return j;
}

void print_summary(const ArchConfig& cfg, const model::RunLog& log) {
  const nlohmann::json j = stats_json(cfg, log);
  std::cout << fmt::format("cycles        {}\ninstructions  {}\nMACs          {}\n", log.stats.cycles,
                           log.stats.instructions, log.stats.macs);
  std::cout << fmt::format("utilization   {:.2f}% of {}x{} MACs per cycle\n",
                           100.0 * j["utilization"].get<double>(), cfg.array_n, cfg.array_n);
  std::cout << fmt::format("array active  {}\n", plural(log.stats.array_active_cycles, "cycle"));
  std::cout << fmt::format("time          {:.6g} s at {} MHz, {:.4g} TOPS (2 ops per MAC)\n",
                           j["seconds"].get<double>(), cfg.clock_mhz, j["tops"].get<double>());
  const model::PerfCounters& p = log.stats.tpuv1;
  const auto share = [&](std::uint64_t v) {
    return log.stats.cycles ? 100.0 * static_cast<double>(v) / static_cast<double>(log.stats.cycles) : 0.0;
  };
  const double peak = static_cast<double>(log.stats.cycles) * static_cast<double>(cfg.array_n * cfg.array_n);
  const auto of_peak = [&](std::uint64_t macs) { return peak > 0 ? 100.0 * static_cast<double>(macs) / peak : 0.0; };
  std::cout << "TPUv1 counters (the paper's Table 3; % of cycles, MACs % of peak):\n";
  std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", "array active", p.array_active_cycles,
                           share(p.array_active_cycles));
  std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", "useful MACs", p.useful_macs, of_peak(p.useful_macs));
  std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", "unused MACs", p.unused_macs, of_peak(p.unused_macs));
  for (const auto& [name, v] : {std::pair{"weight stall", p.weight_stall_cycles},
                                std::pair{"weight shift", p.weight_shift_cycles},
                                std::pair{"non-matrix", p.non_matrix_cycles},
                                std::pair{"RAW stall", p.raw_stall_cycles},
                                std::pair{"input data stall", p.input_data_stall_cycles}})
    std::cout << fmt::format("  {:<18} {:>10}  {:5.1f}%\n", name, v, share(v));
  std::cout << "unit busy cycles:\n";
  for (const auto& [name, u] : log.stats.units)
    std::cout << fmt::format("  {:<16} {:>10}  ({})\n", name, u.busy_cycles,
                             plural(u.instructions, "instruction"));
  std::cout << "controller stall cycles:\n";
  for (unsigned c = 0; c < model::kNumStallCauses; ++c)
    std::cout << fmt::format("  {:<18} {:>8}\n",
                             model::stall_cause_name(static_cast<model::StallCause>(c)),
                             log.stats.stall_cycles[c]);
}

std::string trace_line(const isa::Program& prog, const model::RetireRecord& r) {
  return fmt::format("pc {:>4}  {:<28} issue {:>8}  start {:>8}  complete {:>8}\n", r.pc,
                     isa::disassemble(prog.code[r.pc]), r.issue,
                     r.start == model::kNever ? std::string("-") : fmt::to_string(r.start),
                     r.completed ? fmt::to_string(r.completion) : std::string("-"));
}

void print_trace(const isa::Program& prog, const model::RunLog& log) {
  auto run = log.stall_runs.begin();
  const auto stalls_before = [&](std::size_t seq) {
    for (; run != log.stall_runs.end() && run->seq <= seq; ++run)
      std::cout << fmt::format("          stall {:<23} cycles {}..{} ({})\n", model::stall_cause_name(run->cause),
                               run->first, run->last, run->last - run->first + 1);
  };
  for (std::size_t seq = 0; seq < log.retired.size(); ++seq) {
    stalls_before(seq);
    std::cout << trace_line(prog, log.retired[seq]);
  }
  stalls_before(log.retired.size());  // the instruction a fault or the cycle limit stopped
}

// Simulates, prints the trace and summary, writes --stats; returns the log.
model::RunLog simulate(const SimArgs& args, const ArchConfig& cfg, const isa::Program& prog,
                       model::Memories& mem) {
  model::RunOptions ropts;
  ropts.max_cycles = args.max_cycles;
  ropts.detail = detail_of(args);
  const bool wave = !args.vcd.empty() || !args.fst.empty();
  if (wave && args.engine != "systemc" && rtl::available(cfg) && !rtl::has_waveforms(cfg))
    throw CLI::ValidationError(args.vcd.empty() ? "--fst" : "--vcd",
                               rtl::no_waveforms_reason(cfg));
  // --engine both writes two waveforms, the RTL's under a name derived from
  // the one given; a device or FIFO has no such sibling.
  if (wave && args.engine == "both" && is_special_file(args.vcd.empty() ? args.fst : args.vcd))
    throw CLI::ValidationError(
        args.vcd.empty() ? "--fst" : "--vcd",
        "--engine both writes two waveforms (NAME and NAME.rtl): name a file, not a device or FIFO");
  // Before any waveform file is started.
  if (args.engine != "systemc") rtl::require_build(cfg);
  model::RunLog log;
  if (args.engine == "systemc" || args.engine == "rtl") {
    WaveTarget w(args, false);
    ropts.vcd_path = w.vcd_path;
    log = args.engine == "systemc" ? model::run_program(cfg, prog, mem, ropts)
                                   : rtl::run_program(cfg, prog, mem, ropts);
    w.finish();
  } else {
    model::Memories systemc_mem = mem;
    WaveTarget systemc_wave(args, false), rtl_wave(args, true);
    ropts.vcd_path = systemc_wave.vcd_path;
    const model::RunLog systemc_log = model::run_program(cfg, prog, systemc_mem, ropts);
    systemc_wave.finish();
    ropts.vcd_path = rtl_wave.vcd_path;
    log = rtl::run_program(cfg, prog, mem, ropts);
    rtl_wave.finish();
    if (const auto d = rtl::compare(prog, systemc_log, systemc_mem, log, mem))
      throw DivergenceError(d->message());
    progress_clear();
    std::cout << fmt::format("engines: the RTL and the SystemC model agree on {}{}, the statistics "
                             "and every memory\n",
                             agree(log.retired.size(), "", "all "),
                             plural(log.retired.size(), "retire record"));
  }
  progress_clear();  // the progress line (progress.h), before anything is printed
  if (args.trace) print_trace(prog, log);
  if (args.summary) print_summary(cfg, log);
  if (!args.stats.empty()) write_file_atomic(args.stats, stats_json(cfg, log).dump(2) + "\n");
  if (!args.timeline.empty()) {
    Timeline t(cfg);
    t.add_run("program", prog, log);
    write_file_atomic(args.timeline, t.json());
  }
  if (log.fault) std::cerr << "tpu-sim: " << log.fault->message() << '\n';
  return log;
}

}  // namespace tpu::cli
