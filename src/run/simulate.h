// Running one program as the tools do: the engine of --engine (the SystemC
// model, the RTL core or both in lock step), then what the run reports: its
// trace, the summary, the statistics file, the waveform and the timeline.
// The options are plain values; sim/ maps its command-line options onto them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "compiler/gemm.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/tpu.h"

namespace tpu::run {

// Host rows a program can write: the input's rows, extended to the last row
// any WHM names.
std::uint64_t output_rows(const isa::Program& prog, std::uint64_t input_rows);

// A 2-D int8 .npy file as a matrix; `what` names it in errors (FileError).
compiler::MatrixI8 read_matrix(const std::string& path, std::string_view what);

// How simulate() runs a program and what it reports (the options of every
// simulating subcommand, tpu-sim run's names in comments).
struct SimulateOptions {
  std::string stats;     // --stats: the statistics JSON
  std::string vcd;       // --vcd
  std::string fst;       // --fst: the waveform --vcd would write, as FST
  bool trace = false;    // --trace
  std::string timeline;  // --timeline: a Chrome trace of the run (timeline.h)
  model::Cycle max_cycles = 100'000'000;
  std::string detail = "auto";     // --detail, hidden: auto | detailed | fast (model/tpu.h)
  std::string engine = "systemc";  // --engine: systemc | rtl | both
  bool summary = true;  // print the summary (topo prints a table of its own instead)
};

// An option value the run cannot use (--detail fast with a waveform, ...):
// what() is "OPTION: reason", as CLI11 words its validation errors; the tools
// report it as a usage error (status 2).
class OptionError : public std::invalid_argument {
 public:
  OptionError(const std::string& option, const std::string& reason)
      : std::invalid_argument(option + ": " + reason) {}
};

// The model's level of detail named by --detail; a waveform (--vcd, --fst)
// with "fast" is an OptionError.
model::Detail detail_of(const SimulateOptions& opts);

// Thrown when --engine both finds the models disagreeing.
class DivergenceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One line of --trace: an instruction's pc, disassembly, issue, start ("-":
// an MMC.S still waiting when the run stopped) and completion cycles.
std::string trace_line(const isa::Program& prog, const model::RetireRecord& r);

// Runs `prog` on `mem` with the engine of --engine, prints the trace
// (--trace) and summary, writes --stats and the waveform (--vcd or --fst, and
// its .gtkw), and reports a fault on stderr; returns the log. With --engine
// both, the RTL's run is the one reported, the SystemC waveform goes to
// --vcd/--fst and the RTL's to NAME.rtl.vcd/.fst, and a divergence from the
// SystemC model throws DivergenceError (after both waveforms are written).
model::RunLog simulate(const SimulateOptions& opts, const ArchConfig& cfg, const isa::Program& prog,
                       model::Memories& mem);

}  // namespace tpu::run
