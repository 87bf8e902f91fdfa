// The host-step network compiler (`--host-steps`, and the fallback for
// networks that do not fit on chip): a program per chain of layers whose
// input needs no rearrangement, with im2col, max-pool and flatten done by the
// host between programs (docs/quantization.md, "With host steps"); and the
// host memory layout of its programs.
#include "compiler/network.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/plural.h"
#include "compiler/emitter.h"
#include "compiler/host_layout.h"
#include "compiler/shapes.h"
#include "isa/instruction.h"
#include "model/activation.h"

namespace tpu::compiler {
namespace {

using isa::Instruction;
using isa::Opcode;

bool is_pointwise(const Layer& l) {
  return l.kind == LayerKind::Conv2d && l.kernel_h == 1 && l.kernel_w == 1 && l.stride_h == 1 &&
         l.stride_w == 1 && l.pad_top == 0 && l.pad_bottom == 0 && l.pad_left == 0 &&
         l.pad_right == 0;
}


// One input lane of a K tile: a feature of the layer's GEMM (its row of the
// weight matrix), or a lane whose value is a known constant (usable for the
// bias), or neither.
struct Lane {
  std::int64_t feature = -1;
  bool known = false;
  std::int32_t value = 0;
};

struct KTile {
  bool from_const = false;  // reads the constant block
  std::uint64_t block = 0;  // else: UB row = input region + block * rows of the layer
  std::vector<Lane> lanes;  // N
};

// A dense or conv2d layer inside a segment.
struct ChainLayer {
  std::size_t index = 0;
  const Layer* layer = nullptr;
  std::uint64_t k = 0, n_out = 0;  // GEMM view: K x Nout weights
  std::uint64_t pixels = 1;        // rows per sample
  std::uint64_t ur = 1;            // rows per unit
  std::uint64_t nt = 0;            // column tiles
  std::vector<KTile> tiles;
  // (tile, lane, digit per column) of the constant lanes that carry the bias.
  struct BiasLane {
    std::size_t tile;
    std::size_t lane;
    std::vector<std::int8_t> digits;
  };
  std::vector<BiasLane> bias_lanes;
  std::optional<model::Requant> requant;
  model::ActFunction act = model::ActFunction::None;
  std::uint64_t weight_base = 0;
  std::uint64_t out_ub = 0;  // intermediate output region (not the last layer)
  bool uses_const = false;
  bool flatten_after = false;  // an in-UB flatten of pixel rows follows
  // The value of output lane j >= n_out of the last column tile: weights and
  // bias are zero there, so ACC = 0 and the lane holds f(q(0)).
  std::int32_t pad_value = 0;
};

class SegmentBuilder {
 public:
  SegmentBuilder(const NetworkPlan& plan, const ArchConfig& cfg) : plan_(plan), cfg_(cfg) {}
  std::optional<SegmentPlan> build(const std::vector<std::size_t>& layers);

