// What every simulating tpu-sim subcommand shares: the options that choose
// the machine and the outputs of a run, running it, and reporting it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "cli_common.h"
#include "compiler/gemm.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/tpu.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tpu::cli {

// Host rows a program can write: the input's rows, extended to the last row
// any WHM names.
std::uint64_t output_rows(const isa::Program& prog, std::uint64_t input_rows);

// A 2-D int8 .npy file as a matrix; `what` names it in errors (FileError).
compiler::MatrixI8 read_matrix(const std::string& path, std::string_view what);

// Options every simulating subcommand has.
struct SimArgs {
  std::string out;
  std::string stats;
  std::string vcd;
  std::string fst;  // --fst: the waveform --vcd would write, as FST
  bool trace = false;
  std::string timeline;  // --timeline: a Chrome trace of the run (timeline.h)
  model::Cycle max_cycles = 100'000'000;
  std::string detail = "auto";  // --detail, hidden: auto | detailed | fast (model/tpu.h)
  std::string engine = "systemc";  // --engine: systemc | rtl | both
  bool summary = true;  // simulate() prints the summary (topo prints a table of its own instead)
  cli::ConfigOptions cfg;

  void add_to(CLI::App& app);
};

// The model's level of detail named by --detail; a waveform (--vcd, --fst)
// with "fast" is a usage error (CLI::ValidationError).
model::Detail detail_of(const SimArgs& args);

// Thrown by simulate() when --engine both finds the models disagreeing.
class DivergenceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The statistics as the documented JSON object (docs/microarchitecture.md).
nlohmann::json stats_json(const ArchConfig& cfg, const model::RunLog& log);

// The human-readable summary on stdout.
void print_summary(const ArchConfig& cfg, const model::RunLog& log);

// One line of --trace: an instruction's pc, disassembly, issue, start ("-":
// an MMC.S still waiting when the run stopped) and completion cycles.
std::string trace_line(const isa::Program& prog, const model::RetireRecord& r);

// Runs `prog` on `mem` with the engine of --engine, prints the trace
// (--trace) and summary, writes --stats and the waveform (--vcd or --fst, and
// its .gtkw), and reports a fault on stderr; returns the log. With --engine
// both, the RTL's run is the one reported, the SystemC waveform goes to
// --vcd/--fst and the RTL's to NAME.rtl.vcd/.fst, and a divergence from the
// SystemC model throws DivergenceError (after both waveforms are written).
model::RunLog simulate(const SimArgs& args, const ArchConfig& cfg, const isa::Program& prog,
                       model::Memories& mem);

}  // namespace tpu::cli
