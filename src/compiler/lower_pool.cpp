// On-chip lowering of max and average pooling, global average pooling
// among them: a POOL per output group and sample (a global pool: one POOL
// over every sample's map as one window each), in the activation unit. A
// pool that touches a spilled map goes to lower_spill.cpp.
#include <optional>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_pool(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const TensorInfo& in = infos_[x];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const bool global = l.kind == LayerKind::GlobalAvgPool2d;
  const bool average = l.kind != LayerKind::MaxPool2d;
  const bool out = base_of(net_.layers.size()) == i + 1;
  isa::ConvGeometry g;
  g.pad = static_cast<std::int8_t>(in.quant.zero_point);
  if (global) {
    // Every sample's map is one window of a map of bc*H rows.
    g.in_h = static_cast<std::uint32_t>(bc * xp.h);
    g.in_w = static_cast<std::uint32_t>(xp.w);
    g.out_w = 1;
    g.stride_y = static_cast<std::uint32_t>(xp.h);
    g.win_h = static_cast<std::uint32_t>(xp.h);
    g.win_w = static_cast<std::uint32_t>(xp.w);
  } else {
    g = window_geometry(l, xp, yp, in.quant.zero_point, xp.h, 0, 0, 0, 0, true);
  }
  std::optional<model::Requant> q;
  if (average) q = avgpool_requant(l, in, infos_[i + 1], layer_label(l, i));
  const std::uint64_t per = samples_per_piece(yp.pixels);
  for (std::uint64_t gr = 0; gr < yp.groups; ++gr) {
    const std::uint64_t samples = global ? bc : 1;
    for (std::uint64_t n = 0; n < bc; n += samples) {
      Op op;
      op.opcode = isa::Opcode::POOL;
      op.flags = average ? isa::kFlagPoolAverage : 0;
      op.a = static_cast<std::int64_t>(plane(x, gr, n, bc));
      op.b = static_cast<std::int64_t>(plane(i + 1, gr, n, bc));
      op.c = static_cast<std::int64_t>(samples * yp.pixels);
      op.geometry = g;
      op.requant = q;
      op.layer = i;
      push(op);
      if (out && (global || (n + 1) % per == 0 || n + 1 == bc)) {
        const std::uint64_t n0 = global ? 0 : n + 1 - ((n % per) + 1);
        write_out(gr, n0, global ? bc - 1 : n, bc, ops_.size() - 1, std::nullopt);
      }
    }
  }
}

}  // namespace tpu::compiler::onchip
