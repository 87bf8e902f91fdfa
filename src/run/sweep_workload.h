// Running programs, GEMMs and networks without a command line, and one run of
// a design-space sweep: a configuration and a workload (a GEMM, a network or
// a program, described in JSON) -> one row of statistics. Shared by
// `tpu-sim sweep` (tpu_sweep.cpp) and the Python module tpusim (python/), so
// that both run a workload the same way and report errors with the tools'
// messages and exit statuses (common/exit_codes.h).
//
// A workload (docs/python.md, "Workloads"), paths relative to a base folder:
//   {"name": "g64", "kind": "gemm", "m": 64, "k": 64, "n": 64, "seed": 1}
//       random int8 A (M x K) and B (K x N) from `seed` (default 0); or
//       "a": "A.npy", "b": "B.npy"; optional "requant": "M,S,Z", "act": "relu"
//   {"name": "cnn", "kind": "net", "model": "MODEL.json", "input": "X.npy",
//    "batch": B, "host_steps": false}   (batch: the first B samples)
//   {"name": "p", "kind": "run", "program": "P.s" or "P.tpu",
//    "hostmem": "H.npy", "weights": "W.npy"}
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "asm/diagnostics.h"
#include "compiler/network.h"
#include "runtime/run_network.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "model/tpu.h"
#include "runtime/run_network.h"

namespace tpu::sweep {

// The assembler found errors: what() is every diagnostic as tpu-as prints
// them (FILE:LINE:COL: error: ..., the line, a caret) and "N errors generated.".
class AsmError : public std::runtime_error {
 public:
  AsmError(const std::string& message, std::vector<assembler::Diagnostic> diags)
      : std::runtime_error(message), diagnostics(std::move(diags)) {}
  std::vector<assembler::Diagnostic> diagnostics;
};

// A simulated program faulted: what() is the fault's message (pc, instruction,
// cycle, reason); `log` holds the run up to the fault.
class FaultError : public std::runtime_error {
 public:
  explicit FaultError(model::RunLog run_log)
      : std::runtime_error(run_log.fault->message()), log(std::move(run_log)) {}
  model::RunLog log;
};

// A result differs from the independent reference (--check).
class CheckError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A usage error: an invalid option value (status 2).
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The exit status the tools give for `e` (common/exit_codes.h): AsmError 1,
// UsageError and std::invalid_argument (run::OptionError) 2, file,
// configuration and compile errors 3, FaultError 4, run::DivergenceError 5,
// CheckError 6; anything else 3, as the tools' catch-all.
int exit_status_of(const std::exception& e);
// The message the tools print for `e` (std::bad_alloc gets theirs).
std::string message_of(const std::exception& e);

// Assembles `source` (named `filename` in messages) as tpu-as does, checking
// memory ranges against `cfg` when given; throws AsmError.
isa::Program assemble_source(const std::string& source, const std::string& filename,
                             const ArchConfig* cfg, std::optional<unsigned> array_n);

// How to simulate: the engine (systemc, rtl or both), the model's detail, the
// cycle limit, and a waveform (--vcd; with both, the RTL's at NAME.rtl.vcd).
struct EngineOptions {
  std::string engine = "systemc";
  model::Detail detail = model::Detail::Auto;
  model::Cycle max_cycles = 100'000'000;
  std::string vcd;
  // Called before each program of a network (run_net); may throw to stop
  // the run there (the Python module: Ctrl-C between programs).
  std::function<void()> between_programs;
  // Asked within each program (model::RunOptions::interrupted); true stops
  // the run and run_engine throws Interrupted (the Python module: Ctrl-C).
  std::function<bool()> interrupted;
};

// A run stopped by EngineOptions::interrupted.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

// "systemc" | "rtl" | "both" and "auto" | "detailed" | "fast", else UsageError.
void check_engine(const std::string& engine);
model::Detail parse_detail(const std::string& detail);

// Runs `prog` as `tpu-sim run` does, without printing: with --engine both
// compares the two runs and throws run::DivergenceError. A fault is not
// thrown: the log has it. Runs one simulation at a time per process
// (SystemC's kernel is process-global): callers on other threads wait.
model::RunLog run_engine(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem,
                         const EngineOptions& opts);

// A GEMM as `tpu-sim gemm` runs it.
struct GemmOutcome {
  std::vector<std::int32_t> c;  // M x Nout, int8 values when int8_output
  bool int8_output = false;
  std::uint64_t m = 0, k = 0, n_out = 0;
  isa::Program program;
  std::string assembly;
  model::RunLog log;
};
// requant: "" or "M,S,Z"; act: none | relu | sigmoid | tanh (UsageError
// otherwise, and for an activation without requant). Throws FaultError on a
// fault and, with `check`, CheckError when C differs from the reference.
GemmOutcome run_gemm(const ArchConfig& cfg, const compiler::MatrixI8& a, const compiler::MatrixI8& b,
                     const std::string& requant, const std::string& act, bool check,
                     const EngineOptions& opts);

// A network as `tpu-sim net` runs it.
struct NetOutcome {
  compiler::NetworkPlan plan;
  compiler::NetworkRun run;
  // The statistics as `tpu-sim net --stats` writes them: network, batch,
  // array_n, programs (each stats_json and its layers), layers, total.
  nlohmann::json stats;
};
// Throws FaultError on a fault and, with `check`, CheckError when the output
// differs from the int8 reference.
// `model_path` names the network in the statistics when it has no name.
NetOutcome run_net(const ArchConfig& cfg, const compiler::Network& net, const compiler::Tensor& x,
                   bool host_steps, bool check, const EngineOptions& opts,
                   const std::string& model_path = {});

// The cartesian product of a grid, fields (name, [v1, v2, ...]) in the order
// listed, the last varying fastest; a scalar value is a list of one. A field
// without values, or more than kMaxGridPoints points (counted before any is
// made), is a FileError.
using Grid = std::vector<std::pair<std::string, nlohmann::json>>;
inline constexpr std::uint64_t kMaxGridPoints = 1'000'000;
std::vector<nlohmann::json> expand_grid(const Grid& grid);

// The configuration of one point: `base` ({"preset": P, fields...}), then
// the point's fields ("preset" and "array_n" included). Throws ConfigError.
ArchConfig config_of(const nlohmann::json& base, const nlohmann::json& point);

// Runs `workload` on `cfg` and returns its statistics as one flat JSON object
// of numbers and strings (nested objects joined with '.': "stall_cycles.raw_hazard").
// Throws on any error, as the tools would report it (exit_status_of); the
// messages name the workload `name` (default: workload_name(workload, 0)).
nlohmann::json run_workload(const ArchConfig& cfg, const nlohmann::json& workload,
                            const std::string& base_dir, const EngineOptions& opts,
                            const std::string& name = {});

// The workload's name: "name" (UsageError when empty), else KIND and its index.
std::string workload_name(const nlohmann::json& workload, std::size_t index);

// A nested JSON object flattened into one level with dotted keys.
nlohmann::json flatten(const nlohmann::json& j);

}  // namespace tpu::sweep
