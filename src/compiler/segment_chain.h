// The host-step compiler's intermediate form of one program (a segment):
// the chain of its GEMM layers with their K tiles, bias lanes and memory
// places, and the passes that make and consume it, in order:
//   build_chain (segment_chain.cpp)    layer indices -> the chain: each
//                                      layer's K tiles and bias lanes
//   layout_segment (segment_layout.cpp) chain -> chunk size, UB regions,
//                                      host rows and weight tiles
//   segment_weights (segment_layout.cpp) -> the weight memory image
//   lower_segment (lower_segment.cpp)  -> the program's ops (op_list.h),
//                                      emitted by emit_in_order.
// segment_compiler.cpp runs them (build_segment) and groups a network's
// layers into segments.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/network.h"
#include "compiler/op_list.h"

namespace tpu::compiler::segment {

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

struct Chain {
  std::vector<ChainLayer> layers;
  // A unit (what a chunk counts) is a sample when a flatten of pixel rows
  // happens in the UB, else a row of the first layer.
  bool unit_is_sample = false;
  const ChainLayer& first() const { return layers.front(); }
  const ChainLayer& last() const { return layers.back(); }
};

// Where a segment's chunks live in the unified buffer and accumulators (the
// host rows and the chunk size are in the SegmentPlan).
struct Layout {
  std::uint64_t chunks = 0;
  std::uint64_t in_ub[2] = {0, 0};   // the two input regions
  std::uint64_t out_ub[2] = {0, 0};  // the two int8 output slots
  std::uint64_t const_ub = 0;        // the constant block
  std::uint64_t acc_slot_rows = 0;   // each of the two accumulator slots
  bool uses_const = false, int8_out = false;
};

// Weight matrix (K x Nout) element of layer `l`.
inline std::int8_t weight_at(const Layer& l, std::uint64_t f, std::uint64_t o, std::uint64_t n_out) {
  return l.weights[f * n_out + o];
}

// The chain of `layer_ids` (dense and conv2d layers and the flattens
// between them); records the host's constant input lanes in
// seg.host_lane_values. Throws CompileError when a bias cannot be
// represented.
Chain build_chain(const NetworkPlan& plan, const std::vector<std::size_t>& layer_ids,
                  std::uint64_t n, SegmentPlan& seg);

// Sizes the chunks and places everything: fills the chain's out_ub and
// weight_base and seg's chunk, host-row and output fields. Nullopt when not
// one unit fits the unified buffer or accumulators; throws CompileError when
// host or weight memory is too small.
std::optional<Layout> layout_segment(const NetworkPlan& plan, Chain& chain, const ArchConfig& cfg,
                                     SegmentPlan& seg);

// seg.weights: per layer, column tile v and K tile t at weight_base + v * Kt + t.
void segment_weights(const Chain& chain, std::uint64_t n, SegmentPlan& seg);

// The program's ops, in program order.
OpList lower_segment(const NetworkPlan& plan, const Chain& chain, const Layout& layout,
                     const SegmentPlan& seg);

}  // namespace tpu::compiler::segment
