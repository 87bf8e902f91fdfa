// One network's run, the path every front end takes (tpu-sim net and topo,
// sweeps and tpusim.net): compile the network, run its programs in order with
// the host steps between (compiler::run_network), each program through the
// caller's ProgramSim (simulate() with its printing for the tools,
// sweep::run_engine() for sweeps and Python); then what they all report from
// it: totals, the statistics JSON and the check against the int8 reference.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "compiler/network.h"
#include "runtime/run_network.h"
#include "config/arch_config.h"
#include "model/memories.h"
#include "model/run_log.h"
#include "run/simulate.h"

namespace tpu::run {

// PATH for the only file of its kind, else PATH with ".K" before its
// extension: the waveforms, timelines and --emit-asm files of a run's
// `count` programs.
std::string indexed_path(const std::string& path, std::size_t k, std::size_t count);

// The options of program k of `count` for simulate(): the waveforms and the
// timeline each program's own (indexed_path), no --stats (the caller writes
// the whole run's).
SimulateOptions program_options(const SimulateOptions& opts, std::size_t k, std::size_t count);

// A layer's name in reports: its own, else "#I".
std::string layer_name(const compiler::Network& net, std::size_t i);

// Totals over programs' runs, and what the reports derive from them at the
// configured clock.
struct RunTotals {
  std::uint64_t cycles = 0;
  std::uint64_t macs = 0;         // the array's (padding lanes included)
  std::uint64_t useful_macs = 0;  // the layers' own

  model::EnergyEvents events;    // the programs' (model/perf_counters.h)

  void add(const model::RunLog& log) {
    cycles += log.stats.cycles;
    macs += log.stats.macs;
    events += log.stats.events;
  }
  double seconds(const ArchConfig& cfg) const;
  // 2 operations per useful MAC.
  double useful_tops(const ArchConfig& cfg) const;
};

// The totals' energy object: stats.h's energy_json of the programs' events
// and cycles, with useful_tops_per_w (2 ops per useful MAC) and, when
// `inferences` > 0 (a network's batch), inferences_per_j.
nlohmann::json totals_energy_json(const ArchConfig& cfg, const RunTotals& totals, std::uint64_t inferences);

// Runs program `k` of a plan's `count` (0-based) on `mem`, which holds its images.
using ProgramSim = std::function<model::RunLog(std::size_t k, std::size_t count, const compiler::ProgramPlan& seg,
                                               model::Memories& mem)>;

// Runs a compiled network on `x`: compiler::run_network with `sim`. A fault is
// not thrown: the run has it (NetworkRun::fault, the last log).
compiler::NetworkRun run_plan(const ArchConfig& cfg, const compiler::NetworkPlan& plan,
                              const compiler::Tensor& x, const ProgramSim& sim);

// How compile_and_run compiles and runs a network.
struct NetworkRunSpec {
  // The compiler: compiler::compile_network in `mode` when empty.
  std::function<compiler::NetworkPlan(const compiler::Network&, std::size_t batch, const ArchConfig&)> compile;
  compiler::CompileMode mode = compiler::CompileMode::Auto;
  // Called with the plan before any program runs (a listing, --emit-asm).
  std::function<void(const compiler::NetworkPlan&)> compiled;
  ProgramSim sim;
};

struct NetworkOutcome {
  compiler::NetworkPlan plan;
  compiler::NetworkRun run;
};

// Compiles `net` for x's batch and runs it (run_plan).
NetworkOutcome compile_and_run(const ArchConfig& cfg, const compiler::Network& net, const compiler::Tensor& x,
                               const NetworkRunSpec& spec);

// The statistics of a network run, as `tpu-sim net --stats` writes them
// (docs/quantization.md): network (its name, else `model_path`), batch,
// array_n, programs (each stats_json and its layers), layers, total. For a
// run that faulted: the programs run so far, the last with its "fault", the
// layers' counts so far, and "fault" (the message) at the top.
nlohmann::json net_stats_json(const ArchConfig& cfg, const compiler::NetworkPlan& plan,
                              const compiler::NetworkRun& run, const std::string& model_path);

// The first element of `y` that differs from the independent int8 reference
// of `net` on `x`, as "output element I = V but the int8 reference gives W";
// nullopt when all equal. `compared` gets the number of elements compared.
std::optional<std::string> reference_mismatch(const compiler::Network& net, const compiler::Tensor& x,
                                              const compiler::Tensor& y, std::size_t* compared = nullptr);

}  // namespace tpu::run