 private:
  void make_bias_lanes(ChainLayer& cl, bool host_input, SegmentPlan& seg);
  const NetworkPlan& plan_;
  const ArchConfig& cfg_;
};

// Weight matrix (K x Nout) element of layer `l`.
std::int8_t weight_at(const Layer& l, std::uint64_t f, std::uint64_t o, std::uint64_t n_out) {
  return l.weights[f * n_out + o];
}

void SegmentBuilder::make_bias_lanes(ChainLayer& cl, bool host_input, SegmentPlan& seg) {
  const Layer& l = *cl.layer;
  const std::uint64_t n = cfg_.array_n;
  const std::int64_t z_in = plan_.infos[cl.index].quant.zero_point;
  // The bias with the input zero point folded in:
  //   sum_f (x_f - z) w_fo + b_o = sum_f x_f w_fo + (b_o - z sum_f w_fo).
  std::vector<std::int32_t> total(cl.n_out);
  bool any = false;
  for (std::uint64_t o = 0; o < cl.n_out; ++o) {
    std::int64_t colsum = 0;
    for (std::uint64_t f = 0; f < cl.k; ++f) colsum += weight_at(l, f, o, cl.n_out);
    const std::int64_t b = l.bias.empty() ? 0 : l.bias[o];
    total[o] = wrap32(b - z_in * colsum);
    any = any || total[o] != 0;
  }
  if (!any) return;

  // Inputs the host lays out: the constants go into the padding lanes of the
  // last K tile when they fit: one lane of 1 and T lanes of 127.
  if (host_input) {
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
        return;
      }
    }
  }
  // Known constant lanes (padding of an earlier layer's output), then as many
  // tiles of the constant block (1, 127, ..., 127) as it takes.
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

std::optional<SegmentPlan> SegmentBuilder::build(const std::vector<std::size_t>& layer_ids) {
  const Network& net = plan_.net;
  const std::uint64_t n = cfg_.array_n;
  SegmentPlan seg;
  seg.layers = layer_ids;
  seg.array_n = n;

  // The chain of GEMM layers and the flattens between them.
  std::vector<ChainLayer> chain;
  bool unit_is_sample = false;
  for (std::size_t id : layer_ids) {
    const Layer& l = net.layers[id];
    if (l.kind == LayerKind::Flatten) {
      if (chain.empty()) throw CompileError("internal error: a segment starts with a flatten");
      if (chain.back().pixels > 1) {
        chain.back().flatten_after = true;
        unit_is_sample = true;
      }
      continue;
    }
    if (l.kind != LayerKind::Dense && l.kind != LayerKind::Conv2d)
      throw CompileError("internal error: a host layer inside a segment");
    ChainLayer cl;
    cl.index = id;
    cl.layer = &l;
    const TensorInfo& out = plan_.infos[id + 1];
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
      cl.requant = layer_requant(plan_.infos[id].quant.scale, l.weight_scale, l.output, l.act);
      cl.act = l.act;
      cl.pad_value = model::activate(model::requantize(0, *cl.requant), cl.act,
                                     cl.requant->zero_point);
    }
    if (chain.empty()) {
      // Input from the host: K tiles of features, padding lanes free.
      const std::uint64_t kt = ceil_div(cl.k, n);
      for (std::uint64_t t = 0; t < kt; ++t) {
        KTile tile;
        tile.block = t;
        tile.lanes.resize(n);
        for (std::uint64_t j = 0; j < n; ++j)
          if (t * n + j < cl.k) tile.lanes[j].feature = static_cast<std::int64_t>(t * n + j);
        cl.tiles.push_back(std::move(tile));
      }
    } else {
      const ChainLayer& prev = chain.back();
      if (prev.layer->int32_output)
        throw CompileError("internal error: an int32 output inside a segment");
      // The previous output as K tiles: column tile v of pixel p is block
      // v * P + p of this layer's rows (P = 1 unless flattened).
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
      if (l.kind == LayerKind::Conv2d) cl.pixels = prev.pixels;
    }
    make_bias_lanes(cl, chain.empty(), seg);
    chain.push_back(std::move(cl));
  }
  if (chain.empty()) throw CompileError("internal error: an empty segment");
  if (chain.back().flatten_after)
    throw CompileError("internal error: a segment ends with an in-UB flatten");

  // Units and rows.
  const std::uint64_t batch = plan_.batch;
  const ChainLayer& first = chain.front();
  const ChainLayer& last = chain.back();
  std::uint64_t max_ur = 0;
  for (ChainLayer& cl : chain) {
    cl.ur = unit_is_sample ? cl.pixels : 1;
    max_ur = std::max(max_ur, cl.ur);
  }
  const std::uint64_t units = unit_is_sample ? batch : batch * first.pixels;
  const std::uint64_t kt_in = ceil_div(first.k, n);
  const bool uses_const = std::any_of(chain.begin(), chain.end(),
                                      [](const ChainLayer& c) { return c.uses_const; });
  const bool int8_out = !last.layer->int32_output;

