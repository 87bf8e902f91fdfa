// The host-step compiler's lowering pass (segment_chain.h): reads a
// segment's chain and layout and produces its program's ops in program
// order (op_list.h). Chunks of units are double-buffered in the two input
// regions (the next loads while this one computes); each column tile of each
// layer is a job in one of the two accumulator slots, and its output (ACT into
// the next layer's input region, or the segment's output to host memory) is
// written one job late so that it overlaps the next job's MMCs; before a
// layer reads its predecessor's output, that output is written out.
#include <fmt/format.h>

#include <algorithm>

#include "common/plural.h"
#include "compiler/host_layout.h"
#include "compiler/shapes.h"
#include "compiler/segment_chain.h"

namespace tpu::compiler::segment {
namespace {

using isa::Opcode;

// One column tile v of chain layer `layer` for chunk `chunk`: its accumulator
// slot and rows.
struct Job {
  std::size_t layer;  // index into the chain
  std::uint64_t chunk, v, acc_base, rows;
};

// The program's opening comments: its layers, units and chunks, and per
// layer its GEMM and requantization.
void describe(const NetworkPlan& plan, const Chain& chain, const Layout& layout,
              const SegmentPlan& seg, OpList& ops) {
  const std::uint64_t n = seg.array_n;
  std::string names;
  for (std::size_t id : seg.layers)
    names += (names.empty() ? "" : ", ") +
             (plan.net.layers[id].name.empty() ? std::string(layer_kind_name(plan.net.layers[id].kind))
                                               : plan.net.layers[id].name);
  ops.comment(fmt::format("{} on a {}x{} array: {} in {} of {}", names, n, n,
                          plural(seg.units, chain.unit_is_sample ? "sample" : "row"),
                          plural(layout.chunks, "chunk"), seg.chunk_units));
  for (const ChainLayer& cl : chain.layers)
    ops.comment(fmt::format("  {}: {}K = {} ({}{}), {} ({}), {}", layer_label(*cl.layer, cl.index),
                            chain.unit_is_sample ? fmt::format("{} per sample, ", plural(cl.ur, "row")) : "",
                            cl.k, plural(cl.tiles.size(), "K tile"),
                            cl.uses_const ? " with the constant block" : "", plural(cl.n_out, "output"),
                            plural(cl.nt, "column tile"),
                            cl.requant ? fmt::format("SETQ {}, {}, {} and {}", cl.requant->multiplier,
                                                     cl.requant->shift, cl.requant->zero_point,
                                                     model::act_function_name(cl.act))
                                       : std::string("int32 output")));
}

// The loads that precede the first chunk's: the constant block, charged to
// the first layer that reads it.
void load_constants(const Chain& chain, const Layout& layout, const SegmentPlan& seg, OpList& ops) {
  if (!layout.uses_const) return;
  for (const ChainLayer& cl : chain.layers)
    if (cl.uses_const) {
      ops.set_layer(cl.index);
      break;
    }
  ops.comment("the constant block (bias lanes)");
  ops.push(Opcode::RHM, 0, seg.const_host_row, layout.const_ub, seg.const_rows);
}

}  // namespace

OpList lower_segment(const NetworkPlan& plan, const Chain& chain, const Layout& layout,
                     const SegmentPlan& seg) {
  const ChainLayer& first = chain.first();
  const std::uint64_t b = seg.chunk_units, units = seg.units, kt_in = seg.in_k_tiles;
  const std::uint64_t rows_per_out = layout.int8_out ? 1 : isa::kHostRowsPerAccRow;
  OpList ops;
  describe(plan, chain, layout, seg, ops);

  std::uint64_t out_jobs = 0;
  const auto drain = [&](const Job& job) {
    const ChainLayer& cl = chain.layers[job.layer];
    ops.set_layer(cl.index);
    if (job.layer + 1 < chain.layers.size()) {
      ops.push(Opcode::ACT, act_flags(cl.act), job.acc_base, cl.out_ub + job.v * job.rows, job.rows)
          .requant = cl.requant;
      return;
    }
    const std::uint64_t m0 = job.chunk * b * cl.ur;
    const std::uint64_t host = seg.out_host_row + (job.v * seg.out_rows + m0) * rows_per_out;
    if (!layout.int8_out) {
      ops.push(Opcode::WHM, isa::kFlagWhmAcc, job.acc_base, host, job.rows);
    } else {
      const std::uint64_t ub = layout.out_ub[out_jobs++ % 2];
      ops.push(Opcode::ACT, act_flags(cl.act), job.acc_base, ub, job.rows).requant = cl.requant;
      ops.push(Opcode::WHM, 0, ub, host, job.rows);
    }
  };
  const auto load_chunk = [&](std::uint64_t c) {
    const std::uint64_t bc = std::min(b, units - c * b);
    ops.set_layer(first.index);
    ops.comment(fmt::format("chunk {}: {} into input region {}", c,
                            plural_range(c * b, bc, chain.unit_is_sample ? "sample" : "row"), c % 2));
    ops.push(Opcode::RHM, 0, c * b * first.ur * kt_in, layout.in_ub[c % 2], kt_in * bc * first.ur);
  };

  load_constants(chain, layout, seg, ops);
  load_chunk(0);
  std::optional<Job> pending;
  std::size_t jobs = 0;
  for (std::uint64_t c = 0; c < layout.chunks; ++c) {
    if (c + 1 < layout.chunks) load_chunk(c + 1);
    const std::uint64_t bc = std::min(b, units - c * b);
    for (std::size_t li = 0; li < chain.layers.size(); ++li) {
      const ChainLayer& cl = chain.layers[li];
      const std::uint64_t input_base = li == 0 ? layout.in_ub[c % 2] : chain.layers[li - 1].out_ub;
      for (std::uint64_t v = 0; v < cl.nt; ++v, ++jobs) {
        const Job job{li, c, v, (jobs % 2) * layout.acc_slot_rows, bc * cl.ur};
        ops.set_layer(cl.index);
        ops.comment(fmt::format("chunk {}, {}, column tile {}: ACC {}", c,
                                layer_label(*cl.layer, cl.index), v,
                                plural_range(job.acc_base, job.rows, "row")));
        for (std::size_t t = 0; t < cl.tiles.size(); ++t) {
          const std::uint64_t ub =
              cl.tiles[t].from_const ? layout.const_ub : input_base + cl.tiles[t].block * job.rows;
          ops.push(Opcode::MMC,
                   static_cast<std::uint8_t>(isa::kFlagMmcSwitch | (t == 0 ? isa::kFlagMmcOverwrite : 0)),
                   ub, job.acc_base, job.rows)
              .tile = cl.weight_base + v * cl.tiles.size() + t;
        }
        if (pending) drain(*pending);
        pending = job;
      }
      // The next layer reads this one's output: write it out first.
      if (li + 1 < chain.layers.size() && pending) {
        drain(*pending);
        pending.reset();
      }
    }
  }
  if (pending) drain(*pending);
  return ops;
}

}  // namespace tpu::compiler::segment
