// tpu-sim net: compiles a quantized network (a model file, docs/quantization.md),
// runs its programs on the model with the host-side steps between them, and
// reports per-layer cycles and utilization.
//
//   tpu-sim net MODEL.json --input X.npy [--out Y.npy] [--labels L.npy]
//               [--emit-asm F.s] [--check] [--stats S.json] [--trace] [--vcd T.vcd]
//               [--max-cycles C] [--engine E] [--preset P] [--config F] [--array N]
#pragma once


#include <memory>

namespace CLI {
class App;
}  // namespace CLI

namespace tpu::cli {

class NetCommand {
 public:
  virtual ~NetCommand() = default;
  virtual bool parsed() const = 0;
  // Runs the command; returns the exit status. Errors in files throw as in
  // the other subcommands (FileError, CompileError: status 3).
  virtual int run() = 0;
};

// Adds the `net` subcommand to `app`.
std::unique_ptr<NetCommand> add_net_command(CLI::App& app);

}  // namespace tpu::cli