  // Unified buffer rows per unit: two input regions, every intermediate
  // output, two output slots, the constant block. Accumulators: two slots.
  std::uint64_t ub_per_unit = 2 * kt_in * first.ur + (int8_out ? 2 * last.ur : 0) +
                              (uses_const ? max_ur : 0);
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) ub_per_unit += chain[i].nt * chain[i].ur;
  const std::uint64_t field_max =
      static_cast<std::uint64_t>(isa::field_spec(isa::Field::Rows).max);
  const std::uint64_t b = std::min({units, cfg_.ub_rows / ub_per_unit, cfg_.acc_rows / (2 * max_ur),
                                    field_max / (kt_in * first.ur), field_max / max_ur});
  if (b == 0) return std::nullopt;

  seg.unit_is_sample = unit_is_sample;
  seg.units = units;
  seg.chunk_units = b;
  seg.in_k = first.k;
  seg.in_k_tiles = kt_in;
  seg.rows_per_unit_in = first.ur;
  const std::uint64_t chunks = ceil_div(units, b);

  // Unified buffer regions.
  std::uint64_t ub_next = 0;
  const std::uint64_t in_region_rows = kt_in * b * first.ur;
  const std::uint64_t in_ub[2] = {0, in_region_rows};
  ub_next = 2 * in_region_rows;
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
    chain[i].out_ub = ub_next;
    ub_next += chain[i].nt * b * chain[i].ur;
  }
  const std::uint64_t out_slot_rows = b * last.ur;
  const std::uint64_t out_ub[2] = {ub_next, ub_next + out_slot_rows};
  if (int8_out) ub_next += 2 * out_slot_rows;
  const std::uint64_t const_ub = ub_next;
  if (uses_const) ub_next += b * max_ur;
  if (ub_next > cfg_.ub_rows) throw CompileError("internal error: unified buffer overflow");
  const std::uint64_t acc_slot_rows = b * max_ur;

  // Host memory: the input, the constant block, the output.
  const std::uint64_t last_rows_total = units * last.ur;
  const std::uint64_t rows_per_out = int8_out ? 1 : isa::kHostRowsPerAccRow;
  seg.const_host_row = kt_in * units * first.ur;
  seg.const_rows = uses_const ? b * max_ur : 0;
  if (uses_const) {
    seg.const_lane_values.assign(n, 127);
    seg.const_lane_values[0] = 1;
  }
  seg.out_host_row = seg.const_host_row + seg.const_rows;
  seg.out_rows = last_rows_total;
  seg.out_cols = last.n_out;
  seg.out_col_tiles = last.nt;
  seg.out_int32 = !int8_out;
  seg.out_shape = plan_.infos[last.index + 1].shape;
  seg.host_rows_used = seg.out_host_row + last.nt * last_rows_total * rows_per_out;
  if (seg.host_rows_used > cfg_.host_rows)
    throw CompileError(fmt::format(
        "program {} needs {} host memory rows for a batch of {}, but host memory has {}",
        layer_label(*first.layer, first.index), seg.host_rows_used, batch, cfg_.host_rows));

  // Weight memory: per layer, column tile v, K tile t at base + v * Kt + t.
  std::uint64_t tiles_used = 0;
  for (ChainLayer& cl : chain) {
    cl.weight_base = tiles_used;
    tiles_used += cl.nt * cl.tiles.size();
  }
  if (tiles_used > cfg_.weight_tiles)
    throw CompileError(fmt::format("the weights need {} weight tiles, but weight memory has {}",
                                   tiles_used, cfg_.weight_tiles));
  seg.weight_tiles_used = tiles_used;
  seg.weights.assign(tiles_used * n * n, 0);
  for (const ChainLayer& cl : chain) {
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

  // The program.
  Emitter e;
  std::string names;
  for (std::size_t id : layer_ids)
    names += (names.empty() ? "" : ", ") +
             (net.layers[id].name.empty() ? std::string(layer_kind_name(net.layers[id].kind))
                                          : net.layers[id].name);
  e.comment(fmt::format("{} on a {}x{} array: {} in {} of {}", names, n, n,
                        plural(units, unit_is_sample ? "sample" : "row"), plural(chunks, "chunk"), b));
  for (const ChainLayer& cl : chain)
    e.comment(fmt::format("  {}: {}K = {} ({}{}), {} ({}), {}",
                          layer_label(*cl.layer, cl.index),
                          unit_is_sample ? fmt::format("{} per sample, ", plural(cl.ur, "row")) : "",
                          cl.k, plural(cl.tiles.size(), "K tile"),
                          cl.uses_const ? " with the constant block" : "", plural(cl.n_out, "output"),
                          plural(cl.nt, "column tile"),
                          cl.requant ? fmt::format("SETQ {}, {}, {} and {}", cl.requant->multiplier,
                                                   cl.requant->shift, cl.requant->zero_point,
                                                   model::act_function_name(cl.act))
                                     : std::string("int32 output")));

  struct Job {
    std::size_t layer;  // index into chain
    std::uint64_t chunk, v, acc_base, rows;
  };
  std::vector<Job> jobs;
  std::vector<std::uint64_t> tile_order;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint64_t bc = std::min(b, units - c * b);
    for (std::size_t li = 0; li < chain.size(); ++li)
      for (std::uint64_t v = 0; v < chain[li].nt; ++v) {
        jobs.push_back({li, c, v, (jobs.size() % 2) * acc_slot_rows, bc * chain[li].ur});
        for (std::size_t t = 0; t < chain[li].tiles.size(); ++t)
          tile_order.push_back(chain[li].weight_base + v * chain[li].tiles.size() + t);
      }
  }
  WeightPrefetcher rw(e, tile_order, cfg_.fifo_depth);
  model::Requant current_q;  // the reset values
  std::uint64_t out_jobs = 0;
  const auto drain = [&](const Job& job) {
    const ChainLayer& cl = chain[job.layer];
    e.set_layer(cl.index);
    const bool is_last = job.layer + 1 == chain.size();
    if (cl.requant && (cl.requant->multiplier != current_q.multiplier ||
                       cl.requant->shift != current_q.shift ||
                       cl.requant->zero_point != current_q.zero_point)) {
      e.emit(Opcode::SETQ, 0, cl.requant->multiplier, cl.requant->shift, cl.requant->zero_point);
      current_q = *cl.requant;
    }
    if (!is_last) {
      e.emit(Opcode::ACT, act_flags(cl.act), job.acc_base, cl.out_ub + job.v * job.rows, job.rows);
      return;
    }
    const std::uint64_t m0 = job.chunk * b * cl.ur;
    const std::uint64_t host = seg.out_host_row + (job.v * last_rows_total + m0) * rows_per_out;
    if (!int8_out) {
      e.emit(Opcode::WHM, isa::kFlagWhmAcc, job.acc_base, host, job.rows);
    } else {
      const std::uint64_t ub = out_ub[out_jobs++ % 2];
      e.emit(Opcode::ACT, act_flags(cl.act), job.acc_base, ub, job.rows);
      e.emit(Opcode::WHM, 0, ub, host, job.rows);
    }
  };

  e.set_layer(first.index);
  if (uses_const) {
    for (const ChainLayer& cl : chain)
      if (cl.uses_const) {
        e.set_layer(cl.index);
        break;
      }
    e.comment("the constant block (bias lanes)");
    e.emit(Opcode::RHM, 0, seg.const_host_row, const_ub, seg.const_rows);
  }
  const auto load_chunk = [&](std::uint64_t c) {
    const std::uint64_t bc = std::min(b, units - c * b);
    e.set_layer(first.index);
    e.comment(fmt::format("chunk {}: {} into input region {}", c,
                          plural_range(c * b, bc, unit_is_sample ? "sample" : "row"), c % 2));
    e.emit(Opcode::RHM, 0, c * b * first.ur * kt_in, in_ub[c % 2], kt_in * bc * first.ur);
  };
  load_chunk(0);
  std::optional<Job> pending;
  std::size_t use = 0;
  std::size_t job_index = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) load_chunk(c + 1);
    for (std::size_t li = 0; li < chain.size(); ++li) {
      const ChainLayer& cl = chain[li];
      const std::uint64_t input_base =
          li == 0 ? in_ub[c % 2] : chain[li - 1].out_ub;
      for (std::uint64_t v = 0; v < cl.nt; ++v, ++job_index) {
        const Job& job = jobs[job_index];
        e.set_layer(cl.index);
        e.comment(fmt::format("chunk {}, {}, column tile {}: ACC {}", c,
                              layer_label(*cl.layer, cl.index), v,
                              plural_range(job.acc_base, job.rows, "row")));
        for (std::size_t t = 0; t < cl.tiles.size(); ++t, ++use) {
          rw.before_use(use);
          e.set_layer(cl.index);
          const std::uint64_t ub =
              cl.tiles[t].from_const ? const_ub : input_base + cl.tiles[t].block * job.rows;
          e.emit(Opcode::MMC,
                 static_cast<std::uint8_t>(isa::kFlagMmcSwitch |
                                           (t == 0 ? isa::kFlagMmcOverwrite : 0)),
                 ub, job.acc_base, job.rows);
        }
        if (pending) drain(*pending);
        pending = job;
      }
      // The next layer reads this one's output: write it out first.
      if (li + 1 < chain.size() && pending) {
        drain(*pending);
        pending.reset();
      }
    }
  }
  if (pending) drain(*pending);
  e.set_layer(last.index);
  e.emit(Opcode::HLT, 0);

  seg.program.array_n = static_cast<unsigned>(n);
  seg.program.code = std::move(e.code());
  seg.instruction_layer = std::move(e.layers());
  seg.assembly = fmt::format(".array {}\n", n) + e.text();
  return seg;
}

