// The host-step compiler's memory pass (segment_chain.h): reads a segment's
// chain and produces where everything lives: the chunk size (units per
// chunk), the unified buffer's regions (two input regions, each
// intermediate output, two output slots, the constant block), the two
// accumulator slots, the host memory rows (input, constant block, output)
// and the weight tiles; then the weight memory image.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/host_layout.h"
#include "compiler/shapes.h"
#include "compiler/segment_chain.h"

namespace tpu::compiler::segment {
namespace {

// The host rows: the input, the constant block, the output.
void place_host_rows(const NetworkPlan& plan, const Chain& chain, const Layout& layout,
                     std::uint64_t max_ur, std::uint64_t n, std::uint64_t host_rows, SegmentPlan& seg) {
  const ChainLayer& first = chain.first();
  const ChainLayer& last = chain.last();
  const std::uint64_t last_rows_total = seg.units * last.ur;
  const std::uint64_t rows_per_out = layout.int8_out ? 1 : isa::kHostRowsPerAccRow;
  seg.const_host_row = seg.in_k_tiles * seg.units * first.ur;
  seg.const_rows = layout.uses_const ? seg.chunk_units * max_ur : 0;
  if (layout.uses_const) {
    seg.const_lane_values.assign(n, 127);
    seg.const_lane_values[0] = 1;
  }
  seg.out_host_row = seg.const_host_row + seg.const_rows;
  seg.out_rows = last_rows_total;
  seg.out_cols = last.n_out;
  seg.out_col_tiles = last.nt;
  seg.out_int32 = !layout.int8_out;
  seg.out_shape = plan.infos[last.index + 1].shape;
  seg.host_rows_used = seg.out_host_row + last.nt * last_rows_total * rows_per_out;
  if (seg.host_rows_used > host_rows)
    throw CompileError(fmt::format(
        "program {} needs {} host memory rows for a batch of {}, but host memory has {}",
        layer_label(*first.layer, first.index), seg.host_rows_used, plan.batch, host_rows));
}

}  // namespace

std::optional<Layout> layout_segment(const NetworkPlan& plan, Chain& chain, const ArchConfig& cfg,
                                     SegmentPlan& seg) {
  const std::uint64_t n = cfg.array_n;
  const ChainLayer& first = chain.first();
  const ChainLayer& last = chain.last();
  std::uint64_t max_ur = 0;
  for (ChainLayer& cl : chain.layers) {
    cl.ur = chain.unit_is_sample ? cl.pixels : 1;
    max_ur = std::max(max_ur, cl.ur);
  }
  const std::uint64_t units = chain.unit_is_sample ? plan.batch : plan.batch * first.pixels;
  const std::uint64_t kt_in = ceil_div(first.k, n);
  Layout layout;
  layout.uses_const = std::any_of(chain.layers.begin(), chain.layers.end(),
                                  [](const ChainLayer& c) { return c.uses_const; });
  layout.int8_out = !last.layer->int32_output;

  // Unified buffer rows per unit: two input regions, every intermediate
  // output, two output slots, the constant block. Accumulators: two slots.
  std::uint64_t ub_per_unit = 2 * kt_in * first.ur + (layout.int8_out ? 2 * last.ur : 0) +
                              (layout.uses_const ? max_ur : 0);
  for (std::size_t i = 0; i + 1 < chain.layers.size(); ++i)
    ub_per_unit += chain.layers[i].nt * chain.layers[i].ur;
  const std::uint64_t field_max = static_cast<std::uint64_t>(isa::field_spec(isa::Field::Rows).max);
  const std::uint64_t b = std::min({units, cfg.ub_rows / ub_per_unit, cfg.acc_rows / (2 * max_ur),
                                    field_max / (kt_in * first.ur), field_max / max_ur});
  if (b == 0) return std::nullopt;

  seg.unit_is_sample = chain.unit_is_sample;
  seg.units = units;
  seg.chunk_units = b;
  seg.in_k = first.k;
  seg.in_k_tiles = kt_in;
  seg.rows_per_unit_in = first.ur;
  layout.chunks = ceil_div(units, b);

  // Unified buffer regions.
  const std::uint64_t in_region_rows = kt_in * b * first.ur;
  layout.in_ub[0] = 0;
  layout.in_ub[1] = in_region_rows;
  std::uint64_t ub_next = 2 * in_region_rows;
  for (std::size_t i = 0; i + 1 < chain.layers.size(); ++i) {
    chain.layers[i].out_ub = ub_next;
    ub_next += chain.layers[i].nt * b * chain.layers[i].ur;
  }
  const std::uint64_t out_slot_rows = b * last.ur;
  layout.out_ub[0] = ub_next;
  layout.out_ub[1] = ub_next + out_slot_rows;
  if (layout.int8_out) ub_next += 2 * out_slot_rows;
  layout.const_ub = ub_next;
  if (layout.uses_const) ub_next += b * max_ur;
  if (ub_next > cfg.ub_rows) throw CompileError("internal error: unified buffer overflow");
  layout.acc_slot_rows = b * max_ur;

  place_host_rows(plan, chain, layout, max_ur, n, cfg.host_rows, seg);

  // Weight memory: per layer, column tile v, K tile t at base + v * Kt + t.
  std::uint64_t tiles_used = 0;
  for (ChainLayer& cl : chain.layers) {
    cl.weight_base = tiles_used;
    tiles_used += cl.nt * cl.tiles.size();
  }
  if (tiles_used > cfg.weight_tiles)
    throw CompileError(fmt::format("the weights need {} weight tiles, but weight memory has {}",
                                   tiles_used, cfg.weight_tiles));
  seg.weight_tiles_used = tiles_used;
  return layout;
}

void segment_weights(const Chain& chain, std::uint64_t n, SegmentPlan& seg) {
  seg.weights.assign(seg.weight_tiles_used * n * n, 0);
  for (const ChainLayer& cl : chain.layers) {
    std::vector<std::vector<const std::vector<std::int8_t>*>> digit_of(
        cl.tiles.size(), std::vector<const std::vector<std::int8_t>*>(n, nullptr));
    for (const auto& bl : cl.bias_lanes) digit_of[bl.tile][bl.lane] = &bl.digits;
    for (std::uint64_t v = 0; v < cl.nt; ++v)
      for (std::size_t t = 0; t < cl.tiles.size(); ++t) {
        std::int8_t* tile = &seg.weights[(cl.weight_base + v * cl.tiles.size() + t) * n * n];
        for (std::uint64_t j = 0; j < n; ++j) {
          const Lane& lane = cl.tiles[t].lanes[j];
          for (std::uint64_t c = 0; c < n && v * n + c < cl.n_out; ++c) {
            const std::uint64_t o = v * n + c;
            if (lane.feature >= 0)
              tile[j * n + c] = weight_at(*cl.layer, static_cast<std::uint64_t>(lane.feature), o,
                                          cl.n_out);
            else if (digit_of[t][j])
              tile[j * n + c] = (*digit_of[t][j])[o];
          }
        }
      }
  }
}

}  // namespace tpu::compiler::segment
