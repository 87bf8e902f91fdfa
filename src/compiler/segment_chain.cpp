// The host-step compiler's first pass (segment_chain.h): reads a segment's
// layer indices and produces its chain: per dense or conv2d layer its GEMM
// shape, the K tiles that feed the array (the host's input, or the previous
// layer's output in the UB, flattened there or not) and the lanes that carry
// its bias with the input zero point folded in (docs/quantization.md, "With
// host steps").
#include <fmt/format.h>

#include <algorithm>

#include "compiler/host_layout.h"
#include "compiler/shapes.h"
#include "compiler/segment_chain.h"

namespace tpu::compiler::segment {
namespace {

// The bias with the input zero point folded in:
//   sum_f (x_f - z) w_fo + b_o = sum_f x_f w_fo + (b_o - z sum_f w_fo);
// empty when it is zero everywhere.
std::vector<std::int32_t> folded_bias(const ChainLayer& cl, std::int64_t z_in) {
  const std::vector<std::int64_t> folded = compiler::folded_bias(*cl.layer, static_cast<std::int32_t>(z_in));
  std::vector<std::int32_t> total(folded.begin(), folded.end());  // each already wrapped to int32
  if (std::all_of(total.begin(), total.end(), [](std::int32_t b) { return b == 0; })) total.clear();
  return total;
}

// Inputs the host lays out: the constants go into the padding lanes of the
// last K tile when they fit: one lane of 1 and T lanes of 127.
bool bias_in_host_lanes(ChainLayer& cl, const std::vector<std::int32_t>& total, std::uint64_t n,
                        SegmentPlan& seg) {
  const std::uint64_t free_lanes = cl.tiles.size() * n - cl.k;
  for (std::uint64_t t = 0; t + 1 <= free_lanes; ++t) {
    std::vector<std::int32_t> values(t + 1, 127);
    values[0] = 1;
    if (auto digits = decompose_bias(total, values)) {
      for (std::uint64_t i = 0; i <= t; ++i) {
        const std::uint64_t lane = cl.k + i;
        KTile& tile = cl.tiles[lane / n];
        tile.lanes[lane % n].known = true;
        tile.lanes[lane % n].value = values[i];
        seg.host_lane_values.emplace_back(lane, static_cast<std::int8_t>(values[i]));
        cl.bias_lanes.push_back({lane / n, lane % n, std::move((*digits)[i])});
      }
      return true;
    }
  }
  return false;
}

// Known constant lanes (padding of an earlier layer's output), then as many
// tiles of the constant block (1, 127, ..., 127) as it takes.
void bias_in_constant_lanes(ChainLayer& cl, const std::vector<std::int32_t>& total, std::uint64_t n) {
  for (std::size_t extra = 0; extra <= 64; ++extra) {
    std::vector<std::pair<std::size_t, std::size_t>> where;
    std::vector<std::int32_t> values;
    for (std::size_t t = 0; t < cl.tiles.size(); ++t)
      for (std::size_t j = 0; j < n; ++j)
        if (cl.tiles[t].lanes[j].known && cl.tiles[t].lanes[j].feature < 0 &&
            cl.tiles[t].lanes[j].value != 0) {
          where.emplace_back(t, j);
          values.push_back(cl.tiles[t].lanes[j].value);
        }
    if (auto digits = decompose_bias(total, values)) {
      for (std::size_t i = 0; i < where.size(); ++i)
        if (std::any_of((*digits)[i].begin(), (*digits)[i].end(), [](std::int8_t d) { return d; }))
          cl.bias_lanes.push_back({where[i].first, where[i].second, std::move((*digits)[i])});
      // Constant tiles no digit uses are dropped.
      std::vector<bool> used(cl.tiles.size(), false);
      for (const auto& b : cl.bias_lanes) used[b.tile] = true;
      std::vector<KTile> kept;
      std::vector<std::size_t> renumber(cl.tiles.size());
      for (std::size_t t = 0; t < cl.tiles.size(); ++t)
        if (!cl.tiles[t].from_const || used[t]) {
          renumber[t] = kept.size();
          kept.push_back(std::move(cl.tiles[t]));
        }
      for (auto& b : cl.bias_lanes) b.tile = renumber[b.tile];
      cl.tiles = std::move(kept);
      cl.uses_const = std::any_of(cl.tiles.begin(), cl.tiles.end(),
                                  [](const KTile& t) { return t.from_const; });
      return;
    }
    KTile c;
    c.from_const = true;
    c.lanes.resize(n);
    for (std::size_t j = 0; j < n; ++j) c.lanes[j] = Lane{-1, true, j == 0 ? 1 : 127};
    cl.tiles.push_back(std::move(c));
  }
  throw CompileError(fmt::format(
      "{}: a bias is too large to represent (with the input zero point folded in, "
      "|bias| must stay below about {} in accumulator units: 64 constant tiles)",
      layer_label(*cl.layer, cl.index), 64 * (n - 1) * 127 * 127));
}

void make_bias_lanes(ChainLayer& cl, bool host_input, std::int64_t z_in, std::uint64_t n,
                     SegmentPlan& seg) {
  const std::vector<std::int32_t> total = folded_bias(cl, z_in);
  if (total.empty()) return;
  if (host_input && bias_in_host_lanes(cl, total, n, seg)) return;
  bias_in_constant_lanes(cl, total, n);
}

// The K tiles of a layer reading the host's input: features, padding lanes free.
void host_input_tiles(ChainLayer& cl, std::uint64_t n) {
  const std::uint64_t kt = ceil_div(cl.k, n);
  for (std::uint64_t t = 0; t < kt; ++t) {
    KTile tile;
    tile.block = t;
    tile.lanes.resize(n);
    for (std::uint64_t j = 0; j < n; ++j)
      if (t * n + j < cl.k) tile.lanes[j].feature = static_cast<std::int64_t>(t * n + j);
    cl.tiles.push_back(std::move(tile));
  }
}

// The K tiles of a layer reading the previous one's output: column tile v of
// pixel p is block v * P + p of this layer's rows (P = 1 unless flattened);
// the lanes past its outputs hold its pad value.
void chained_input_tiles(ChainLayer& cl, const ChainLayer& prev, std::uint64_t n) {
  if (prev.layer->int32_output) throw CompileError("internal error: an int32 output inside a segment");
  const std::uint64_t p_count = prev.flatten_after ? prev.pixels : 1;
  for (std::uint64_t v = 0; v < prev.nt; ++v)
    for (std::uint64_t p = 0; p < p_count; ++p) {
      KTile tile;
      tile.block = v * p_count + p;
      tile.lanes.resize(n);
      for (std::uint64_t j = 0; j < n; ++j) {
        const std::uint64_t c = v * n + j;
        if (c < prev.n_out)
          tile.lanes[j].feature = static_cast<std::int64_t>(p * prev.n_out + c);
        else
          tile.lanes[j] = Lane{-1, true, prev.pad_value};
      }
      cl.tiles.push_back(std::move(tile));
    }
  if (cl.layer->kind == LayerKind::Conv2d) cl.pixels = prev.pixels;
}

// Layer `id`'s GEMM shape and requantization.
ChainLayer gemm_layer(const NetworkPlan& plan, std::size_t id, std::uint64_t n) {
  const Layer& l = plan.net.layers[id];
  ChainLayer cl;
  cl.index = id;
  cl.layer = &l;
  const TensorInfo& out = plan.infos[id + 1];
  if (l.kind == LayerKind::Dense) {
    cl.k = l.weight_shape[0];
    cl.n_out = l.weight_shape[1];
    cl.pixels = 1;
  } else {
    cl.k = static_cast<std::uint64_t>(l.weight_shape[0]) * l.weight_shape[1] * l.weight_shape[2];
    cl.n_out = l.weight_shape[3];
    cl.pixels = out.shape[0] * out.shape[1];
  }
  cl.nt = ceil_div(cl.n_out, n);
  if (!l.int32_output) {
    cl.requant = layer_requant(plan.infos[id].quant.scale, l.weight_scale, l.output, l.act);
    cl.act = l.act;
    cl.pad_value = model::activate(model::requantize(0, *cl.requant), cl.act, cl.requant->zero_point);
  }
  return cl;
}

}  // namespace

Chain build_chain(const NetworkPlan& plan, const std::vector<std::size_t>& layer_ids,
                  std::uint64_t n, SegmentPlan& seg) {
  Chain chain;
  for (std::size_t id : layer_ids) {
    const Layer& l = plan.net.layers[id];
    if (l.kind == LayerKind::Flatten) {
      if (chain.layers.empty()) throw CompileError("internal error: a segment starts with a flatten");
      if (chain.layers.back().pixels > 1) {
        chain.layers.back().flatten_after = true;
        chain.unit_is_sample = true;
      }
      continue;
    }
    if (l.kind != LayerKind::Dense && l.kind != LayerKind::Conv2d)
      throw CompileError("internal error: a host layer inside a segment");
    ChainLayer cl = gemm_layer(plan, id, n);
    if (chain.layers.empty())
      host_input_tiles(cl, n);
    else
      chained_input_tiles(cl, chain.layers.back(), n);
    make_bias_lanes(cl, chain.layers.empty(), plan.infos[id].quant.zero_point, n, seg);
    chain.layers.push_back(std::move(cl));
  }
  if (chain.layers.empty()) throw CompileError("internal error: an empty segment");
  if (chain.layers.back().flatten_after)
    throw CompileError("internal error: a segment ends with an in-UB flatten");
  return chain;
}

}  // namespace tpu::compiler::segment
