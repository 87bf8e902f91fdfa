// On-chip pass 3, the chunk of samples. Reads the placement and what fits
// (onchip_allocate.cpp); produces the chunk size and count that the
// estimate below prefers among those that fit, whether two input slots
// overlap a chunk's input with the previous chunk's work, and (a network
// spilled to host memory) the staging slots' size.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/onchip_compiler.h"
#include "model/timing.h"

namespace tpu::compiler::onchip {

// Estimated cycles of the batch in chunks of b samples, to choose b: a chunk's
// array time is, per weight tile, the longer of its rows and the tile's
// stream from weight memory (T cycles; every chunk reloads every tile); the
// first chunk's input and the last chunk's output cross the host link while
// the array waits, the other chunks' transfers overlap the array's work.
// Fewer, larger chunks load fewer weights; more, smaller ones hide more host
// traffic (a batch of 8 CNN0 samples: 2 chunks of 4).
double OnChip::estimate(std::uint64_t b) const {
  OnChip trial = *this;
  trial.ops_.clear();
  trial.two_inputs_ = false;
  trial.chunk_ = b;
  trial.chunks_ = 1;
  trial.estimating_ = true;
  trial.lower_chunk(0, b);
  // Per tile: its rows, its stream from memory, and the back-to-back MMC.S
  // chain's bound max(N + 1, (B + 2N + 1) / 2) (docs/microarchitecture.md);
  // per layer: the 2N cycles its first pass waits for the previous layer's
  // last results to leave the array.
  const double t = static_cast<double>(model::weight_tile_cycles(cfg_));
  const double nn = static_cast<double>(n_);
  const auto tile_time = [&](double rows) {
    return std::max({rows, t, nn + 1, (rows + 2 * nn + 1) / 2});
  };
  double array = 0, group = 0;
  bool in_group = false;
  std::size_t layer = ~std::size_t{0};
  for (const Op& op : trial.ops_) {
    if (op.opcode != isa::Opcode::MMC) continue;
    if (op.layer != layer) {
      array += 2 * nn;
      layer = op.layer;
    }
    if (op.flags & isa::kFlagMmcSwitch) {
      if (in_group) array += tile_time(group);
      group = 0;
      in_group = true;
    }
    group += static_cast<double>(op.c);
  }
  if (in_group) array += tile_time(group);
  const double bh = static_cast<double>(cfg_.host_bytes_per_cycle), nb = static_cast<double>(n_);
  const double in = static_cast<double>(places_[0].rows(b)) * nb / bh;
  const double out = static_cast<double>(places_[output_tensor_].rows(b)) * nb *
                     (infos_.back().int32 ? isa::kHostRowsPerAccRow : 1) / bh;
  const double chunks = static_cast<double>(ceil_div(batch_, b));
  return in + out + chunks * array + (chunks - 1) * std::max(0.0, in + out - array);
}

// The chunk of samples: the largest that fits, with two input slots when
// there is more than one chunk (a network that does not fit a sample is
// spilled, a sample per chunk); then, among up to 8 times as many chunks
// as that needs, the count with the smallest estimate (ties: fewer chunks).
void OnChip::choose_chunk() {
  std::uint64_t best = 0;
  bool two = false;
  std::string why = fits(batch_, false);
  if (why.empty()) {
    best = batch_;
  } else {
    for (bool dbl : {true, false}) {
      std::uint64_t lo = 1, hi = batch_ - 1;
      if (!fits(1, dbl).empty()) continue;
      while (lo < hi) {
        const std::uint64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid, dbl).empty()) lo = mid; else hi = mid - 1;
      }
      best = lo;
      two = dbl;
      break;
    }
    if (best == 0) {
      // Not even one sample's maps fit: spill the largest to host memory,
      // a sample per chunk.
      const std::string whole = fits(1, false);
      if (!plan_spill()) throw CompileError(fmt::format("the network does not fit on chip: {}", whole));
      best = 1;
      two = false;
    }
  }
  const std::uint64_t fewest = ceil_div(batch_, best);
  chunks_ = fewest;
  double best_estimate = spill_ ? 0.0 : estimate(ceil_div(batch_, fewest));
  for (std::uint64_t k = fewest + 1; !spill_ && k <= std::min(batch_, 8 * fewest); ++k) {
    const std::uint64_t b = ceil_div(batch_, k);
    if (ceil_div(batch_, b) != k || !fits(b, true).empty()) continue;  // a count no chunk size gives
    const double e = estimate(b);
    if (e < best_estimate) {
      best_estimate = e;
      chunks_ = k;
      two = true;
    }
  }
  chunk_ = ceil_div(batch_, chunks_);
  two_inputs_ = two && chunks_ > 1;
}

// The staging slots take what the unified buffer has left, up to what the
// largest band of any layer that touches a spilled map can use. The slots
// at their minimum fit (plan_spill); first-fit placement need not grow by
// exactly the slots' rows, so the largest size that still fits is searched
// from that guess down.
void OnChip::size_staging() {
  std::uint64_t lo = stage_min();
  stage_slot_ = 0;
  const std::uint64_t rest = cfg_.ub_rows - *allocate(chunk_, false, false);
  std::uint64_t hi = std::max(lo, std::min(stage_useful(), rest / 2));
  while (lo < hi) {
    stage_slot_ = lo + (hi - lo + 1) / 2;
    if (allocate(chunk_, two_inputs_, false)) lo = stage_slot_; else hi = stage_slot_ - 1;
  }
  stage_slot_ = lo;
}

}  // namespace tpu::compiler::onchip
