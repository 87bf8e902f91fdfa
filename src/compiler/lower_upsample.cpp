// Nearest upsampling by integer factors (docs/quantization.md, "Nearest
// upsampling" and "Nearest upsampling by address generation"): its on-chip
// lowering onto max POOLs (its shape rule is infer_upsample, graph.cpp).
// Output row oy of a plane is input row oy / s_h with every pixel repeated
// s_w times: one POOL reads that input row as a W x 1 map (CMAP W, 1, s_w):
// output pixel i of the row is (i / s_w, i % s_w) of the POOL, and its
// 1 x s_w window, from column i % s_w - (s_w - 1), holds column 0 of map row
// i / s_w and otherwise only columns outside the map, which never win. So
// the maximum is input pixel i / s_w itself, read where it lies and written
// once.
#include <fmt/format.h>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_upsample(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  if (xp.w > 65535)
    throw CompileError(fmt::format("{}: an input row of {} pixels exceeds in_h (65535)", layer_label(l, i), xp.w));
  const bool out = base_of(net_.layers.size()) == i + 1;
  isa::ConvGeometry g;
  g.in_h = static_cast<std::uint32_t>(xp.w);
  g.in_w = 1;
  g.out_w = l.stride_w;
  g.stride_y = 1;
  g.stride_x = 1;
  g.origin_y = 0;
  g.origin_x = -static_cast<std::int32_t>(l.stride_w - 1);
  g.win_h = 1;
  g.win_w = l.stride_w;
  g.pad = static_cast<std::int8_t>(infos_[x].quant.zero_point);  // never read: every window holds a pixel
  const std::uint64_t per = samples_per_piece(yp.pixels);
  for (std::uint64_t gr = 0; gr < yp.groups; ++gr)
    for (std::uint64_t n = 0; n < bc; ++n) {
      for (std::uint64_t oy = 0; oy < yp.h; ++oy) {
        Op op;
        op.opcode = isa::Opcode::POOL;
        op.flags = 0;
        op.a = static_cast<std::int64_t>(plane(x, gr, n, bc) + oy / l.stride_h * xp.w);
        op.b = static_cast<std::int64_t>(plane(i + 1, gr, n, bc) + oy * yp.w);
        op.c = static_cast<std::int64_t>(yp.w);
        op.geometry = g;
        op.layer = i;
        push(op);
      }
      if (out && ((n + 1) % per == 0 || n + 1 == bc))
        write_out(gr, n + 1 - ((n % per) + 1), n, bc, ops_.size() - 1, std::nullopt);
    }
}

}  // namespace tpu::compiler::onchip
