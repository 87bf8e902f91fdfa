// Lowering of a matmul of two activations (docs/quantization.md, "MatMul of
// two activations"; docs/microarchitecture.md, "Attention's second operand").
// Reads the placement of A (L tokens of K features: K/N planes of L rows per
// sample) and B; produces, per output group, job and sample, one run-time
// weight tile per contraction group, made from up to N rows of B, and the
// passes through it: A's zero point enters as MMC.C passes of padding rows
// (pad = -z_a, every row gets -z_a * colsum(W)), then A's rows; then the ACTs
// with the multiplier alpha s_a s_b / s_o.
//
// The tile is made on the host route (tpuv1) by a WHM of B's rows into the
// host scratch and an HWT (.T for A B^T) into one of the slots reserved after
// the network's tiles, used in turn; the scheduler puts each slot's RW after
// its HWT (onchip_schedule.cpp) and the controller's interlocks order the
// rest (an HWT into a slot whose RW is in flight waits: a WAR on the tile).
// With ub_weight_path the tile is an RWU of B's rows, which the weight
// prefetcher emits in place of RW once B's rows have been written.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

// The tile of `rows` UB rows from ub_row (transposed or not) for `mmc`, the
// first pass through it: the ops that make it, and mmc's tile and feed.
void OnChip::runtime_tile(std::size_t i, std::uint64_t ub_row, std::uint64_t rows, bool transpose, Op& mmc) {
  if (cfg_.ub_weight_path != 0) {
    Op rwu;
    rwu.opcode = isa::Opcode::RWU;
    rwu.flags = transpose ? isa::kFlagRwuTranspose : 0;
    rwu.a = static_cast<std::int64_t>(ub_row);
    rwu.b = static_cast<std::int64_t>(rows);
    rwu.layer = i;
    push(rwu);
    mmc.feed = ops_.size() - 1;
    mmc.tile = 0;
    return;
  }
  const std::uint64_t slot = runtime_seq_++ % runtime_slots_;
  const std::uint64_t host = scratch_host_ + slot * n_;
  Op whm;
  whm.opcode = isa::Opcode::WHM;
  whm.a = static_cast<std::int64_t>(ub_row);
  whm.b = static_cast<std::int64_t>(host);
  whm.c = static_cast<std::int64_t>(rows);
  whm.layer = i;
  push(whm);
  Op hwt;
  hwt.opcode = isa::Opcode::HWT;
  hwt.flags = transpose ? isa::kFlagHwtTranspose : 0;
  hwt.a = static_cast<std::int64_t>(host);
  hwt.b = static_cast<std::int64_t>(slot);
  hwt.c = static_cast<std::int64_t>(rows);
  hwt.runtime_tile = true;
  hwt.layer = i;
  push(hwt);
  mmc.feed = ops_.size() - 1;
  mmc.tile = slot;
  mmc.runtime_tile = true;
}

void OnChip::lower_matmul(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::vector<std::size_t> ids = layer_inputs(net_, i);
  const std::size_t ta = ids[0], tb = ids[1];
  const Place& ap = places_[base_of(ta)];
  const Place& bp = places_[base_of(tb)];
  const Place& yp = places_[i + 1];
  if (ap.host || bp.host || yp.host)
    throw CompileError(fmt::format("{}: a matmul of a map spilled to host memory is not implemented on chip",
                                   layer_label(l, i)));
  if (infos_[tb].quant.zero_point != 0)
    throw CompileError(fmt::format("{}: a matmul's second operand must have zero point 0, got {}",
                                   layer_label(l, i), infos_[tb].quant.zero_point));
  // B's rows are tokens: with transpose_b, output group go's keys are rows
  // go*N.. of B's plane gk; without, contraction group gk's tokens are rows
  // gk*N.. of B's plane go.
  const bool tr = l.transpose_b;
  const std::uint64_t b_tokens = bp.pixels;
  // -z_a as passes of at most 127 (the pad register is int8): 128 is two.
  std::vector<std::int8_t> pads;
  for (std::int32_t c = -infos_[ta].quant.zero_point; c != 0;) {
    const std::int32_t take = std::clamp(c, -128, 127);
    pads.push_back(static_cast<std::int8_t>(take));
    c -= take;
  }
  const std::uint64_t per = samples_per_piece(yp.pixels);
  for (std::uint64_t go = 0; go < yp.groups; ++go)
    for (const Job& job : jobs(yp.pixels, 1, bc)) {
      const std::uint64_t n_end = job.n0 + job.samples;
      const std::uint64_t pixels = job.band.pixels_or(yp.pixels);
      const std::uint64_t acc = next_acc(job.samples * pixels);
      for (std::uint64_t n = job.n0; n < n_end; ++n) {
        const std::uint64_t arow = acc + (n - job.n0) * pixels;
        for (std::uint64_t gk = 0; gk < ap.groups; ++gk) {
          const std::uint64_t first_row = (tr ? go : gk) * n_;
          const std::uint64_t rows = std::min(n_, b_tokens - first_row);
          Op mmc;
          mmc.opcode = isa::Opcode::MMC;
          mmc.layer = i;
          runtime_tile(i, plane(tb, tr ? gk : go, n, bc) + first_row, rows, tr, mmc);
          bool switched = false;
          for (const std::int8_t pad : pads) {
            Op fix = mmc;
            fix.flags = isa::kFlagMmcConvolve | (switched ? 0 : isa::kFlagMmcSwitch) |
                        (gk == 0 && !switched ? isa::kFlagMmcOverwrite : 0);
            if (switched) fix.feed.reset();
            fix.a = static_cast<std::int64_t>(plane(ta, gk, n, bc));
            fix.b = static_cast<std::int64_t>(arow);
            fix.c = static_cast<std::int64_t>(pixels);
            isa::ConvGeometry g;
            g.pad = pad;
            g.origin_y = 1;  // below a one-pixel map: every row is padding
            fix.geometry = g;
            push(fix);
            switched = true;
          }
          mmc.flags = (switched ? 0 : isa::kFlagMmcSwitch) | (gk == 0 && !switched ? isa::kFlagMmcOverwrite : 0);
          if (switched) mmc.feed.reset();
          mmc.a = static_cast<std::int64_t>(plane(ta, gk, n, bc) + job.band.p0);
          mmc.b = static_cast<std::int64_t>(arow);
          mmc.c = static_cast<std::int64_t>(pixels);
          push(mmc);
        }
      }
      for (std::uint64_t a = job.n0; a < n_end; a += per)
        activate(i, go, a, std::min(n_end, a + per) - 1, acc + (a - job.n0) * pixels, bc, job.band);
    }
}

}  // namespace tpu::compiler::onchip
