// The tpu-sim subcommands that have files of their own: each add_*_command
// adds its options to the app and returns the command, which main() runs
// when the command line chose it (tpu_sim.cpp holds run and gemm).
#pragma once

#include <memory>

namespace CLI {
class App;
}  // namespace CLI

namespace tpu::cli {

class Subcommand {
 public:
  virtual ~Subcommand() = default;
  // True when the command line chose this subcommand.
  virtual bool parsed() const = 0;
  // Runs it; returns the exit status. Errors in files throw as in the other
  // subcommands (FileError, CompileError: status 3).
  virtual int run() = 0;
};

// tpu-sim net: compiles a quantized network (a model file, docs/quantization.md,
// or an ONNX model, docs/onnx.md), runs its programs on the model with the
// host-side steps between them, and reports per-layer cycles and utilization.
//
//   tpu-sim net MODEL.json --input X.npy [--out Y.npy] [--labels L.npy]
//               [--emit-asm F.s] [--check] [--stats S.json] [--trace] [--vcd T.vcd]
//               [--max-cycles C] [--engine E] [--preset P] [--config F] [--array N]
std::unique_ptr<Subcommand> add_net_command(CLI::App& app);

// tpu-sim topo: runs a SCALE-Sim topology file (the convolution CSV or the
// GEMM M, N, K CSV; docs/topologies.md) on the model, each row as its own
// one-layer network with random int8 data, and reports per row. A bad
// topology file is one line "FILE:LINE: error: ..." on stderr and status 3.
//
//   tpu-sim topo FILE.csv [--format auto|conv|gemm] [--batch B] [--seed S]
//                [--rows LIST] [--valid] [--single-filter-depthwise] [--check]
//                [--report R.csv] [--stats S.json] [--trace] [--vcd T.vcd]
//                [--max-cycles C] [--engine E] [--preset P] [--config F] [--array N]
std::unique_ptr<Subcommand> add_topo_command(CLI::App& app);

// tpu-sim sweep: runs every workload of a sweep file on every configuration
// of its grid, in N worker processes, and writes one CSV row per run
// (docs/python.md, "Sweeps without Python"). Its status is 0 when every run
// has its row (failed runs included), 3 for an unreadable sweep file or output.
//
//   tpu-sim sweep SWEEP.json [--jobs N] [--out RESULTS.csv] [--progress]
std::unique_ptr<Subcommand> add_sweep_command(CLI::App& app);

// tpu-sim serve: a discrete-event simulation of requests served in batches by
// one or more dies, each batch size's TPU time from the model (docs/serving.md).
//
//   tpu-sim serve MODEL [--input X] --rate R --max-batch B [--batch-timeout MS]
//                 --requests N [--arrivals poisson|trace FILE] [--dies D] [--seed S]
//                 [--stats S.json] [--sweep-batch B1,B2,...] [--preset P] ...
std::unique_ptr<Subcommand> add_serve_command(CLI::App& app);

}  // namespace tpu::cli
