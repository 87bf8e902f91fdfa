// Lowering of a matmul of two activations (docs/quantization.md, "MatMul of
// two activations"): not implemented yet.
#include <fmt/format.h>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

// A matmul's second operand must become weight tiles at run time: through the
// host (WHM, HWT, RW) on tpuv1 or the ub_weight_path's RWU
// (docs/microarchitecture.md, "Attention's second operand"). Both exist in
// the ISA and the SystemC model; this lowering does not emit them yet.
void OnChip::lower_matmul(std::size_t i, std::uint64_t) {
  throw CompileError(fmt::format(
      "{}: a matmul of two activations is not implemented on chip yet (its second operand needs the host "
      "route's HWT or the ub_weight_path's RWU: docs/microarchitecture.md, \"Attention's second operand\")",
      layer_label(net_.layers[i], i)));
}

}  // namespace tpu::compiler::onchip
