// Maps spilled to host memory (docs/quantization.md, "Maps spilled to host
// memory"): when one sample's live maps do not fit the unified buffer, the
// largest maps that only convolutions and pools touch are kept in host
// memory, and the layers that read or write them run in bands of output
// rows through two staging slots in the unified buffer: each band's input
// rows (with the kernel's halo) come in by RHM, its output rows leave by
// WHM, and the next band's input loads while this band computes.
#include <algorithm>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

namespace {

bool is_map_pool(LayerKind k) { return k == LayerKind::MaxPool2d || k == LayerKind::AvgPool2d; }

// The input rows one output row of layer l needs: the kernel's height, its
// vertical stride and top padding (1, 1, 0 for an input already laid out per
// output pixel: a host im2col or a pointwise convolution).
struct RowWindow {
  std::uint64_t k = 1, stride = 1;
  std::int64_t pad = 0;
};

}  // namespace

bool OnChip::spillable(std::size_t t) const {
  const Place& p = places_[t];
  if (p.view_of || !p.in_ub || infos_[t].int32 || infos_[t].shape.size() != 3 || p.pixels <= 1 ||
      t == output_tensor_ || readers_[t].empty())
    return false;
  if (t > 0) {
    const Layer& l = net_.layers[t - 1];
    if (!(l.kind == LayerKind::Conv2d && !l.int32_output) && !is_map_pool(l.kind)) return false;
  }
  return std::all_of(readers_[t].begin(), readers_[t].end(), [&](std::size_t r) {
    return net_.layers[r].kind == LayerKind::Conv2d || is_map_pool(net_.layers[r].kind);
  });
}

bool OnChip::touches_spill(std::size_t i) const {
  const LayerKind k = net_.layers[i].kind;
  if (k != LayerKind::Conv2d && !is_map_pool(k)) return false;
  return places_[base_of(layer_inputs(net_, i)[0])].host || places_[i + 1].host;
}

namespace {

RowWindow row_window(const Layer& l, bool flat) {
  if (flat) return {};
  return {l.kernel_h, l.stride_h, static_cast<std::int64_t>(l.pad_top)};
}

// The most output rows of a band of layer l (an h x w output) that the
// accumulators allow: a convolution's band is one job of at most `cap` rows.
std::uint64_t acc_band_limit(const Layer& l, std::uint64_t h, std::uint64_t w, std::uint64_t cap) {
  if (l.kind != LayerKind::Conv2d) return h;
  return std::max<std::uint64_t>(1, std::min(h, cap / w));
}

}  // namespace

// UB rows of one staging slot that a band of `rows` output rows of layer i
// takes: the input groups it reads, each with its rows and halo, when the
// input is spilled; one output group's rows when the output is.
std::uint64_t OnChip::slot_rows(std::size_t i, std::uint64_t rows) const {
  const Layer& l = net_.layers[i];
  const Place& xp = places_[base_of(layer_inputs(net_, i)[0])];
  const Place& yp = places_[i + 1];
  std::uint64_t groups = 1;
  RowWindow w = row_window(l, false);
  if (l.kind == LayerKind::Conv2d) {
    const ConvShape s = conv_shape(i);
    groups = s.depthwise ? 1 : xp.groups;
    w = row_window(l, s.host_im2col || s.pointwise);
  }
  const std::uint64_t in =
      xp.host ? groups * std::min<std::uint64_t>(xp.h, (rows - 1) * w.stride + w.k) * xp.w : 0;
  return in + (yp.host ? rows * yp.w : 0);
}

std::uint64_t OnChip::stage_min() const {
  std::uint64_t m = 0;
  for (std::size_t i = 0; i < net_.layers.size(); ++i)
    if (touches_spill(i)) m = std::max(m, slot_rows(i, 1));
  return m;
}

std::uint64_t OnChip::stage_useful() const {
  const std::uint64_t cap = job_acc_rows(1);
  std::uint64_t m = 0;
  for (std::size_t i = 0; i < net_.layers.size(); ++i)
    if (touches_spill(i)) {
      const Place& yp = places_[i + 1];
      m = std::max(m, slot_rows(i, acc_band_limit(net_.layers[i], yp.h, yp.w, cap)));
    }
  return m;
}

// The band height of layer i: the most output rows whose staging fits a
// slot and (a convolution) whose output fits a job's accumulators.
std::uint64_t OnChip::band_rows(std::size_t i) const {
  const Place& yp = places_[i + 1];
  std::uint64_t r = acc_band_limit(net_.layers[i], yp.h, yp.w, job_acc_rows(chunk_));
  while (r > 1 && slot_rows(i, r) > stage_slot_) --r;
  return r;
}

