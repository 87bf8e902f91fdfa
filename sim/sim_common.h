// What every simulating tpu-sim subcommand shares: the options that choose
// the machine and the outputs of a run, running it, and reporting it.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "cli_common.h"
#include "config/arch_config.h"
#include "isa/program.h"
#include "model/memories.h"
#include "model/run_log.h"

namespace tpu::cli {

// Options every simulating subcommand has.
struct SimArgs {
  std::string out;
  std::string stats;
  std::string vcd;
  bool trace = false;
  model::Cycle max_cycles = 100'000'000;
  cli::ConfigOptions cfg;

  void add_to(CLI::App& app);
};

// The statistics as the documented JSON object (docs/microarchitecture.md).
nlohmann::json stats_json(const ArchConfig& cfg, const model::RunLog& log);

// The human-readable summary on stdout.
void print_summary(const ArchConfig& cfg, const model::RunLog& log);

// Runs `prog` on `mem`, prints the trace (--trace) and summary, writes
// --stats, and reports a fault on stderr; returns the log.
model::RunLog simulate(const SimArgs& args, const ArchConfig& cfg, const isa::Program& prog,
                       model::Memories& mem);

}  // namespace tpu::cli
