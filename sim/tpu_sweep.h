// tpu-sim sweep: runs every workload of a sweep file on every configuration
// of its grid, in N worker processes, and writes one CSV row per run
// (docs/python.md, "Sweeps without Python").
//
//   tpu-sim sweep SWEEP.json [--jobs N] [--out RESULTS.csv] [--progress]
#pragma once


#include <memory>

namespace CLI {
class App;
}  // namespace CLI

namespace tpu::cli {

class SweepCommand {
 public:
  virtual ~SweepCommand() = default;
  virtual bool parsed() const = 0;
  // Runs the sweep; returns the exit status: 0 when every run has its row
  // (failed runs included), 3 for an unreadable sweep file or output.
  virtual int run() = 0;
};

// Adds the `sweep` subcommand to `app`.
std::unique_ptr<SweepCommand> add_sweep_command(CLI::App& app);

}  // namespace tpu::cli
