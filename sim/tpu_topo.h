// tpu-sim topo: runs a SCALE-Sim topology file (the convolution CSV or the
// GEMM M, N, K CSV; docs/topologies.md) on the model, each row as its own
// one-layer network with random int8 data, and reports per row.
//
//   tpu-sim topo FILE.csv [--format auto|conv|gemm] [--batch B] [--seed S]
//                [--rows LIST] [--valid] [--single-filter-depthwise] [--check]
//                [--report R.csv] [--stats S.json] [--trace] [--vcd T.vcd]
//                [--max-cycles C] [--engine E] [--preset P] [--config F] [--array N]
#pragma once


#include <memory>

namespace CLI {
class App;
}  // namespace CLI

namespace tpu::cli {

class TopoCommand {
 public:
  virtual ~TopoCommand() = default;
  virtual bool parsed() const = 0;
  // Runs the command; returns the exit status. A bad topology file is one
  // line "FILE:LINE: error: ..." on stderr and status 3.
  virtual int run() = 0;
};

// Adds the `topo` subcommand to `app`.
std::unique_ptr<TopoCommand> add_topo_command(CLI::App& app);

}  // namespace tpu::cli
