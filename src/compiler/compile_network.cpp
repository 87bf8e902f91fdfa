// The network compiler's entry: compile_network chooses between the two
// mappings, the whole network on chip (compile_on_chip.cpp) or programs with
// host steps between them (segment_compiler.cpp).
#include <fmt/format.h>

#include "compiler/network.h"

namespace tpu::compiler {

NetworkPlan compile_network(const Network& net, std::uint64_t batch, const ArchConfig& cfg,
                            CompileMode mode) {
  if (mode == CompileMode::OnChip) return compile_on_chip(net, batch, cfg);
  if (mode == CompileMode::Segments) return compile_segments(net, batch, cfg);
  try {
    return compile_on_chip(net, batch, cfg);
  } catch (const CompileError& on_chip) {
    infer_network(net);  // a malformed network is reported as such
    try {
      return compile_segments(net, batch, cfg);
    } catch (const CompileError& segments) {
      throw CompileError(fmt::format("{} (and with host steps: {})", on_chip.what(), segments.what()));
    }
  }
}

}  // namespace tpu::compiler