std::vector<SpillBand> OnChip::spill_bands(std::size_t i) const {
  const Layer& l = net_.layers[i];
  const Place& xp = places_[base_of(layer_inputs(net_, i)[0])];
  const Place& yp = places_[i + 1];
  const bool flat = l.kind == LayerKind::Conv2d && (conv_shape(i).host_im2col || conv_shape(i).pointwise);
  const RowWindow w = row_window(l, flat);
  const std::uint64_t rb = band_rows(i);
  const std::int64_t hin = static_cast<std::int64_t>(xp.h);
  std::vector<SpillBand> out;
  for (std::uint64_t y0 = 0; y0 < yp.h; y0 += rb) {
    SpillBand b;
    b.y0 = y0;
    b.rows = std::min(rb, yp.h - y0);
    const std::int64_t need0 = static_cast<std::int64_t>(y0 * w.stride) - w.pad;
    const std::int64_t need1 = static_cast<std::int64_t>((y0 + b.rows - 1) * w.stride + w.k) - w.pad;
    // The map's rows in [need0, need1); at least one, so that the staged
    // map is not empty (rows it holds beyond the need are never read).
    const std::int64_t r0 = std::clamp<std::int64_t>(need0, 0, hin - 1);
    b.r0 = static_cast<std::uint64_t>(r0);
    b.r1 = static_cast<std::uint64_t>(std::clamp<std::int64_t>(need1, r0 + 1, hin));
    out.push_back(b);
  }
  return out;
}

// The RHMs of band b's input rows of the given groups into slot `slot`, one
// after the other (the slot's group k at k * rows of the band).
void OnChip::stage_in(std::size_t i, const std::vector<std::uint64_t>& groups, const SpillBand& b,
                      std::uint64_t slot) {
  const std::size_t x = base_of(layer_inputs(net_, i)[0]);
  const Place& xp = places_[x];
  const std::uint64_t host0 = x == 0 ? chunk_c_ * chunk_ * xp.groups * xp.pixels : xp.host_row;
  const std::uint64_t rows = (b.r1 - b.r0) * xp.w;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    Op op;
    op.opcode = isa::Opcode::RHM;
    op.a = static_cast<std::int64_t>(host0 + groups[k] * xp.pixels + b.r0 * xp.w);
    op.b = static_cast<std::int64_t>(stage_at(slot) + k * rows);
    op.c = static_cast<std::int64_t>(rows);
    op.layer = i;
    op.band_load = true;
    push(op);
  }
}

// The WHM of band b's output rows of group g from the output part of slot
// `slot` (at `at`) to the spilled map, once the op just pushed has written them.
void OnChip::stage_out(std::size_t i, std::uint64_t g, const SpillBand& b, std::uint64_t at) {
  const Place& yp = places_[i + 1];
  Op op;
  op.opcode = isa::Opcode::WHM;
  op.a = static_cast<std::int64_t>(at);
  op.b = static_cast<std::int64_t>(yp.host_row + g * yp.pixels + b.y0 * yp.w);
  op.c = static_cast<std::int64_t>(b.rows * yp.w);
  op.after = ops_.size() - 1;
  op.layer = i;
  push(op);
}

std::uint64_t OnChip::spill_host_rows() const {
  std::uint64_t rows = 0;
  for (std::size_t t = 1; t < places_.size(); ++t)
    if (places_[t].host) rows += places_[t].rows(1);
  return rows;
}

// Spills the largest spillable maps, one by one, until one sample fits
// with the staging slots; false (nothing spilled) when none does.
bool OnChip::plan_spill() {
  std::vector<std::size_t> cand;
  for (std::size_t t = 0; t < places_.size(); ++t)
    if (spillable(t)) cand.push_back(t);
  std::stable_sort(cand.begin(), cand.end(),
                   [&](std::size_t a, std::size_t b) { return places_[a].rows(1) > places_[b].rows(1); });
  spill_ = true;
  for (std::size_t t : cand) {
    places_[t].host = true;
    stage_slot_ = stage_min();
    if (fits(1, false).empty()) return true;
  }
  for (Place& p : places_) p.host = false;
  spill_ = false;
  stage_slot_ = 0;
  return false;
}

