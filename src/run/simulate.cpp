#include "run/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "common/file_io.h"
#include "common/npy.h"
#include "common/plural.h"
#include "model/tpu.h"
#include "rtl_engine/rtl_engine.h"
#include "waves/wave_files.h"
#include "run/progress.h"
#include "run/stats.h"
#include "run/timeline.h"

namespace tpu::run {
namespace {

// Where one engine's waveform goes: --vcd as it is; --fst through a scratch
// VCD that finish() converts. The RTL's of --engine both is NAME.rtl.EXT.
struct WaveTarget {
  std::unique_ptr<wave::FstFromVcd> fst;
  std::string vcd_path;  // for RunOptions::vcd_path; empty: no waveform

  WaveTarget(const SimulateOptions& args, bool rtl_of_both) {
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

// The --trace lines: each instruction, after the stall runs before it.
void print_trace(const isa::Program& prog, const model::RunLog& log) {
  auto stall = log.stall_runs.begin();
  const auto stalls_before = [&](std::size_t seq) {
    for (; stall != log.stall_runs.end() && stall->seq <= seq; ++stall)
      std::cout << fmt::format("          stall {:<23} cycles {}..{} ({})\n", model::stall_cause_name(stall->cause),
                               stall->first, stall->last, stall->last - stall->first + 1);
  };
  for (std::size_t seq = 0; seq < log.retired.size(); ++seq) {
    stalls_before(seq);
    std::cout << trace_line(prog, log.retired[seq]);
  }
  stalls_before(log.retired.size());  // the instruction a fault or the cycle limit stopped
}

}  // namespace

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

model::Detail detail_of(const SimulateOptions& args) {
  if (args.detail == "fast") {
    if (!args.vcd.empty() || !args.fst.empty())
      throw OptionError("--detail", fmt::format("fast has no per-cycle state for {} to show",
                                                args.vcd.empty() ? "--fst" : "--vcd"));
    return model::Detail::Fast;
  }
  return args.detail == "detailed" ? model::Detail::Detailed : model::Detail::Auto;
}

std::string trace_line(const isa::Program& prog, const model::RetireRecord& r) {
  return fmt::format("pc {:>4}  {:<28} issue {:>8}  start {:>8}  complete {:>8}\n", r.pc,
                     isa::disassemble(prog.code[r.pc]), r.issue,
                     r.start == model::kNever ? std::string("-") : fmt::to_string(r.start),
                     r.completed ? fmt::to_string(r.completion) : std::string("-"));
}

// Simulates, prints the trace and summary, writes --stats; returns the log.
model::RunLog simulate(const SimulateOptions& args, const ArchConfig& cfg, const isa::Program& prog,
                       model::Memories& mem) {
  model::RunOptions ropts;
  ropts.max_cycles = args.max_cycles;
  ropts.detail = detail_of(args);
  const bool wave = !args.vcd.empty() || !args.fst.empty();
  if (wave && args.engine != "systemc" && rtl::available(cfg) && !rtl::has_waveforms(cfg))
    throw OptionError(args.vcd.empty() ? "--fst" : "--vcd",
                               rtl::no_waveforms_reason(cfg));
  // --engine both writes two waveforms, the RTL's under a name derived from
  // the one given; a device or FIFO has no such sibling.
  if (wave && args.engine == "both" && is_special_file(args.vcd.empty() ? args.fst : args.vcd))
    throw OptionError(
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

}  // namespace tpu::run