// Sample n's value at (y, x, c) of an HWC tensor, or the zero point outside.
struct HwcView {
  const std::int32_t* data;
  std::size_t h, w, c;
  std::int32_t at(std::size_t n, std::int64_t y, std::int64_t x, std::size_t ch,
                  std::int32_t pad) const {
    if (y < 0 || x < 0 || y >= static_cast<std::int64_t>(h) || x >= static_cast<std::int64_t>(w))
      return pad;
    return data[((n * h + static_cast<std::size_t>(y)) * w + static_cast<std::size_t>(x)) * c + ch];
  }
};

}  // namespace

NetworkPlan compile_segments(const Network& net, std::uint64_t batch, const ArchConfig& cfg) {
  if (batch == 0) throw CompileError("the batch is empty");
  if (!is_chain(net))
    throw CompileError("a network with branches (layers naming their inputs) runs only on chip");
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    const bool padded_pool = l.kind == LayerKind::MaxPool2d &&
                             (l.pad_top || l.pad_bottom || l.pad_left || l.pad_right);
    if (l.kind == LayerKind::AvgPool2d || l.kind == LayerKind::GlobalAvgPool2d ||
        l.kind == LayerKind::Add || l.kind == LayerKind::Concat || l.kind == LayerKind::Mul ||
        l.kind == LayerKind::Affine || l.kind == LayerKind::Upsample || is_depthwise(l) || padded_pool)
      throw CompileError(fmt::format("{}: runs only on chip (the host-step compiler has no {})",
                                     layer_label(l, i),
                                     padded_pool ? "padded max-pool" : layer_kind_name(l.kind)));
  }
  NetworkPlan plan;
  plan.net = net;
  plan.infos = infer_network(net);
  plan.batch = batch;
  plan.layer_segment.assign(net.layers.size(), std::nullopt);
  SegmentBuilder builder(plan, cfg);

  std::vector<std::size_t> cur;
  std::optional<SegmentPlan> cur_plan;
  const auto close = [&]() {
    if (cur.empty()) return;
    if (!cur_plan) throw CompileError("internal error: a segment without a plan");
    const std::size_t index = plan.segment_plans.size();
    for (std::size_t id : cur_plan->layers) plan.layer_segment[id] = index;
    plan.segment_plans.push_back(std::move(*cur_plan));
    plan.steps.push_back({false, cur.front(), index});
    cur.clear();
    cur_plan.reset();
  };
  const auto host_step = [&](std::size_t i) { plan.steps.push_back({true, i, 0}); };
  const auto start = [&](std::size_t i) {
    cur = {i};
    cur_plan = builder.build(cur);
    if (!cur_plan)
      throw CompileError(fmt::format(
          "{} does not fit: one row of its input and output needs more unified buffer rows or "
          "accumulator rows than there are",
          layer_label(net.layers[i], i)));
  };
  // The kind of the current segment's last GEMM layer.
  const auto last_gemm = [&]() -> const Layer* {
    for (auto it = cur.rbegin(); it != cur.rend(); ++it)
      if (net.layers[*it].kind != LayerKind::Flatten) return &net.layers[*it];
    return nullptr;
  };

  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    switch (l.kind) {
      case LayerKind::Dense: {
        if (!cur.empty() && !last_gemm()->int32_output) {
          std::vector<std::size_t> candidate = cur;
          candidate.push_back(i);
          if (auto p = builder.build(candidate)) {
            cur = std::move(candidate);
            cur_plan = std::move(p);
            break;
          }
          // Does not fit: the previous output goes to the host (and a
          // tentative in-UB flatten becomes a host flatten).
          const bool flatten = net.layers[cur.back()].kind == LayerKind::Flatten;
          if (flatten) {
            const std::size_t f = cur.back();
            cur.pop_back();
            cur_plan = builder.build(cur);
            close();
            host_step(f);
          } else {
            close();
          }
        } else {
          close();
        }
        start(i);
        break;
      }
      case LayerKind::Conv2d: {
        if (!cur.empty() && net.layers[cur.back()].kind == LayerKind::Conv2d && is_pointwise(l) &&
            !net.layers[cur.back()].int32_output) {
          std::vector<std::size_t> candidate = cur;
          candidate.push_back(i);
          if (auto p = builder.build(candidate)) {
            cur = std::move(candidate);
            cur_plan = std::move(p);
            break;
          }
        }
        close();
        start(i);
        break;
      }
      case LayerKind::Flatten: {
        const bool next_dense =
            i + 1 < net.layers.size() && net.layers[i + 1].kind == LayerKind::Dense;
        if (!cur.empty() && next_dense && !last_gemm()->int32_output) {
          // Tentative: the dense layer decides whether it stays in the UB. The
          // plan without it stays valid (cur_plan is not rebuilt here).
          cur.push_back(i);
          cur_plan->layers.push_back(i);
        } else {
          close();
          host_step(i);
        }
        break;
      }
      case LayerKind::MaxPool2d:
        close();
        host_step(i);
        break;
      case LayerKind::AvgPool2d:
      case LayerKind::GlobalAvgPool2d:
      case LayerKind::Add:
      case LayerKind::Concat:
      case LayerKind::Mul:
      case LayerKind::Affine:
      case LayerKind::Upsample: throw CompileError("internal error: an on-chip layer in a host-step plan");
    }
  }
  close();
  return plan;
}

