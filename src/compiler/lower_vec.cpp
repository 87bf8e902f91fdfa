// Lowering of the layers computed by the vector unit (docs/quantization.md,
// "Layers on the vector unit"): mul (element-wise, or a map by a per-channel
// vector broadcast over its pixels) and affine (operand B is the input itself
// at another zero point). Each is a VEC per output plane and piece of samples
// (per sample for a broadcast, whose operand B row changes with the sample);
// the scheduler emits the VSRC, VSCL and SETQ each needs.
#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_vec(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const auto ids = layer_inputs(net_, i);
  const bool mul = l.kind == LayerKind::Mul;
  const TensorInfo& ia = infos_[ids[0]];
  const VecParams v = mul ? mul_vec(ia.quant, infos_[ids[1]].quant, l.output, l.act)
                          : affine_vec(ia.quant, l.alpha, l.beta, l.output, l.act);
  const bool broadcast = mul && infos_[ids[1]].shape != ia.shape;
  const Place& yp = places_[i + 1];
  const bool out = base_of(net_.layers.size()) == i + 1;
  const std::uint64_t per = broadcast ? 1 : samples_per_piece(yp.pixels);
  const std::uint64_t per_out = samples_per_piece(yp.pixels);
  for (std::uint64_t g = 0; g < yp.groups; ++g)
    for (std::uint64_t n0 = 0; n0 < bc; n0 += per) {
      const std::uint64_t n1 = std::min(bc, n0 + per) - 1;
      isa::ConvGeometry geo;
      geo.vec.b_row = static_cast<std::uint32_t>(mul ? plane(ids[1], g, n0, bc) : plane(ids[0], g, n0, bc));
      geo.vec.broadcast = broadcast;
      geo.vec.za = static_cast<std::int8_t>(v.za);
      geo.vec.zb = static_cast<std::int8_t>(v.zb);
      geo.vec.da = static_cast<std::int16_t>(v.da);
      geo.vec.db = static_cast<std::int16_t>(v.db);
      geo.vec.op = static_cast<isa::VecOperation>(v.op);
      Op op;
      op.opcode = isa::Opcode::VEC;
      op.flags = act_flags(l.act);
      op.a = static_cast<std::int64_t>(plane(ids[0], g, n0, bc));
      op.b = static_cast<std::int64_t>(plane(i + 1, g, n0, bc));
      op.c = static_cast<std::int64_t>((n1 - n0 + 1) * yp.pixels);
      op.geometry = geo;
      op.requant = v.requant;
      op.layer = i;
      push(op);
      // The output leaves in pieces of samples once their last VEC is issued.
      if (out && ((n1 + 1) % per_out == 0 || n1 + 1 == bc)) {
        const std::uint64_t w0 = n1 + 1 - ((n1 % per_out) + 1);
        write_out(g, w0, n1, bc, ops_.size() - 1, std::nullopt);
      }
    }
}

}  // namespace tpu::compiler::onchip
