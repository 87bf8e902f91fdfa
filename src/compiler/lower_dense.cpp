// On-chip lowering of a dense layer. Reads its placement and weights;
// produces, per output group, the bias passes, one MMC per K tile (input
// group, or pixel and group of a flattened map: an MMC.C gathers that pixel
// of every sample) and the ACTs in pieces of samples.
#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_dense(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const std::uint64_t nout = l.weight_shape[1];
  const std::vector<std::int64_t>& bias = layer_bias(i, infos_[x].quant.zero_point);
  const bool gather = flattened_map(x);
  const std::uint64_t per = samples_per_piece(1);
  for (std::uint64_t go = 0; go < yp.groups; ++go) {
    const std::uint64_t acc = next_acc(bc);
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, go);
    bias_passes(btiles, acc, bc, 1, i);
    bool first = btiles.empty();
    // K tiles: (pixel, input group) of a flattened map, or input groups.
    for (std::uint64_t p = 0; p < xp.pixels; ++p)
      for (std::uint64_t gi = 0; gi < xp.groups; ++gi) {
        std::vector<std::int8_t> t(n_ * n_, 0);
        for (std::uint64_t k = 0; k < n_ && gi * n_ + k < xp.channels; ++k)
          for (std::uint64_t j = 0; j < n_ && go * n_ + j < nout; ++j)
            t[k * n_ + j] = weight_at(l, p * xp.channels + gi * n_ + k, go * n_ + j);
        Op op;
        op.opcode = isa::Opcode::MMC;
        op.flags = isa::kFlagMmcSwitch | (first ? isa::kFlagMmcOverwrite : 0);
        op.b = static_cast<std::int64_t>(acc);
        op.c = static_cast<std::int64_t>(bc);
        op.tile = tile(std::move(t));
        op.layer = i;
        if (gather) {
          // Pixel p of every sample: the samples' planes as the rows of a map.
          isa::ConvGeometry g;
          g.in_h = static_cast<std::uint32_t>(bc);
          g.in_w = static_cast<std::uint32_t>(xp.pixels);
          g.out_w = 1;
          g.origin_x = static_cast<std::int32_t>(p);
          op.flags |= isa::kFlagMmcConvolve;
          op.geometry = g;
        }
        op.a = static_cast<std::int64_t>(plane(x, gi, 0, bc));
        push(op);
        first = false;
      }
    for (std::uint64_t n0 = 0; n0 < bc; n0 += per) activate(i, go, n0, std::min(bc, n0 + per) - 1, acc + n0, bc);
  }
}

}  // namespace tpu::compiler::onchip
