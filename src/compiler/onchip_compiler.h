// The on-chip network compiler's state (compile_on_chip.cpp): the passes
// that place, allocate, chunk and lower a whole network into one program
// (docs/quantization.md, "Whole networks on chip") are members of OnChip,
// each pass in the file named beside its members below. The lowering of a
// layer kind is a member too, in lower_<kind>.cpp, found through the table
// in lower_chunk.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include "compiler/network.h"
#include "compiler/onchip_ops.h"
#include "compiler/onchip_tiles.h"
#include "compiler/quant.h"
#include "compiler/shapes.h"

namespace tpu::compiler::onchip {

// Rows an ACT or a host transfer covers at least (whole samples), so that a
// small map does not become thousands of instructions.
constexpr std::uint64_t kPieceRows = 512;

inline std::uint64_t samples_per_piece(std::uint64_t pixels) {
  return std::max<std::uint64_t>(1, kPieceRows / std::max<std::uint64_t>(1, pixels));
}

// A tensor's layout: `groups` planes of N channels, `pixels` rows per sample
// and plane (1 for 1-D tensors); a flatten's output is a view of its input.
struct Place {
  std::uint64_t groups = 1, pixels = 1, channels = 0, h = 1, w = 1;
  std::optional<std::size_t> view_of;
  bool in_ub = true;
  int first = 0, last = 0;  // live from the step that writes it to the last that reads it
  std::uint64_t ub = 0, ub_alt = 0;
  // Spilled: kept in host memory from host row `host_row` (the network
  // input: where the host wrote it), read and written in bands through the
  // staging slots (docs/quantization.md, "Maps spilled to host memory").
  bool host = false;
  std::uint64_t host_row = 0;
  std::uint64_t rows(std::uint64_t samples) const { return groups * pixels * samples; }
};

// Pixels [p0, p0 + pixels) of one sample's output map (pixels == 0: all).
struct Band {
  std::uint64_t p0 = 0, pixels = 0;
  // The pixels it covers: its own, or `whole` when it is no band (pixels 0).
  std::uint64_t pixels_or(std::uint64_t whole) const { return pixels ? pixels : whole; }
};

// What one output group of a conv or add computes at a time in the
// accumulators: every pixel of `samples` samples from n0, or one band of
// output rows of sample n0.
struct Job {
  std::uint64_t n0 = 0, samples = 1;
  Band band;
};

// A band of a layer that reads or writes a spilled map: output rows
// [y0, y0 + rows) and the input rows [r0, r1) it reads (those of the map).
struct SpillBand {
  std::uint64_t y0 = 0, rows = 0, r0 = 0, r1 = 0;
};

// The geometry of a conv pass at kernel offset (dy, dx), or of a pool
// (`pool`: the kernel is the window, dy = dx = 0), of layer `l` reading map
// xp into map yp: the input's in_h rows from map row `row0` (0, or a band's
// first staged row), the output from its row y0 (0, or a band's first),
// padded with `pad` (the input's zero point).
isa::ConvGeometry window_geometry(const Layer& l, const Place& xp, const Place& yp, std::int32_t pad,
                                  std::uint64_t in_h, std::uint64_t row0, std::uint64_t y0, std::uint64_t dy,
                                  std::uint64_t dx, bool pool);

class OnChip {
 public:
  OnChip(const Network& net, std::uint64_t batch, const ArchConfig& cfg)
      : net_(net), cfg_(cfg), n_(cfg.array_n), batch_(batch), tiles_(cfg.array_n) {
    infos_ = infer_network(net);
    layers_ = static_cast<int>(net.layers.size());
  }

  NetworkPlan compile();

