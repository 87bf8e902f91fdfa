// On-chip lowering of an add (docs/quantization.md): both inputs go
// through the array with diagonal tiles of their factors, and the folded
// zero points as a bias over the constant plane; one ACT per piece of a job
// requantizes to the output.
#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_add(std::size_t i, std::uint64_t bc) {
  const auto ids = layer_inputs(net_, i);
  const QuantParams qa = infos_[ids[0]].quant, qb = infos_[ids[1]].quant;
  const AddFactors f = add_factors(qa.scale, qb.scale);
  const Place& yp = places_[i + 1];
  const std::int64_t folded = wrap32(-(std::int64_t{f.a} * qa.zero_point + std::int64_t{f.b} * qb.zero_point));
  std::vector<std::int64_t> bias(yp.channels, folded);
  for (std::uint64_t g = 0; g < yp.groups; ++g) {
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, g);
    std::vector<std::uint64_t> tiles;
    for (int side = 0; side < 2; ++side) {
      std::vector<std::int8_t> t(n_ * n_, 0);
      for (std::uint64_t k = 0; k < n_ && g * n_ + k < yp.channels; ++k)
        t[k * n_ + k] = static_cast<std::int8_t>(side == 0 ? f.a : f.b);
      tiles.push_back(tile(std::move(t)));
    }
    row_passes(i, g, btiles, {{ids[0], g, tiles[0]}, {ids[1], g, tiles[1]}}, bc);
  }
}

}  // namespace tpu::compiler::onchip
