// The on-chip lowering of a concat along channels (docs/quantization.md,
// "Concatenation along channels"): a copy through the array. Each output
// channel group accumulates, for every input plane that holds some of its
// channels, one pass whose weight tile has the input's factor d_i at (lane k,
// column j) when lane k of that plane is channel j of the group (a shifted
// diagonal), and bias passes of -d_i * z_i on the constant plane; one ACT
// per job requantizes to the output.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

void OnChip::lower_concat(std::size_t i, std::uint64_t bc) {
  const auto ids = layer_inputs(net_, i);
  std::vector<double> scales;
  for (std::size_t t : ids) scales.push_back(infos_[t].quant.scale);
  const ConcatFactors f = concat_factors(scales);
  const Place& yp = places_[i + 1];
  // Per output channel: its input, that input's first output channel.
  std::vector<std::int64_t> bias(yp.channels, 0);
  std::vector<std::uint64_t> offset(ids.size(), 0);
  std::uint64_t at = 0;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    offset[k] = at;
    const std::uint64_t ck = places_[base_of(ids[k])].channels;
    for (std::uint64_t c = 0; c < ck; ++c)
      bias[at + c] = wrap32(-std::int64_t{f.d[k]} * infos_[ids[k]].quant.zero_point);
    at += ck;
  }
  if (at != yp.channels) throw CompileError("internal error: concat channels do not add up");
  for (std::uint64_t go = 0; go < yp.groups; ++go) {
    const std::uint64_t lo = go * n_, hi = std::min(yp.channels, lo + n_);
    std::vector<RowPass> passes;  // input k's plane gi through its tile
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const Place& xp = places_[base_of(ids[k])];
      for (std::uint64_t gi = 0; gi < xp.groups; ++gi) {
        // Output channels offset[k] + gi*N + lane, for the plane's lanes.
        const std::uint64_t first = offset[k] + gi * n_;
        const std::uint64_t last = offset[k] + std::min(xp.channels, (gi + 1) * n_);  // past the end
        if (last <= lo || first >= hi) continue;
        std::vector<std::int8_t> t(n_ * n_, 0);
        for (std::uint64_t c = std::max(first, lo); c < std::min(last, hi); ++c)
          t[(c - first) * n_ + (c - lo)] = static_cast<std::int8_t>(f.d[k]);
        passes.push_back({ids[k], gi, tile(std::move(t))});
      }
    }
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, go);
    row_passes(i, go, btiles, passes, bc);
  }
}

}  // namespace tpu::compiler::onchip