 private:
  // --- placement (onchip_place.cpp) ---
  void place();
  std::size_t base_of(std::size_t t) const { return places_[t].view_of ? *places_[t].view_of : t; }
  bool flattened_map(std::size_t t) const {
    return places_[t].view_of && places_[places_[t].view_of.value()].pixels > 1;
  }
  // --- allocation (onchip_allocate.cpp) ---
  std::uint64_t job_rows_per_sample() const;
  std::uint64_t job_acc_rows(std::uint64_t b) const;
  std::vector<Job> jobs(std::uint64_t pixels, std::uint64_t w, std::uint64_t bc) const;
  std::uint64_t const_rows(std::uint64_t b) const { return needs_const_ ? job_acc_rows(b) : 0; }
  std::optional<std::uint64_t> allocate(std::uint64_t b, bool two_inputs, bool commit);
  std::string fits(std::uint64_t b, bool two_inputs);
  void commit_allocation();
  std::uint64_t allocate_host();
  // --- the chunk of samples (onchip_chunks.cpp) ---
  double estimate(std::uint64_t b) const;
  void choose_chunk();
  void size_staging();
  // --- spilling (lower_spill.cpp) ---
  bool spillable(std::size_t t) const;
  bool touches_spill(std::size_t i) const;
  bool plan_spill();
  std::uint64_t slot_rows(std::size_t i, std::uint64_t rows) const;
  std::uint64_t stage_min() const;
  std::uint64_t stage_useful() const;
  std::uint64_t band_rows(std::size_t i) const;
  std::vector<SpillBand> spill_bands(std::size_t i) const;
  void stage_in(std::size_t i, const std::vector<std::uint64_t>& groups, const SpillBand& b, std::uint64_t slot);
  void stage_out(std::size_t i, std::uint64_t g, const SpillBand& b, std::uint64_t slot);
  std::uint64_t stage_at(std::uint64_t slot) const { return stage_ub_ + slot * stage_slot_; }
  std::uint64_t spill_host_rows() const;
  void lower_conv_spill(std::size_t i);
  void lower_pool_spill(std::size_t i);
  // --- lowering: the driver and the layer kinds' table (lower_chunk.cpp) ---
  // A layer kind's lowering of a chunk of bc samples, and (kinds that may
  // touch a spilled map) of one sample in bands.
  struct Lowering {
    LayerKind kind;
    void (OnChip::*whole)(std::size_t i, std::uint64_t bc);
    void (OnChip::*banded)(std::size_t i) = nullptr;
  };
  static const Lowering& lowering(LayerKind kind);
  void lower_chunk(std::uint64_t c, std::uint64_t bc);
  void lower_input(std::uint64_t c, std::uint64_t bc, std::size_t layer);
  // ACTs (and the output's WHMs) of samples [n0, n1] of output group g whose
  // accumulators start at acc (sample n0's first row; sample-major, `pixels`
  // rows each), or of a band of sample n0 == n1.
  void activate(std::size_t i, std::uint64_t g, std::uint64_t n0, std::uint64_t n1,
                std::uint64_t acc, std::uint64_t bc, Band band = {});
  void write_out(std::uint64_t g, std::uint64_t n0, std::uint64_t n1, std::uint64_t bc,
                 std::optional<std::size_t> after, std::optional<std::uint64_t> acc, Band band = {});
  // A pass over consecutive rows: plane `group` of tensor `tensor` through a tile.
  struct RowPass {
    std::size_t tensor;
    std::uint64_t group, tile;
  };
  void row_passes(std::size_t i, std::uint64_t g, const std::vector<std::uint64_t>& btiles,
                  const std::vector<RowPass>& passes, std::uint64_t bc);
  // --- lowering: biases and the constant plane (lower_bias.cpp) ---
  std::uint64_t tile(std::vector<std::int8_t> t);
  std::vector<std::uint64_t> bias_tiles(const std::vector<std::int64_t>& bias, std::uint64_t go);
  // Layer i's folded bias with input zero point zin (folded_bias), computed
  // once: every chunk and band of the layer lowers with it.
  const std::vector<std::int64_t>& layer_bias(std::size_t i, std::int32_t zin);
  void bias_passes(const std::vector<std::uint64_t>& tiles, std::uint64_t acc, std::uint64_t samples,
                   std::uint64_t pixels, std::size_t layer);
  void lower_const();
  // --- lowering: the layer kinds (lower_<kind>.cpp) ---
  struct ConvShape {
    bool depthwise = false, host_im2col = false, pointwise = false;
    std::uint64_t cin = 0, cout = 0, taps = 1, gin = 1, rounds = 1;
  };
  ConvShape conv_shape(std::size_t i) const;
  void conv_tiles(std::size_t i, std::uint64_t go, std::vector<std::uint64_t>& tiles, std::vector<bool>& keep);
  void lower_conv(std::size_t i, std::uint64_t bc);
  void lower_dense(std::size_t i, std::uint64_t bc);
  void lower_add(std::size_t i, std::uint64_t bc);
  void lower_concat(std::size_t i, std::uint64_t bc);
  void lower_pool(std::size_t i, std::uint64_t bc);
  void lower_vec(std::size_t i, std::uint64_t bc);
  void lower_upsample(std::size_t i, std::uint64_t bc);
  void lower_norm(std::size_t i, std::uint64_t bc);  // LayerNorm and GELU (lower_norm.cpp)
  void lower_view(std::size_t, std::uint64_t) {}  // a flatten: its output is a view of its input
  // --- attention (lower_softmax.cpp, lower_matmul.cpp) ---
  void lower_softmax(std::size_t i, std::uint64_t bc);
  void lower_matmul(std::size_t i, std::uint64_t bc);
  // Constant tokens and positions (lower_token_bias.cpp): the bias's digit
  // planes (placed with the program's constants), the RHM that loads them.
  void lower_token_bias(std::size_t i, std::uint64_t bc);
  void place_token_bias(std::size_t i);
  void lower_token_constants();
  // --- emission (onchip_emit.cpp) ---
  NetworkPlan emit(std::uint64_t host_rows);
  std::string summary(std::uint64_t tiles, std::uint64_t host_rows) const;
  // --- what the lowerings share ---
  std::uint64_t plane(std::size_t t, std::uint64_t g, std::uint64_t n, std::uint64_t bc) const {
    const Place& p = places_[base_of(t)];
    const std::uint64_t base = t == 0 || base_of(t) == 0 ? (slot_ ? p.ub_alt : p.ub) : p.ub;
    return base + (g * bc + n) * p.pixels;
  }
  std::uint64_t next_acc(std::uint64_t rows) {
    const std::uint64_t r = acc_two_ && acc_toggle_ ? acc_half_ : 0;
    acc_toggle_ = !acc_toggle_;
    if (r + rows > cfg_.acc_rows) throw CompileError("internal error: accumulator region overflow");
    return r;
  }
  model::Requant gemm_requant(std::size_t i) const {
    const Layer& l = net_.layers[i];
    return layer_requant(infos_[layer_inputs(net_, i)[0]].quant.scale, l.weight_scale, l.output, l.act);
  }
  void push(Op op) { ops_.push_back(std::move(op)); }

