// On-chip lowering, the driver. Reads the placement and allocation;
// produces the ops (onchip_ops.h) of one chunk of samples: the input's host
// transfers (the next chunk's loaded ahead into the other input slot), each
// layer through its kind's lowering (the table below: adding an operator
// adds a file and a row), the ACTs that leave a job's accumulators and the
// output's host transfers.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

// The lowering of each layer kind, in the file named after it, and the
// banded one (lower_spill.cpp) of the kinds that may read or write a map
// spilled to host memory; a flatten is a view of its input (placement), no
// ops.
const OnChip::Lowering& OnChip::lowering(LayerKind kind) {
  static const Lowering table[] = {
      {LayerKind::Dense, &OnChip::lower_dense},                                 // lower_dense.cpp
      {LayerKind::Conv2d, &OnChip::lower_conv, &OnChip::lower_conv_spill},      // lower_conv.cpp
      {LayerKind::MaxPool2d, &OnChip::lower_pool, &OnChip::lower_pool_spill},   // lower_pool.cpp
      {LayerKind::AvgPool2d, &OnChip::lower_pool, &OnChip::lower_pool_spill},   //
      {LayerKind::GlobalAvgPool2d, &OnChip::lower_pool},                        //
      {LayerKind::Flatten, &OnChip::lower_view},                                // onchip_compiler.h
      {LayerKind::Add, &OnChip::lower_add},                                     // lower_add.cpp
      {LayerKind::Concat, &OnChip::lower_concat},                               // lower_concat.cpp
      {LayerKind::Mul, &OnChip::lower_vec},                                     // lower_vec.cpp
      {LayerKind::Affine, &OnChip::lower_vec},                                  //
      {LayerKind::Upsample, &OnChip::lower_upsample},                           // lower_upsample.cpp
      // --- attention ---
      {LayerKind::Softmax, &OnChip::lower_softmax},                             // lower_softmax.cpp
      {LayerKind::MatMul, &OnChip::lower_matmul},                               // lower_matmul.cpp
      {LayerKind::LayerNorm, &OnChip::lower_norm},                              // lower_norm.cpp
      {LayerKind::Gelu, &OnChip::lower_norm},                                   //
      {LayerKind::TokenBias, &OnChip::lower_token_bias},                        // lower_token_bias.cpp
  };
  for (const Lowering& row : table)
    if (row.kind == kind) return row;
  throw CompileError(fmt::format("internal error: no on-chip lowering of {}", layer_kind_name(kind)));
}

// The host transfers of chunk c's input, plane by plane in pieces of samples.
void OnChip::lower_input(std::uint64_t c, std::uint64_t bc, std::size_t layer) {
  const Place& p = places_[0];
  if (p.host) return;  // read in bands by its readers
  const std::uint64_t host0 = c * chunk_ * p.groups * p.pixels;
  const std::uint64_t per = samples_per_piece(p.pixels);
  for (std::uint64_t g = 0; g < p.groups; ++g)
    for (std::uint64_t n0 = 0; n0 < bc; n0 += per) {
      const std::uint64_t n1 = std::min(bc, n0 + per) - 1;
      Op op;
      op.opcode = isa::Opcode::RHM;
      op.a = static_cast<std::int64_t>(host0 + (g * bc + n0) * p.pixels);
      op.b = static_cast<std::int64_t>(plane(0, g, n0, bc));
      op.c = static_cast<std::int64_t>((n1 - n0 + 1) * p.pixels);
      op.layer = layer;
      push(op);
    }
}

void OnChip::write_out(std::uint64_t g, std::uint64_t n0, std::uint64_t n1, std::uint64_t bc,
                       std::optional<std::size_t> after, std::optional<std::uint64_t> acc, Band band) {
  const Place& p = places_[output_tensor_];
  const std::uint64_t per_row = acc ? isa::kHostRowsPerAccRow : 1;
  const std::uint64_t p0 = band.p0;
  Op op;
  op.opcode = isa::Opcode::WHM;
  op.flags = acc ? isa::kFlagWhmAcc : 0;
  op.a = static_cast<std::int64_t>(acc ? *acc : plane(output_tensor_, g, n0, bc) + p0);
  op.b = static_cast<std::int64_t>(out_host_ + chunk_c_ * chunk_ * p.groups * p.pixels * per_row +
                                   ((g * bc + n0) * p.pixels + p0) * per_row);
  op.c = static_cast<std::int64_t>(band.pixels_or((n1 - n0 + 1) * p.pixels));
  op.after = after;
  op.layer = net_.layers.size() - 1;
  push(op);
}

