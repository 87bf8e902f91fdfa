// Lowering of a softmax layer (docs/quantization.md, "Softmax and attention"):
// one SMAX per chunk over every pixel of its samples. A pixel's channels are
// a token: its G = ceil(C / N) planes are the token's rows, b*P rows apart
// (plane g of sample n at (g*b + n)*P), and the chunk's b*P pixels are b*P
// consecutive tokens from plane 0's first row; NGEO's width is C when C is not
// G*N. The scheduler emits the NGEO,
// NCON and SETQ it needs.
#include <fmt/format.h>

#include "compiler/attention.h"
#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_softmax(std::size_t i, std::uint64_t bc) {
  const std::size_t in = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(in)];
  const Place& yp = places_[i + 1];
  const SoftmaxConstants c = softmax_constants(infos_[in].quant.scale);
  isa::ConvGeometry geo;
  geo.norm.groups = static_cast<std::uint32_t>(xp.groups);
  geo.norm.stride = static_cast<std::uint32_t>(bc * xp.pixels);
  geo.norm.shift = c.shift;
  geo.norm.k0 = c.k0;
  geo.norm.k1 = c.k1;
  geo.norm.k2 = c.k2;
  // A token of D < groups * N values: NGEO's width (the lanes past D are written q(0)).
  if (xp.channels != xp.groups * n_) geo.norm.width = static_cast<std::uint32_t>(xp.channels);
  Op op;
  op.opcode = isa::Opcode::SMAX;
  op.a = static_cast<std::int64_t>(plane(in, 0, 0, bc));
  op.b = static_cast<std::int64_t>(plane(i + 1, 0, 0, bc));
  op.c = static_cast<std::int64_t>(bc * yp.pixels);
  op.geometry = geo;
  op.requant = c.requant;
  op.layer = i;
  push(op);
  // The output leaves in pieces of samples once the SMAX has written them.
  if (base_of(net_.layers.size()) == i + 1) {
    const std::size_t smax = ops_.size() - 1;
    const std::uint64_t per = samples_per_piece(yp.pixels);
    for (std::uint64_t g = 0; g < yp.groups; ++g)
      for (std::uint64_t n0 = 0; n0 < bc; n0 += per) write_out(g, n0, std::min(bc, n0 + per) - 1, bc, smax, std::nullopt);
  }
}

}  // namespace tpu::compiler::onchip
