// On-chip lowering of a dense layer. Reads its placement and weights;
// produces, per output group, the bias passes, one MMC per K tile (input
// group, or pixel and group of a map: an MMC.C gathers that pixel of every
// sample) and the ACTs in pieces of samples. A dense layer of several inputs
// (docs/quantization.md, "Recurrent layers") accumulates every input's K
// tiles into the same accumulators, the overwrite flag on the first pass
// only, as the K tiles of one input.
#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {
namespace {

// One input's K tiles: which pixels of it are read, and its first weight row.
struct DenseSource {
  std::size_t tensor = 0;
  bool gather = false;  // a map (flattened, or one pixel of it)
  std::uint64_t first_pixel = 0, pixels = 1, channels = 0, row = 0;
};

}  // namespace

void OnChip::lower_dense(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::vector<std::size_t> ids = layer_inputs(net_, i);
  std::vector<DenseSource> sources;
  std::vector<KPart> parts;
  std::uint64_t row = 0;
  for (std::size_t j = 0; j < ids.size(); ++j) {
    const Place& xp = places_[base_of(ids[j])];
    DenseSource s;
    s.tensor = ids[j];
    s.channels = xp.channels;
    s.row = row;
    if (j == 0 && l.pixel >= 0) {
      s.gather = true;
      s.first_pixel = static_cast<std::uint64_t>(l.pixel);
    } else {
      s.gather = flattened_map(ids[j]);
      s.pixels = xp.pixels;
    }
    row += s.pixels * s.channels;
    parts.push_back({s.pixels * s.channels, infos_[ids[j]].quant.zero_point});
    sources.push_back(s);
  }
  const Place& yp = places_[i + 1];
  const std::uint64_t nout = l.weight_shape[1];
  const std::vector<std::int64_t> bias =
      ids.size() == 1 ? layer_bias(i, parts[0].zin) : folded_bias(l, parts);
  const std::uint64_t per = samples_per_piece(1);
  for (std::uint64_t go = 0; go < yp.groups; ++go) {
    const std::uint64_t acc = next_acc(bc);
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, go);
    bias_passes(btiles, acc, bc, 1, i);
    bool first = btiles.empty();
    // K tiles: (pixel, input group) of each input, in order.
    for (const DenseSource& s : sources) {
      const Place& xp = places_[base_of(s.tensor)];
      for (std::uint64_t p = 0; p < s.pixels; ++p)
        for (std::uint64_t gi = 0; gi < xp.groups; ++gi) {
          // Rows k of the tile: a run of W's row s.row + p*C + gi*N + k,
          // columns go*N .. go*N + N - 1 (those that exist), copied whole.
          std::vector<std::int8_t> t(n_ * n_, 0);
          const std::uint64_t cols = std::min<std::uint64_t>(n_, nout - go * n_);
          const std::uint64_t stride = l.weight_shape.back();  // as weight_at reads W
          for (std::uint64_t k = 0; k < n_ && gi * n_ + k < s.channels; ++k) {
            const std::int8_t* w = &l.weights[(s.row + p * s.channels + gi * n_ + k) * stride + go * n_];
            std::copy(w, w + cols, t.begin() + static_cast<std::ptrdiff_t>(k * n_));
          }
          Op op;
          op.opcode = isa::Opcode::MMC;
          op.flags = isa::kFlagMmcSwitch | (first ? isa::kFlagMmcOverwrite : 0);
          op.b = static_cast<std::int64_t>(acc);
          op.c = static_cast<std::int64_t>(bc);
          op.tile = tile(std::move(t));
          op.layer = i;
          if (s.gather) {
            // Pixel p of every sample: the samples' planes as the rows of a map.
            isa::ConvGeometry g;
            g.in_h = static_cast<std::uint32_t>(bc);
            g.in_w = static_cast<std::uint32_t>(xp.pixels);
            g.out_w = 1;
            g.origin_x = static_cast<std::int32_t>(s.first_pixel + p);
            op.flags |= isa::kFlagMmcConvolve;
            op.geometry = g;
          }
          op.a = static_cast<std::int64_t>(plane(s.tensor, gi, 0, bc));
          push(op);
          first = false;
        }
    }
    for (std::uint64_t n0 = 0; n0 < bc; n0 += per) activate(i, go, n0, std::min(bc, n0 + per) - 1, acc + n0, bc);
  }
}

}  // namespace tpu::compiler::onchip