void OnChip::activate(std::size_t i, std::uint64_t g, std::uint64_t n0, std::uint64_t n1,
                      std::uint64_t acc, std::uint64_t bc, Band band) {
  const Layer& l = net_.layers[i];
  const std::uint64_t pixels = places_[i + 1].pixels;
  const bool out = base_of(net_.layers.size()) == i + 1;
  if (l.int32_output) {
    write_out(g, n0, n1, bc, std::nullopt, acc, band);
    return;
  }
  Op op;
  op.opcode = isa::Opcode::ACT;
  op.flags = act_flags(l.act);
  op.a = static_cast<std::int64_t>(acc);
  op.b = static_cast<std::int64_t>(plane(i + 1, g, n0, bc) + band.p0);
  op.c = static_cast<std::int64_t>(band.pixels_or((n1 - n0 + 1) * pixels));
  if (l.kind == LayerKind::Concat) {
    std::vector<double> scales;
    for (std::size_t t : layer_inputs(net_, i)) scales.push_back(infos_[t].quant.scale);
    op.requant = concat_requant(scales, l.output);
  } else if (l.kind == LayerKind::TokenBias) {
    // docs/quantization.md, "Constant tokens and positions": s_x / s_y.
    op.requant = requant_from_multiplier(infos_[layer_inputs(net_, i)[0]].quant.scale / l.output.scale,
                                         l.output.zero_point);
  } else if (l.kind == LayerKind::MatMul) {
    // docs/quantization.md, "MatMul of two activations": alpha s_a s_b / s_o.
    const std::vector<std::size_t> ids = layer_inputs(net_, i);
    op.requant = requant_from_multiplier(l.alpha * infos_[ids[0]].quant.scale * infos_[ids[1]].quant.scale /
                                             l.output.scale,
                                         l.output.zero_point);
  } else {
    op.requant = l.kind == LayerKind::Add
                     ? add_requant(infos_[layer_inputs(net_, i)[0]].quant, infos_[layer_inputs(net_, i)[1]].quant,
                                   l.output)
                     : gemm_requant(i);
  }
  op.layer = i;
  push(op);
  if (out) write_out(g, n0, n1, bc, ops_.size() - 1, std::nullopt, band);
}

// The jobs of output group g of an add or a concat, whose passes read
// consecutive rows: per job, the bias passes, one MMC per pass over the
// job's rows (samples, or a band of a sample) and the ACTs in pieces of
// samples.
void OnChip::row_passes(std::size_t i, std::uint64_t g, const std::vector<std::uint64_t>& btiles,
                        const std::vector<RowPass>& passes, std::uint64_t bc) {
  const Place& yp = places_[i + 1];
  const std::uint64_t per = samples_per_piece(yp.pixels);
  for (const Job& job : jobs(yp.pixels, yp.w, bc)) {
    const std::uint64_t n_end = job.n0 + job.samples;
    const std::uint64_t pixels = job.band.pixels_or(yp.pixels);  // per sample of the job
    const std::uint64_t acc = next_acc(job.samples * pixels);
    bias_passes(btiles, acc, job.samples, pixels, i);
    bool first = btiles.empty();
    for (const RowPass& p : passes) {
      Op op;
      op.opcode = isa::Opcode::MMC;
      op.flags = isa::kFlagMmcSwitch | (first ? isa::kFlagMmcOverwrite : 0);
      op.a = static_cast<std::int64_t>(plane(p.tensor, p.group, job.n0, bc) + job.band.p0);
      op.b = static_cast<std::int64_t>(acc);
      op.c = static_cast<std::int64_t>(job.samples * pixels);
      op.tile = p.tile;
      op.layer = i;
      push(op);
      first = false;
    }
    for (std::uint64_t a = job.n0; a < n_end; a += per)
      activate(i, g, a, std::min(n_end, a + per) - 1, acc + (a - job.n0) * pixels, bc, job.band);
  }
}

void OnChip::lower_chunk(std::uint64_t c, std::uint64_t bc) {
  chunk_c_ = c;
  slot_ = two_inputs_ && (c % 2 == 1);
  // The next chunk's input is loaded ahead once the first layer that reads
  // this chunk's has its passes; with no such layer, at the chunk's start.
  const bool ahead = two_inputs_ && !readers_[0].empty();
  if (c == 0 || !ahead) lower_input(c, bc, readers_[0].empty() ? 0 : readers_[0][0]);
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const Lowering& lower = lowering(net_.layers[i].kind);
    if (lower.banded && touches_spill(i))
      (this->*lower.banded)(i);
    else
      (this->*lower.whole)(i, bc);
    // The next chunk's input goes to the other slot once the first layer
    // has been given its passes.
    if (ahead && c + 1 < chunks_ && i == readers_[0][0]) {
      const std::uint64_t next = std::min(chunk_, batch_ - (c + 1) * chunk_);
      const bool cur = slot_;
      slot_ = !cur;
      lower_input(c + 1, next, i);
      slot_ = cur;
    }
  }
  // A network whose output is its input (only flattens): no layer writes
  // the output, so it goes back from the input's planes.
  if (output_tensor_ == 0) {
    const std::uint64_t per = samples_per_piece(places_[0].pixels);
    for (std::uint64_t g = 0; g < places_[0].groups; ++g)
      for (std::uint64_t n0 = 0; n0 < bc; n0 += per)
        write_out(g, n0, std::min(bc, n0 + per) - 1, bc, std::nullopt, std::nullopt);
  }
}

}  // namespace tpu::compiler::onchip
