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
  const std::uint64_t per = samples_per_piece(yp.pixels);
  for (std::uint64_t g = 0; g < yp.groups; ++g) {
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, g);
    std::vector<std::uint64_t> tiles;
    for (int side = 0; side < 2; ++side) {
      std::vector<std::int8_t> t(n_ * n_, 0);
      for (std::uint64_t k = 0; k < n_ && g * n_ + k < yp.channels; ++k)
        t[k * n_ + k] = static_cast<std::int8_t>(side == 0 ? f.a : f.b);
      tiles.push_back(tile(std::move(t)));
    }
    for (const Job& job : jobs(yp.pixels, yp.w, bc)) {
      const std::uint64_t n_end = job.n0 + job.samples;
      const std::uint64_t pixels = job.band.pixels_or(yp.pixels);  // per sample of the job
      const std::uint64_t acc = next_acc(job.samples * pixels);
      bias_passes(btiles, acc, job.samples, pixels, i);
      bool first = btiles.empty();
      for (int side = 0; side < 2; ++side) {
        Op op;
        op.opcode = isa::Opcode::MMC;
        op.flags = isa::kFlagMmcSwitch | (first ? isa::kFlagMmcOverwrite : 0);
        op.a = static_cast<std::int64_t>(plane(ids[side], g, job.n0, bc) + job.band.p0);
        op.b = static_cast<std::int64_t>(acc);
        op.c = static_cast<std::int64_t>(job.samples * pixels);
        op.tile = tiles[side];
        op.layer = i;
        push(op);
        first = false;
      }
      for (std::uint64_t a = job.n0; a < n_end; a += per)
        activate(i, g, a, std::min(n_end, a + per) - 1, acc + (a - job.n0) * pixels, bc, job.band);
    }
  }
}

}  // namespace tpu::compiler::onchip
