// Lowering of the transformer layers on the activation unit
// (docs/quantization.md, "Transformer layers"): a LayerNorm is one LNRM per
// piece of samples, its tokens the pixels of the planes (NGEO: the map's
// groups as the token's rows, the chunk's plane size as their stride, its
// channels as the width, so one instruction covers every token of the piece); a GELU is one GELU per output
// plane and piece, element by element like an ACT. The scheduler emits the
// NGEO, NCON and SETQ each needs (the registers in the op's geometry.norm).
#include <fmt/format.h>

#include <algorithm>

#include "compiler/norm_quant.h"
#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_norm(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const TensorInfo& in = infos_[x];
  const bool layernorm = l.kind == LayerKind::LayerNorm;
  if (flattened_map(x))
    throw CompileError(fmt::format("{}: a {} of a flattened map is not supported (its values are not a plane's row)",
                                   layer_label(l, i), layer_kind_name(l.kind)));
  const Place& yp = places_[i + 1];
  const std::uint64_t d = in.shape.back();
  NormSetting s = layernorm ? layernorm_setting(in.quant, d, l.eps, l.output) : gelu_setting(in.quant, l.output);
  if (layernorm) {
    // A token of D < groups * N values: NGEO's width (the lanes past D are written q(0), read by no one).
    if (d != yp.groups * n_) s.regs.width = static_cast<std::uint32_t>(d);
    s.regs.groups = static_cast<std::uint32_t>(yp.groups);
    s.regs.stride = static_cast<std::uint32_t>(bc * yp.pixels);
  }
  const bool out = base_of(net_.layers.size()) == i + 1;
  const std::uint64_t per = samples_per_piece(yp.pixels);
  // LNRM: one op covers every group of its tokens; GELU: one op per group.
  const std::uint64_t groups = layernorm ? 1 : yp.groups;
  for (std::uint64_t g = 0; g < groups; ++g)
    for (std::uint64_t n0 = 0; n0 < bc; n0 += per) {
      const std::uint64_t n1 = std::min(bc, n0 + per) - 1;
      isa::ConvGeometry geo;
      geo.norm = s.regs;
      Op op;
      op.opcode = layernorm ? isa::Opcode::LNRM : isa::Opcode::GELU;
      op.a = static_cast<std::int64_t>(plane(x, g, n0, bc));
      op.b = static_cast<std::int64_t>(plane(i + 1, g, n0, bc));
      op.c = static_cast<std::int64_t>((n1 - n0 + 1) * yp.pixels);
      op.geometry = geo;
      op.requant = s.requant;
      op.layer = i;
      push(op);
      if (!out) continue;
      const std::size_t at = ops_.size() - 1;
      for (std::uint64_t go = layernorm ? 0 : g; go < (layernorm ? yp.groups : g + 1); ++go)
        write_out(go, n0, n1, bc, at, std::nullopt);
    }
}

}  // namespace tpu::compiler::onchip