  const Network& net_;
  const ArchConfig& cfg_;
  const std::uint64_t n_;
  const std::uint64_t batch_;
  int layers_ = 0;
  std::vector<TensorInfo> infos_;
  std::vector<Place> places_;
  std::vector<std::vector<std::size_t>> readers_;  // per base tensor: the layers that read it
  std::map<std::pair<std::size_t, std::int32_t>, std::vector<std::int64_t>> bias_cache_;  // layer_bias
  std::optional<std::size_t> im2col_;               // the layer whose im2col the host lays out
  bool needs_const_ = false;
  std::uint64_t const_ub_ = 0, const_rows_ = 0;
  std::uint64_t chunk_ = 0, chunks_ = 0, ub_used_ = 0;
  bool two_inputs_ = false, acc_two_ = false, acc_toggle_ = false, slot_ = false;
  std::uint64_t acc_half_ = 0;
  std::uint64_t out_host_ = 0, chunk_c_ = 0;
  std::vector<Op> ops_;
  TileStore tiles_;
  // An estimate's trial lowering (onchip_chunks.cpp) reads only the ops'
  // opcodes, flags, row counts and layers, never a tile's index: it stores
  // no tile (tile() returns 0), and the weight tiles' contents are not
  // built again once their zero flags are known. Before, each of the five
  // trials for ResNet-18 at batch 8 on tpuv1 built and stored all 19 MB of
  // its weight tiles (8% of the whole run's CPU time, perf on a 2-core
  // AMD EPYC; 2% without them).
  bool estimating_ = false;
  // conv_tiles' result per (layer, output group): the zero flags (`keep`),
  // shared by this compiler's copies (the trials), which depend on the
  // weights alone; and the tile indices, which depend on this store, so
  // they are this object's own and kept only outside a trial. Every chunk
  // lowers the same layers with the same tiles, which the store would
  // only find again (each a 64 KiB hash and compare at N = 256).
  using TileKey = std::pair<std::size_t, std::uint64_t>;
  std::shared_ptr<std::map<TileKey, std::vector<bool>>> keep_cache_ =
      std::make_shared<std::map<TileKey, std::vector<bool>>>();
  std::map<TileKey, std::vector<std::uint64_t>> conv_tile_cache_;
  std::size_t output_tensor_ = 0;
  // Spilling: whether any map is in host memory, the two staging slots of
  // stage_slot_ rows from UB row stage_ub_, the band counter that
  // alternates them, the host rows of the spilled maps from spill_host_.
  bool spill_ = false;
  std::uint64_t stage_ub_ = 0, stage_slot_ = 0, band_seq_ = 0, spill_host_ = 0;
  // Run-time weight tiles (lower_matmul.cpp): on the host route, the slots
  // reserved after the network's tiles, used in turn, and the host scratch
  // rows (N per slot from scratch_host_) their rows go through; on the
  // ub_weight_path route (RWU) neither.
  std::uint64_t runtime_slots_ = 0, runtime_seq_ = 0, scratch_host_ = 0;
  // Constant rows in host memory, loaded once into the unified buffer at the
  // program's start (token_bias's digit planes): per layer, its planes per
  // output group (1 + passes of 127) and where they are; the rows' bytes.
  struct TokenConstants {
    std::size_t layer = 0;
    std::uint64_t planes = 1, rows = 0, ub = 0, host = 0;
  };
  std::vector<TokenConstants> token_constants_;
  std::vector<std::int8_t> host_constants_;
  std::uint64_t host_constants_row_ = 0;
  void runtime_tile(std::size_t i, std::uint64_t ub_row, std::uint64_t rows, bool transpose, Op& mmc);
};

}  // namespace tpu::compiler::onchip
