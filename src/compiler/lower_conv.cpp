// On-chip lowering of conv2d (docs/quantization.md, "Whole networks on
// chip"). Reads the layer's placement, weights and jobs; produces its bias
// passes, one MMC.C pass per kernel offset and input group (depthwise with
// diagonal tiles), or consecutive-row MMCs when its input is laid out per
// output pixel (a host im2col, a pointwise convolution), and the ACTs of
// each job. A layer that touches a spilled map goes to lower_spill.cpp.
#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

OnChip::ConvShape OnChip::conv_shape(std::size_t i) const {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(x)];
  ConvShape s;
  s.depthwise = is_depthwise(l);
  s.host_im2col = im2col_ && *im2col_ == i;
  s.pointwise = !s.depthwise && l.kernel_h == 1 && l.kernel_w == 1 && l.stride_h == 1 && l.stride_w == 1 &&
                !l.pad_top && !l.pad_bottom && !l.pad_left && !l.pad_right;
  s.cin = infos_[x].shape[2];
  s.cout = l.weight_shape[3];
  s.taps = std::uint64_t{l.kernel_h} * l.kernel_w;
  s.gin = s.host_im2col || s.pointwise ? xp.groups : s.depthwise ? 1 : xp.groups;
  s.rounds = (s.host_im2col || s.pointwise ? 1 : s.taps) * s.gin;
  return s;
}

// The tiles by (kernel offset, input group); one offset on consecutive rows
// when the input is already laid out per output pixel. A tile of zeros adds
// nothing: its passes are left out (a grouped convolution's off-diagonal
// blocks, a channel selection's), unless every tile of the output group is
// zero (one pass then clears the accumulators).
void OnChip::conv_tiles(std::size_t i, std::uint64_t go, std::vector<std::uint64_t>& tiles,
                        std::vector<bool>& keep) {
  const Layer& l = net_.layers[i];
  const Place& xp = places_[base_of(layer_inputs(net_, i)[0])];
  const ConvShape s = conv_shape(i);
  const TileKey key{i, go};
  if (const auto k = keep_cache_->find(key); k != keep_cache_->end()) {
    if (estimating_) {
      keep = k->second;
      tiles.assign(keep.size(), 0);
      return;
    }
    if (const auto t = conv_tile_cache_.find(key); t != conv_tile_cache_.end()) {
      keep = k->second;
      tiles = t->second;
      return;
    }
  }
  tiles.clear();
  keep.clear();
  for (std::uint64_t tap = 0; tap < (s.host_im2col || s.pointwise ? 1 : s.taps); ++tap)
    for (std::uint64_t gj = 0; gj < s.gin; ++gj) {
      const std::uint64_t gi = s.depthwise ? go : gj;
      std::vector<std::int8_t> t(n_ * n_, 0);
      for (std::uint64_t k = 0; k < n_ && gi * n_ + k < (s.host_im2col ? xp.channels : s.cin); ++k) {
        if (s.depthwise) {
          t[k * n_ + k] = l.weights[tap * s.cout + gi * n_ + k];
        } else {
          for (std::uint64_t j = 0; j < n_ && go * n_ + j < s.cout; ++j)
            t[k * n_ + j] = weight_at(l, tap * s.cin + gi * n_ + k, go * n_ + j);
        }
      }
      const bool zero = std::all_of(t.begin(), t.end(), [](std::int8_t v) { return v == 0; });
      keep.push_back(!zero || (tiles.size() + 1 == s.rounds && std::none_of(keep.begin(), keep.end(), [](bool b) { return b; })));
      tiles.push_back(keep.back() ? tile(std::move(t)) : 0);
    }
  (*keep_cache_)[key] = keep;
  if (!estimating_) conv_tile_cache_[key] = tiles;
}