std::vector<std::int8_t> segments_host_image(const NetworkPlan& plan, const SegmentPlan& seg,
                                             const Tensor& input) {
  const std::size_t first = seg.layers.front();
  const Layer& l = plan.net.layers[first];
  const TensorInfo& in = plan.infos[first];
  check_tensor(input, in, fmt::format("the input of {}", layer_label(l, first)));
  if (input.batch() != plan.batch)
    throw CompileError(fmt::format("the batch is {} but the plan is for {}", input.batch(),
                                   plan.batch));
  const std::uint64_t n = seg.array_n;
  std::vector<std::int8_t> host(seg.host_rows_used * n, 0);
  std::vector<std::int8_t> lane_value(seg.in_k_tiles * n, 0);
  for (const auto& [lane, value] : seg.host_lane_values) lane_value[lane] = value;

  const bool conv = l.kind == LayerKind::Conv2d;
  const std::size_t oh = conv ? plan.infos[first + 1].shape[0] : 1;
  const std::size_t ow = conv ? plan.infos[first + 1].shape[1] : 1;
  const std::size_t pixels = oh * ow;
  const HwcView view{input.data.data(), conv ? in.shape[0] : 1, conv ? in.shape[1] : 1,
                     conv ? in.shape[2] : in.shape[0]};
  const std::int32_t pad = in.quant.zero_point;
  std::vector<std::int32_t> row(seg.in_k_tiles * n);
  const std::uint64_t b = seg.chunk_units, units = seg.units;
  for (std::uint64_t c = 0; c * b < units; ++c) {
    const std::uint64_t bc = std::min(b, units - c * b);
    const std::uint64_t rows = bc * seg.rows_per_unit_in;
    for (std::uint64_t i = 0; i < rows; ++i) {
      // Sample and pixel of chunk row i.
      std::uint64_t s, p;
      if (seg.unit_is_sample) {
        p = i / bc;
        s = c * b + i % bc;
      } else {
        const std::uint64_t m = c * b + i;
        s = m / pixels;
        p = m % pixels;
      }
      for (std::uint64_t f = 0; f < row.size(); ++f) {
        if (f >= seg.in_k) {
          row[f] = lane_value[f];
        } else if (!conv) {
          row[f] = input.data[s * seg.in_k + f];
        } else {
          const std::uint64_t ci = f % in.shape[2], tap = f / in.shape[2];
          const std::uint64_t dy = tap / l.kernel_w, dx = tap % l.kernel_w;
          const std::int64_t y = static_cast<std::int64_t>((p / ow) * l.stride_h + dy) - l.pad_top;
          const std::int64_t x = static_cast<std::int64_t>((p % ow) * l.stride_w + dx) - l.pad_left;
          row[f] = view.at(s, y, x, ci, pad);
        }
      }
      for (std::uint64_t t = 0; t < seg.in_k_tiles; ++t) {
        std::int8_t* dst = &host[((c * b * seg.rows_per_unit_in) * seg.in_k_tiles + t * rows + i) * n];
        for (std::uint64_t j = 0; j < n; ++j) dst[j] = static_cast<std::int8_t>(row[t * n + j]);
      }
    }
  }
  for (std::uint64_t r = 0; r < seg.const_rows; ++r)
    std::copy(seg.const_lane_values.begin(), seg.const_lane_values.end(),
              &host[(seg.const_host_row + r) * n]);
  return host;
}

Tensor segments_output(const NetworkPlan& plan, const SegmentPlan& seg, const std::int8_t* host) {
  const std::uint64_t n = seg.array_n;
  Tensor y;
  y.shape = {plan.batch};
  y.shape.insert(y.shape.end(), seg.out_shape.begin(), seg.out_shape.end());
  y.int32 = seg.out_int32;
  y.data.resize(seg.out_rows * seg.out_cols);
  const std::uint64_t per = seg.out_int32 ? isa::kHostRowsPerAccRow : 1;
  for (std::uint64_t m = 0; m < seg.out_rows; ++m)
    for (std::uint64_t o = 0; o < seg.out_cols; ++o) {
      const std::uint64_t v = o / n, j = o % n;
      const std::int8_t* r = host + (seg.out_host_row + (v * seg.out_rows + m) * per) * n;
      y.data[m * seg.out_cols + o] = seg.out_int32 ? read_int32_le(r + 4 * j) : r[j];
    }
  return y;
}

}  // namespace tpu::compiler