void OnChip::lower_conv_spill(std::size_t i) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const ConvShape s = conv_shape(i);
  const bool flat = s.host_im2col || s.pointwise;
  const std::int32_t zin = infos_[x].quant.zero_point;
  const std::vector<std::int64_t>& bias = layer_bias(i, zin);
  const std::vector<SpillBand> bands = spill_bands(i);
  const std::uint64_t out_off = slot_rows(i, bands[0].rows) - (yp.host ? bands[0].rows * yp.w : 0);
  std::vector<std::uint64_t> tiles;
  std::vector<bool> keep;
  for (std::uint64_t go = 0; go < yp.groups; ++go) {
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, go);
    conv_tiles(i, go, tiles, keep);
    std::vector<std::uint64_t> groups;  // the input groups this output group reads
    if (s.depthwise) groups.push_back(go);
    else for (std::uint64_t g = 0; g < xp.groups; ++g) groups.push_back(g);
    const std::uint64_t seq0 = band_seq_;
    band_seq_ += bands.size();
    const auto slot = [&](std::size_t j) { return (seq0 + j) % 2; };
    if (xp.host) stage_in(i, groups, bands[0], slot(0));
    for (std::size_t j = 0; j < bands.size(); ++j) {
      const SpillBand& b = bands[j];
      // The next band's input loads while this one computes.
      if (xp.host && j + 1 < bands.size()) stage_in(i, groups, bands[j + 1], slot(j + 1));
      const std::uint64_t pixels = b.rows * yp.w, p0 = b.y0 * yp.w, in_rows = b.r1 - b.r0;
      const std::uint64_t acc = next_acc(pixels);
      bias_passes(btiles, acc, 1, pixels, i);
      bool first = btiles.empty();
      for (std::uint64_t tap = 0; tap < (flat ? 1 : s.taps); ++tap) {
        const std::uint64_t dy = tap / l.kernel_w, dx = tap % l.kernel_w;
        for (std::uint64_t gj = 0; gj < s.gin; ++gj) {
          if (!keep[tap * s.gin + gj]) continue;
          const std::uint64_t gi = s.depthwise ? go : gj, k = s.depthwise ? 0 : gj;
          Op op;
          op.opcode = isa::Opcode::MMC;
          op.flags = isa::kFlagMmcSwitch | (first ? isa::kFlagMmcOverwrite : 0);
          op.b = static_cast<std::int64_t>(acc);
          op.c = static_cast<std::int64_t>(pixels);
          op.tile = tiles[tap * s.gin + gj];
          op.layer = i;
          if (flat) {
            op.a = static_cast<std::int64_t>(xp.host ? stage_at(slot(j)) + k * pixels : plane(x, gi, 0, 1) + p0);
          } else {
            // The band's map: the staged rows [r0, r1), or the whole map in
            // the unified buffer; the origin moves to output row y0.
            op.flags |= isa::kFlagMmcConvolve;
            op.geometry = window_geometry(l, xp, yp, zin, xp.host ? in_rows : xp.h, xp.host ? b.r0 : 0, b.y0, dy,
                                          dx, false);
            op.a = static_cast<std::int64_t>(xp.host ? stage_at(slot(j)) + k * in_rows * xp.w : plane(x, gi, 0, 1));
          }
          push(op);
          first = false;
        }
      }
      if (!yp.host) {
        activate(i, go, 0, 0, acc, 1, Band{p0, pixels});
        continue;
      }
      Op act;
      act.opcode = isa::Opcode::ACT;
      act.flags = act_flags(l.act);
      act.a = static_cast<std::int64_t>(acc);
      act.b = static_cast<std::int64_t>(stage_at(slot(j)) + out_off);
      act.c = static_cast<std::int64_t>(pixels);
      act.requant = gemm_requant(i);
      act.layer = i;
      push(act);
      stage_out(i, go, b, stage_at(slot(j)) + out_off);
    }
  }
}

void OnChip::lower_pool_spill(std::size_t i) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const TensorInfo& in = infos_[x];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const bool average = l.kind == LayerKind::AvgPool2d;
  const bool out = base_of(net_.layers.size()) == i + 1;
  std::optional<model::Requant> q;
  if (average) q = avgpool_requant(l, in, infos_[i + 1], layer_label(l, i));
  const std::vector<SpillBand> bands = spill_bands(i);
  const std::uint64_t out_off = slot_rows(i, bands[0].rows) - (yp.host ? bands[0].rows * yp.w : 0);
  for (std::uint64_t gr = 0; gr < yp.groups; ++gr) {
    const std::uint64_t seq0 = band_seq_;
    band_seq_ += bands.size();
    const auto slot = [&](std::size_t j) { return (seq0 + j) % 2; };
    if (xp.host) stage_in(i, {gr}, bands[0], slot(0));
    for (std::size_t j = 0; j < bands.size(); ++j) {
      const SpillBand& b = bands[j];
      if (xp.host && j + 1 < bands.size()) stage_in(i, {gr}, bands[j + 1], slot(j + 1));
      const std::uint64_t pixels = b.rows * yp.w, p0 = b.y0 * yp.w;
      const isa::ConvGeometry g = window_geometry(l, xp, yp, in.quant.zero_point, xp.host ? b.r1 - b.r0 : xp.h,
                                                  xp.host ? b.r0 : 0, b.y0, 0, 0, true);
      Op op;
      op.opcode = isa::Opcode::POOL;
      op.flags = average ? isa::kFlagPoolAverage : 0;
      op.a = static_cast<std::int64_t>(xp.host ? stage_at(slot(j)) : plane(x, gr, 0, 1));
      op.b = static_cast<std::int64_t>(yp.host ? stage_at(slot(j)) + out_off : plane(i + 1, gr, 0, 1) + p0);
      op.c = static_cast<std::int64_t>(pixels);
      op.geometry = g;
      op.requant = q;
      op.layer = i;
      push(op);
      if (yp.host) stage_out(i, gr, b, stage_at(slot(j)) + out_off);
      else if (out) write_out(gr, 0, 0, 1, ops_.size() - 1, std::nullopt, Band{p0, pixels});
    }
  }
}

}  // namespace tpu::compiler::onchip
