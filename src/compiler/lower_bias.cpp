// On-chip lowering: biases and the constant plane. Reads a layer's bias and
// input zero point; produces the folded bias per output, the weight tiles
// that carry it over the constant plane (lanes 1, 127, ..., 127), the bias
// passes (MMCs) that start a job's accumulators, and the ops that generate
// the constant plane on chip (lower_const).
#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

std::uint64_t OnChip::tile(std::vector<std::int8_t> t) { return estimating_ ? 0 : tiles_.add(t); }

const std::vector<std::int64_t>& OnChip::layer_bias(std::size_t i, std::int32_t zin) {
  const auto key = std::make_pair(i, zin);
  auto it = bias_cache_.find(key);
  if (it == bias_cache_.end()) it = bias_cache_.emplace(key, folded_bias(net_.layers[i], zin)).first;
  return it->second;
}

// The tiles of the passes over the constant plane (lanes 1, 127, ..., 127)
// that put bias[go*N + j] into accumulator column j: each pass carries up to
// 127 + 127*127*(N-1) per column, as one digit on the lane of 1 and the rest
// spread over the lanes of 127.
std::vector<std::uint64_t> OnChip::bias_tiles(const std::vector<std::int64_t>& bias, std::uint64_t go) {
  const std::int64_t n = static_cast<std::int64_t>(n_);
  const std::int64_t cap = 127 + 127 * 127 * (n - 1);
  std::vector<std::int64_t> left(n_, 0);
  for (std::uint64_t j = 0; j < n_ && go * n_ + j < bias.size(); ++j) left[j] = bias[go * n_ + j];
  std::vector<std::uint64_t> out;
  while (std::any_of(left.begin(), left.end(), [](std::int64_t v) { return v != 0; })) {
    std::vector<std::int8_t> t(n_ * n_, 0);
    for (std::uint64_t j = 0; j < n_; ++j) {
      const std::int64_t take = std::clamp(left[j], -cap, cap);
      left[j] -= take;
      // q on the lanes of 127, r (|r| <= 127 since |take| <= cap) on the lane of 1.
      std::int64_t q = std::clamp<std::int64_t>(take / 127, -127 * (n - 1), 127 * (n - 1));
      const std::int64_t r = take - q * 127;
      t[j] = static_cast<std::int8_t>(r);
      for (std::uint64_t k = 1; k < n_ && q != 0; ++k) {
        const std::int64_t d = std::clamp<std::int64_t>(q, -127, 127);
        t[k * n_ + j] = static_cast<std::int8_t>(d);
        q -= d;
      }
    }
    out.push_back(tile(std::move(t)));
  }
  return out;
}

// The bias passes of one output group over `samples` samples of `pixels`
// accumulator rows each from `acc`: sample by sample (in pieces of at least
// kPieceRows rows), so that the first pass of a layer waits only for the
// previous layer's activation of the first samples, not of all of them.
void OnChip::bias_passes(const std::vector<std::uint64_t>& tiles, std::uint64_t acc,
                         std::uint64_t samples, std::uint64_t pixels, std::size_t layer) {
  const std::uint64_t per = samples_per_piece(pixels);
  for (std::size_t k = 0; k < tiles.size(); ++k)
    for (std::uint64_t n0 = 0; n0 < samples; n0 += per) {
      const std::uint64_t rows = (std::min(samples, n0 + per) - n0) * pixels;
      Op op;
      op.opcode = isa::Opcode::MMC;
      op.flags = (n0 == 0 ? isa::kFlagMmcSwitch : 0) | (k == 0 ? isa::kFlagMmcOverwrite : 0);
      op.a = static_cast<std::int64_t>(const_ub_);
      op.b = static_cast<std::int64_t>(acc + n0 * pixels);
      op.c = static_cast<std::int64_t>(rows);
      op.tile = tiles[k];
      op.layer = layer;
      push(op);
    }
}

// The constant plane: an MMC.C whose rows are all padding (pad 1) puts
// (1, 127, ..., 127) into every accumulator row, and an ACT at multiplier 1
// writes it to the unified buffer.
void OnChip::lower_const() {
  std::vector<std::int8_t> t(n_ * n_, 0);
  t[0] = 1;
  for (std::uint64_t j = 1; j < n_; ++j) t[j] = 127;
  Op mmc;
  mmc.opcode = isa::Opcode::MMC;
  mmc.flags = isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite | isa::kFlagMmcConvolve;
  mmc.a = static_cast<std::int64_t>(const_ub_);
  mmc.b = 0;
  mmc.c = static_cast<std::int64_t>(const_rows_);
  isa::ConvGeometry g;
  g.in_h = g.in_w = g.out_w = 1;
  g.pad = 1;
  g.origin_y = 1;  // below the one-pixel map: every row is padding
  mmc.geometry = g;
  mmc.tile = tile(std::move(t));
  std::size_t first_user = 0;
  while (first_user + 1 < net_.layers.size() && net_.layers[first_user].kind != LayerKind::Conv2d &&
         net_.layers[first_user].kind != LayerKind::Dense && net_.layers[first_user].kind != LayerKind::Add &&
         net_.layers[first_user].kind != LayerKind::Concat)
    ++first_user;
  mmc.layer = first_user;
  push(mmc);
  Op act;
  act.opcode = isa::Opcode::ACT;
  act.a = 0;
  act.b = static_cast<std::int64_t>(const_ub_);
  act.c = static_cast<std::int64_t>(const_rows_);
  act.requant = model::Requant{1 << 30, 30, 0};
  act.layer = first_user;
  push(act);
}

}  // namespace tpu::compiler::onchip