void OnChip::lower_conv(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const TensorInfo& in = infos_[x];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const ConvShape s = conv_shape(i);
  const bool depthwise = s.depthwise, host_im2col = s.host_im2col, pointwise = s.pointwise;
  const std::uint64_t taps = s.taps, gin = s.gin, rounds = s.rounds;
  const std::int32_t zin = in.quant.zero_point;
  const std::vector<std::int64_t>& bias = layer_bias(i, zin);
  const std::uint64_t op_pixels = yp.pixels;
  const std::uint64_t per = samples_per_piece(op_pixels);
  std::vector<std::uint64_t> tiles;
  std::vector<bool> keep;
  for (std::uint64_t go = 0; go < yp.groups; ++go) {
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, go);
    conv_tiles(i, go, tiles, keep);
    std::uint64_t last_kept = 0;
    for (std::uint64_t r = 0; r < rounds; ++r)
      if (keep[r]) last_kept = r;
    for (const Job& job : jobs(op_pixels, yp.w, bc)) {
      const Band band = job.band;
      const std::uint64_t n_end = job.n0 + job.samples, p0 = band.p0;
      const std::uint64_t pixels = band.pixels_or(op_pixels);  // per sample of the job
      const std::uint64_t acc = next_acc(job.samples * pixels);
      bias_passes(btiles, acc, job.samples, pixels, i);
      // The ACTs of samples [a, n] of the job once their last pass is in.
      const auto act = [&](std::uint64_t a, std::uint64_t n) {
        activate(i, go, a, n, acc + (a - job.n0) * pixels, bc, band);
      };
      bool first = btiles.empty();
      const auto mmc = [&](std::uint64_t t, bool sw, std::uint64_t ub, std::uint64_t acc_row,
                           std::uint64_t rows, std::optional<isa::ConvGeometry> geo) {
        Op op;
        op.opcode = isa::Opcode::MMC;
        op.flags = (sw ? isa::kFlagMmcSwitch : 0) | (first ? isa::kFlagMmcOverwrite : 0) |
                   (geo ? isa::kFlagMmcConvolve : 0);
        op.a = static_cast<std::int64_t>(ub);
        op.b = static_cast<std::int64_t>(acc_row);
        op.c = static_cast<std::int64_t>(rows);
        op.geometry = geo;
        op.tile = t;
        op.layer = i;
        push(op);
      };
      if (host_im2col || pointwise) {
        // K tiles of consecutive rows: the job's samples (or band) at once.
        for (std::uint64_t gi = 0; gi < gin; ++gi) {
          if (!keep[gi]) continue;
          mmc(tiles[gi], true, plane(x, gi, job.n0, bc) + p0, acc, job.samples * pixels, std::nullopt);
          first = false;
        }
        for (std::uint64_t a = job.n0; a < n_end; a += per) act(a, std::min(n_end, a + per) - 1);
        continue;
      }
      // One pass per kernel offset and input group, sample by sample; a
      // band starts its map p0 / out_w output rows down.
      const std::int64_t y0 = static_cast<std::int64_t>(p0 / yp.w);
      for (std::uint64_t tap = 0; tap < taps; ++tap) {
        const std::uint64_t dy = tap / l.kernel_w, dx = tap % l.kernel_w;
        for (std::uint64_t gj = 0; gj < gin; ++gj) {
          if (!keep[tap * gin + gj]) continue;
          const std::uint64_t gi = depthwise ? go : gj;
          const isa::ConvGeometry g = window_geometry(l, xp, yp, zin, xp.h, 0, y0, dy, dx, false);
          const bool last_round = tap * gin + gj == last_kept;
          std::uint64_t a = job.n0;
          for (std::uint64_t n = job.n0; n < n_end; ++n) {
            mmc(tiles[tap * gin + gj], n == job.n0, plane(x, gi, n, bc), acc + (n - job.n0) * pixels, pixels, g);
            if (last_round && (n + 1 - a == per || n + 1 == n_end)) {
              act(a, n);
              a = n + 1;
            }
          }
          first = false;
        }
      }
    }
  }
}

isa::ConvGeometry window_geometry(const Layer& l, const Place& xp, const Place& yp, std::int32_t pad,
                                  std::uint64_t in_h, std::uint64_t row0, std::uint64_t y0, std::uint64_t dy,
                                  std::uint64_t dx, bool pool) {
  isa::ConvGeometry g;
  g.in_h = static_cast<std::uint32_t>(in_h);
  g.in_w = static_cast<std::uint32_t>(xp.w);
  g.out_w = static_cast<std::uint32_t>(yp.w);
  g.stride_y = l.stride_h;
  g.stride_x = l.stride_w;
  g.pad = static_cast<std::int8_t>(pad);
  g.origin_y = static_cast<std::int32_t>(static_cast<std::int64_t>(dy) - std::int64_t{l.pad_top} +
                                         static_cast<std::int64_t>(y0 * l.stride_h) - static_cast<std::int64_t>(row0));
  g.origin_x = static_cast<std::int32_t>(dx) - static_cast<std::int32_t>(l.pad_left);
  if (pool) {
    g.win_h = l.kernel_h;
    g.win_w = l.kernel_w;
  }
  return g;
}

}  // namespace tpu::compiler::onchip
