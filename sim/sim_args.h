// The options of every simulating tpu-sim subcommand (run, gemm, net, topo):
// the run layer's SimulateOptions (run/simulate.h) as command-line options,
// with --out and the machine's configuration (--preset, --config, --array).
#pragma once

#include <string>

#include "cli_common.h"
#include "run/simulate.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tpu::cli {

struct SimArgs : run::SimulateOptions {
  std::string out;
  ConfigOptions cfg;

  void add_to(CLI::App& app);
};

}  // namespace tpu::cli
