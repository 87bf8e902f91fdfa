// The on-chip network compiler's state (compile_on_chip.cpp): placement,
// allocation and lowering of a whole network into one program
// (docs/quantization.md, "Whole networks on chip"). The lowering of each layer
// kind is a member; concat's lives in lower_concat.cpp, the banded lowering
// of the layers that touch maps spilled to host memory in lower_spill.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "compiler/network.h"
#include "compiler/network_util.h"
#include "compiler/onchip_ops.h"

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

// A conv2d's or dense layer's folded bias per output: b - z_in * (the sum of
// the weights feeding it), wrapped to int32 (docs/quantization.md).
std::vector<std::int64_t> folded_bias(const Layer& l, std::int32_t zin);

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

// The weight memory's image: N x N tiles, each distinct tile once. The set
// holds tile indices, hashed and compared by their bytes in the image (no
// second copy of the weights as keys). An ordered map keyed by the tiles'
// bytes took 60% of the compile of ResNet-18 on small4 (733 k tiles), most
// of it comparing keys.
class TileStore {
 public:
  explicit TileStore(std::uint64_t n) : bytes_(n * n) {}
  TileStore(const TileStore& o) : bytes_(o.bytes_), weights_(o.weights_) { index_all(); }
  TileStore& operator=(const TileStore& o) {
    if (this != &o) {
      bytes_ = o.bytes_;
      weights_ = o.weights_;
      index_all();
    }
    return *this;
  }
  // The index of tile `t` (N x N int8, row-major), added when new.
  std::uint64_t add(const std::vector<std::int8_t>& t) {
    const std::uint64_t index = count();
    weights_.insert(weights_.end(), t.begin(), t.end());
    const auto [it, inserted] = set_.insert(index);
    if (!inserted) weights_.resize(index * bytes_);  // an equal tile exists: taken back
    return *it;
  }
  std::uint64_t count() const { return bytes_ ? weights_.size() / bytes_ : 0; }
  std::vector<std::int8_t> take() {
    set_.clear();
    return std::move(weights_);
  }

 private:
  std::string_view tile_bytes(std::uint64_t tile) const {
    return {reinterpret_cast<const char*>(weights_.data()) + tile * bytes_, bytes_};
  }
  struct Hash {
    const TileStore* store;
    std::size_t operator()(std::uint64_t t) const { return std::hash<std::string_view>()(store->tile_bytes(t)); }
  };
  struct Equal {
    const TileStore* store;
    bool operator()(std::uint64_t a, std::uint64_t b) const { return store->tile_bytes(a) == store->tile_bytes(b); }
  };
  void index_all() {
    set_.clear();
    set_.reserve(count());
    for (std::uint64_t t = 0; t < count(); ++t) set_.insert(t);
  }
  std::size_t bytes_;
  std::vector<std::int8_t> weights_;
  // Points at this store: copies re-index (above), and there are no moves.
  std::unordered_set<std::uint64_t, Hash, Equal> set_{0, Hash{this}, Equal{this}};
};

class OnChip {
 public:
  OnChip(const Network& net, std::uint64_t batch, const ArchConfig& cfg)
      : net_(net), cfg_(cfg), n_(cfg.array_n), batch_(batch), tiles_(cfg.array_n) {
    infos_ = infer_network(net);
    layers_ = static_cast<int>(net.layers.size());
  }

  NetworkPlan compile();

 private:
  // --- placement ---
  void place();
  std::size_t base_of(std::size_t t) const { return places_[t].view_of ? *places_[t].view_of : t; }
  bool flattened_map(std::size_t t) const {
    return places_[t].view_of && places_[places_[t].view_of.value()].pixels > 1;
  }
  // --- allocation ---
  std::uint64_t job_rows_per_sample() const;
  std::uint64_t job_acc_rows(std::uint64_t b) const;
  std::vector<Job> jobs(std::uint64_t pixels, std::uint64_t w, std::uint64_t bc) const;
  std::uint64_t const_rows(std::uint64_t b) const { return needs_const_ ? job_acc_rows(b) : 0; }
  std::optional<std::uint64_t> allocate(std::uint64_t b, bool two_inputs, bool commit);
  std::string fits(std::uint64_t b, bool two_inputs);
  double estimate(std::uint64_t b) const;
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
  // --- lowering ---
  struct ConvShape {
    bool depthwise = false, host_im2col = false, pointwise = false;
    std::uint64_t cin = 0, cout = 0, taps = 1, gin = 1, rounds = 1;
  };
  ConvShape conv_shape(std::size_t i) const;
  void conv_tiles(std::size_t i, std::uint64_t go, std::vector<std::uint64_t>& tiles, std::vector<bool>& keep);
  void lower_chunk(std::uint64_t c, std::uint64_t bc);
  void lower_input(std::uint64_t c, std::uint64_t bc, std::size_t layer);
  void lower_conv(std::size_t i, std::uint64_t bc);
  void lower_dense(std::size_t i, std::uint64_t bc);
  void lower_add(std::size_t i, std::uint64_t bc);
  void lower_concat(std::size_t i, std::uint64_t bc);
  void lower_pool(std::size_t i, std::uint64_t bc);
  void lower_vec(std::size_t i, std::uint64_t bc);  // lower_vec.cpp
  void lower_upsample(std::size_t i, std::uint64_t bc);  // lower_upsample.cpp
  void lower_const();
  std::uint64_t tile(std::vector<std::int8_t> t);
  std::vector<std::uint64_t> bias_tiles(const std::vector<std::int64_t>& bias, std::uint64_t go);
  void bias_passes(const std::vector<std::uint64_t>& tiles, std::uint64_t acc, std::uint64_t samples,
                   std::uint64_t pixels, std::size_t layer);
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
  // ACTs (and the output's WHMs) of samples [n0, n1] of output group g whose
  // accumulators start at acc (sample n0's first row; sample-major, `pixels`
  // rows each), or of a band of sample n0 == n1.
  void activate(std::size_t i, std::uint64_t g, std::uint64_t n0, std::uint64_t n1,
                std::uint64_t acc, std::uint64_t bc, Band band = {});
  void write_out(std::uint64_t g, std::uint64_t n0, std::uint64_t n1, std::uint64_t bc,
                 std::optional<std::size_t> after, std::optional<std::uint64_t> acc, Band band = {});
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
  std::optional<std::size_t> im2col_;               // the layer whose im2col the host lays out
  bool needs_const_ = false;
  std::uint64_t const_ub_ = 0, const_rows_ = 0;
  std::uint64_t chunk_ = 0, chunks_ = 0, ub_used_ = 0;
  bool two_inputs_ = false, acc_two_ = false, acc_toggle_ = false, slot_ = false;
  std::uint64_t acc_half_ = 0;
  std::uint64_t out_host_ = 0, chunk_c_ = 0;
  std::vector<Op> ops_;
  TileStore tiles_;
  std::size_t output_tensor_ = 0;
  // Spilling: whether any map is in host memory, the two staging slots of
  // stage_slot_ rows from UB row stage_ub_, the band counter that
  // alternates them, the host rows of the spilled maps from spill_host_.
  bool spill_ = false;
  std::uint64_t stage_ub_ = 0, stage_slot_ = 0, band_seq_ = 0, spill_host_ = 0;
};

}  // namespace tpu::compiler::onchip
