// The on-chip network compiler: a whole network as one program
// (docs/quantization.md, "Whole networks on chip").
//
// Passes: placement (each tensor's layout in planes, flatten as a view, the
// first layer's im2col when it saves array passes), allocation (unified
// buffer rows by liveness, the chunk of samples that fits), lowering (each
// layer to MMC/MMC.C passes, ACT, POOL and host transfers, onchip_ops.h) and
// scheduling (onchip_schedule.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "common/plural.h"
#include "compiler/network.h"
#include "compiler/network_util.h"
#include "compiler/onchip_compiler.h"
#include "model/timing.h"

namespace tpu::compiler::onchip {

namespace {

using isa::Opcode;

// Conv2d or dense weights as a K x Nout matrix row, for the tiles.
std::int8_t w_at(const Layer& l, std::uint64_t k, std::uint64_t o) {
  return l.weights[k * l.weight_shape.back() + o];
}

}  // namespace

std::vector<std::int64_t> folded_bias(const Layer& l, std::int32_t zin) {
  const std::uint64_t nout = l.weight_shape.back(), k_rows = l.weights.size() / nout;
  std::vector<std::int64_t> bias(nout, 0);
  for (std::uint64_t o = 0; o < nout; ++o) {
    std::int64_t sum = 0;
    for (std::uint64_t k = 0; k < k_rows; ++k) sum += w_at(l, k, o);
    bias[o] = wrap32((l.bias.empty() ? 0 : l.bias[o]) - std::int64_t{zin} * sum);
  }
  return bias;
}

void OnChip::place() {
  const std::size_t tensors = net_.layers.size() + 1;
  places_.assign(tensors, Place{});
  readers_.assign(tensors, {});
  for (std::size_t t = 0; t < tensors; ++t) {
    Place& p = places_[t];
    const TensorInfo& info = infos_[t];
    if (t > 0 && net_.layers[t - 1].kind == LayerKind::Flatten) {
      const std::size_t base = base_of(layer_inputs(net_, t - 1)[0]);
      p = places_[base];
      p.view_of = base;
      continue;
    }
    if (info.shape.size() == 3) {
      p.h = info.shape[0];
      p.w = info.shape[1];
      p.channels = info.shape[2];
    } else {
      p.channels = info.shape[0];
    }
    p.pixels = p.h * p.w;
    p.groups = ceil_div(p.channels, n_);
    p.in_ub = !info.int32;
    p.first = static_cast<int>(t) - 1;
    p.last = p.first;
  }
  output_tensor_ = base_of(tensors - 1);
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    if (net_.layers[i].kind == LayerKind::Flatten) continue;
    for (std::size_t t : layer_inputs(net_, i)) {
      const std::size_t b = base_of(t);
      readers_[b].push_back(i);
      places_[b].last = std::max(places_[b].last, static_cast<int>(i));
    }
  }
  places_[output_tensor_].last = layers_;

  // The host lays out the im2col of a convolution that reads the network
  // input (and is its only reader) when that takes fewer array passes than
  // convolving on chip: a layer with few input channels, where most lanes of
  // an on-chip pass would be empty.
  if (readers_[0].size() == 1) {
    const std::size_t i = readers_[0][0];
    const Layer& l = net_.layers[i];
    if (l.kind == LayerKind::Conv2d && l.groups == 1 && infos_[0].shape.size() == 3) {
      const std::uint64_t taps = std::uint64_t{l.kernel_h} * l.kernel_w;
      const std::uint64_t cin = infos_[0].shape[2];
      if (ceil_div(taps * cin, n_) < taps * ceil_div(cin, n_)) {
        im2col_ = i;
        Place& p = places_[0];
        const TensorInfo& out = infos_[i + 1];
        p.groups = ceil_div(taps * cin, n_);
        p.h = out.shape[0];
        p.w = out.shape[1];
        p.pixels = p.h * p.w;
        p.channels = taps * cin;
      }
    }
  }
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const Layer& l = net_.layers[i];
    const std::string what = layer_label(l, i);
    for (std::size_t t : layer_inputs(net_, i))
      if (flattened_map(t) && l.kind != LayerKind::Dense && l.kind != LayerKind::Flatten)
        throw CompileError(fmt::format("{}: on chip, a flattened map can only feed dense layers", what));
    const bool has_bias = l.kind == LayerKind::Add || l.kind == LayerKind::Concat ||
                          ((l.kind == LayerKind::Conv2d || l.kind == LayerKind::Dense) &&
                           (!l.bias.empty() || infos_[layer_inputs(net_, i)[0]].quant.zero_point != 0));
    needs_const_ = needs_const_ || has_bias;
  }
}

// Accumulator (and constant) rows per sample of the largest job: a conv's or
// an add's output pixels, 1 for a dense layer.
std::uint64_t OnChip::job_rows_per_sample() const {
  std::uint64_t r = 1;
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const LayerKind k = net_.layers[i].kind;
    if (k == LayerKind::Conv2d || k == LayerKind::Add || k == LayerKind::Concat)
      r = std::max<std::uint64_t>(r, places_[i + 1].pixels);
  }
  return r;
}

// Accumulator rows one job may use: every output group of a chunk of b
// samples is one job while the largest fits the accumulators; otherwise
// jobs of at most half of them (samples, or bands of output rows of a
// sample whose map alone exceeds that), so that one job's ACTs run beside
// the next job's passes in the other half.
std::uint64_t OnChip::job_acc_rows(std::uint64_t b) const {
  const std::uint64_t whole = b * job_rows_per_sample();
  return whole <= cfg_.acc_rows ? whole : std::max<std::uint64_t>(1, cfg_.acc_rows / 2);
}

// The jobs of a conv's or add's output group of `pixels` pixels per sample
// in rows of w, over the chunk's bc samples: all at once when they fit
// (job_acc_rows), else as many whole samples as fit per job, else each
// sample in bands of whole output rows.
std::vector<Job> OnChip::jobs(std::uint64_t pixels, std::uint64_t w, std::uint64_t bc) const {
  const std::uint64_t cap = job_acc_rows(chunk_);
  if (bc * pixels <= cap) return {Job{0, bc, {}}};
  std::vector<Job> out;
  if (pixels <= cap) {
    const std::uint64_t per = cap / pixels;
    for (std::uint64_t n0 = 0; n0 < bc; n0 += per) out.push_back({n0, std::min(per, bc - n0), {}});
    return out;
  }
  const std::uint64_t step = cap / w * w;
  if (step == 0) throw CompileError("internal error: an output map that cannot be banded");
  for (std::uint64_t n = 0; n < bc; ++n)
    for (std::uint64_t p0 = 0; p0 < pixels; p0 += step) out.push_back({n, 1, {p0, std::min(step, pixels - p0)}});
  return out;
}

// First-fit allocation of the unified buffer by live ranges; the peak row
// count, or nullopt when it exceeds the unified buffer.
std::optional<std::uint64_t> OnChip::allocate(std::uint64_t b, bool two_inputs, bool commit) {
  struct Item {
    std::uint64_t rows;
    int first, last;
    std::uint64_t* where;
    std::uint64_t at = 0;
  };
  std::vector<Item> items;
  std::uint64_t dummy_alt = 0, dummy_const = 0;
  for (std::size_t t = 0; t < places_.size(); ++t) {
    Place& p = places_[t];
    if (p.view_of || !p.in_ub || p.host) continue;
    int first = p.first, last = p.last;
    if (t == 0 && two_inputs) last = layers_;
    items.push_back({p.rows(b), first, last, &p.ub});
    if (t == 0 && two_inputs) items.push_back({p.rows(b), -1, layers_, commit ? &p.ub_alt : &dummy_alt});
  }
  if (needs_const_) items.push_back({const_rows(b), -1, layers_, commit ? &const_ub_ : &dummy_const});
  std::uint64_t dummy_stage = 0;
  if (spill_ && stage_slot_ > 0) items.push_back({2 * stage_slot_, -1, layers_, commit ? &stage_ub_ : &dummy_stage});
  std::vector<std::size_t> order(items.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    if (items[x].first != items[y].first) return items[x].first < items[y].first;
    return items[x].rows > items[y].rows;
  });
  std::vector<std::size_t> placed;
  std::uint64_t peak = 0;
  for (std::size_t k : order) {
    Item& it = items[k];
    std::uint64_t at = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (std::size_t q : placed) {
        const Item& o = items[q];
        const bool live = !(o.last < it.first || it.last < o.first);
        if (live && at < o.at + o.rows && o.at < at + it.rows) {
          at = o.at + o.rows;
          moved = true;
        }
      }
    }
    it.at = at;
    placed.push_back(k);
    peak = std::max(peak, at + it.rows);
  }
  if (peak > cfg_.ub_rows) return std::nullopt;
  if (commit) {
    for (Item& it : items) *it.where = it.at;
  }
  return peak;
}

// Empty when a chunk of b samples fits, else why not.
std::string OnChip::fits(std::uint64_t b, bool two_inputs) {
  if (b * job_rows_per_sample() > cfg_.acc_rows) {
    // Jobs of half the accumulators: a dense layer's job is the chunk's
    // samples, a map larger than that is computed in bands of whole output
    // rows, so an output row must fit.
    const std::uint64_t job = job_acc_rows(b);
    const bool dense = std::any_of(net_.layers.begin(), net_.layers.end(),
                                   [](const Layer& l) { return l.kind == LayerKind::Dense; });
    if (dense && b > job)
      return fmt::format("a dense layer's {} need more than the {} of a job (half the accumulators)",
                         plural(b, "output row"), plural(job, "accumulator row"));
    for (std::size_t i = 0; i < net_.layers.size(); ++i) {
      const LayerKind k = net_.layers[i].kind;
      const Place& y = places_[i + 1];
      // A map of any size fits in bands as long as one output row does.
      if ((k == LayerKind::Conv2d || k == LayerKind::Add || k == LayerKind::Concat) && y.w > job)
        return fmt::format("{}: one output row of {} needs more than the {} of a band (half the accumulators)",
                           layer_label(net_.layers[i], i), plural(y.w, "pixel"), plural(job, "accumulator row"));
    }
  }
  if (!allocate(b, two_inputs, false))
    return fmt::format("the live feature maps of {} need more than the {} unified buffer rows",
                       plural(b, "sample"), cfg_.ub_rows);
  const std::uint64_t field = (1u << 24) - 1;
  if (const_rows(b) > field || places_[0].rows(b) > field) return "a transfer exceeds the rows field";
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const Layer& l = net_.layers[i];
    const Place& in = places_[base_of(layer_inputs(net_, i)[0])];
    if (l.kind == LayerKind::GlobalAvgPool2d && in.h * b > 65535)
      return fmt::format("{}: a global pool of {} samples of {} rows exceeds in_h", layer_label(l, i),
                         b, in.h);
    if (l.kind == LayerKind::Dense && flattened_map(layer_inputs(net_, i)[0]) && b > 65535)
      return "a flattened map's gather exceeds in_h";
  }
  return "";
}

std::uint64_t OnChip::tile(std::vector<std::int8_t> t) { return tiles_.add(t); }

// The tiles of the passes over the constant plane (lanes 1, 127, ..., 127)
// that put bias[go*N + j] into accumulator column j: each pass carries up to
// 127 + 127*127*(N-1) per column, as one digit on the lane of 1 and the rest
// spread over the lanes of 127.
std::vector<std::uint64_t> OnChip::bias_tiles(const std::vector<std::int64_t>& bias, std::uint64_t go) {
  const std::int64_t n = static_cast<std::int64_t>(n_);
  const std::int64_t cap = 127 + 127 * 127 * (n - 1);
  std::vector<std::int64_t> left(n_, 0);
  for (std::uint64_t j = 0; j < n_ && go * n_ + j < bias.size(); ++j) left[j] = bias[go * n_ + j];
  std::vector<std::uint64_t> out;
  while (std::any_of(left.begin(), left.end(), [](std::int64_t v) { return v != 0; })) {
    std::vector<std::int8_t> t(n_ * n_, 0);
    for (std::uint64_t j = 0; j < n_; ++j) {
      const std::int64_t take = std::clamp(left[j], -cap, cap);
      left[j] -= take;
      // q on the lanes of 127, r (|r| <= 127 since |take| <= cap) on the lane of 1.
      std::int64_t q = std::clamp<std::int64_t>(take / 127, -127 * (n - 1), 127 * (n - 1));
      const std::int64_t r = take - q * 127;
      t[j] = static_cast<std::int8_t>(r);
      for (std::uint64_t k = 1; k < n_ && q != 0; ++k) {
        const std::int64_t d = std::clamp<std::int64_t>(q, -127, 127);
        t[k * n_ + j] = static_cast<std::int8_t>(d);
        q -= d;
      }
    }
    out.push_back(tile(std::move(t)));
  }
  return out;
}

// The bias passes of one output group over `samples` samples of `pixels`
// accumulator rows each from `acc`: sample by sample (in pieces of at least
// kPieceRows rows), so that the first pass of a layer waits only for the
// previous layer's activation of the first samples, not of all of them.
void OnChip::bias_passes(const std::vector<std::uint64_t>& tiles, std::uint64_t acc,
                         std::uint64_t samples, std::uint64_t pixels, std::size_t layer) {
  const std::uint64_t per = samples_per_piece(pixels);
  for (std::size_t k = 0; k < tiles.size(); ++k)
    for (std::uint64_t n0 = 0; n0 < samples; n0 += per) {
      const std::uint64_t rows = (std::min(samples, n0 + per) - n0) * pixels;
      Op op;
      op.opcode = Opcode::MMC;
      op.flags = (n0 == 0 ? isa::kFlagMmcSwitch : 0) | (k == 0 ? isa::kFlagMmcOverwrite : 0);
      op.a = static_cast<std::int64_t>(const_ub_);
      op.b = static_cast<std::int64_t>(acc + n0 * pixels);
      op.c = static_cast<std::int64_t>(rows);
      op.tile = tiles[k];
      op.layer = layer;
      push(op);
    }
}

// The constant plane: an MMC.C whose rows are all padding (pad 1) puts
// (1, 127, ..., 127) into every accumulator row, and an ACT at multiplier 1
// writes it to the unified buffer.
void OnChip::lower_const() {
  std::vector<std::int8_t> t(n_ * n_, 0);
  t[0] = 1;
  for (std::uint64_t j = 1; j < n_; ++j) t[j] = 127;
  Op mmc;
  mmc.opcode = Opcode::MMC;
  mmc.flags = isa::kFlagMmcSwitch | isa::kFlagMmcOverwrite | isa::kFlagMmcConvolve;
  mmc.a = static_cast<std::int64_t>(const_ub_);
  mmc.b = 0;
  mmc.c = static_cast<std::int64_t>(const_rows_);
  isa::ConvGeometry g;
  g.in_h = g.in_w = g.out_w = 1;
  g.pad = 1;
  g.origin_y = 1;  // below the one-pixel map: every row is padding
  mmc.geometry = g;
  mmc.tile = tile(std::move(t));
  std::size_t first_user = 0;
  while (first_user + 1 < net_.layers.size() && net_.layers[first_user].kind != LayerKind::Conv2d &&
         net_.layers[first_user].kind != LayerKind::Dense && net_.layers[first_user].kind != LayerKind::Add &&
         net_.layers[first_user].kind != LayerKind::Concat)
    ++first_user;
  mmc.layer = first_user;
  push(mmc);
  Op act;
  act.opcode = Opcode::ACT;
  act.a = 0;
  act.b = static_cast<std::int64_t>(const_ub_);
  act.c = static_cast<std::int64_t>(const_rows_);
  act.requant = model::Requant{1 << 30, 30, 0};
  act.layer = first_user;
  push(act);
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
      op.opcode = Opcode::RHM;
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
  op.opcode = Opcode::WHM;
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
  op.opcode = Opcode::ACT;
  op.flags = act_flags(l.act);
  op.a = static_cast<std::int64_t>(acc);
  op.b = static_cast<std::int64_t>(plane(i + 1, g, n0, bc) + band.p0);
  op.c = static_cast<std::int64_t>(band.pixels_or((n1 - n0 + 1) * pixels));
  if (l.kind == LayerKind::Concat) {
    std::vector<double> scales;
    for (std::size_t t : layer_inputs(net_, i)) scales.push_back(infos_[t].quant.scale);
    op.requant = concat_requant(scales, l.output);
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

OnChip::ConvShape OnChip::conv_shape(std::size_t i) const {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(x)];
  ConvShape s;
  s.depthwise = is_depthwise(l);
  s.host_im2col = im2col_ && *im2col_ == i;
  s.pointwise = !s.depthwise && l.kernel_h == 1 && l.kernel_w == 1 && l.stride_h == 1 && l.stride_w == 1 &&
                !l.pad_top && !l.pad_bottom && !l.pad_left && !l.pad_right;
  s.cin = infos_[x].shape[2];
  s.cout = l.weight_shape[3];
  s.taps = std::uint64_t{l.kernel_h} * l.kernel_w;
  s.gin = s.host_im2col || s.pointwise ? xp.groups : s.depthwise ? 1 : xp.groups;
  s.rounds = (s.host_im2col || s.pointwise ? 1 : s.taps) * s.gin;
  return s;
}

// The tiles by (kernel offset, input group); one offset on consecutive rows
// when the input is already laid out per output pixel. A tile of zeros adds
// nothing: its passes are left out (a grouped convolution's off-diagonal
// blocks, a channel selection's), unless every tile of the output group is
// zero (one pass then clears the accumulators).
void OnChip::conv_tiles(std::size_t i, std::uint64_t go, std::vector<std::uint64_t>& tiles,
                        std::vector<bool>& keep) {
  const Layer& l = net_.layers[i];
  const Place& xp = places_[base_of(layer_inputs(net_, i)[0])];
  const ConvShape s = conv_shape(i);
  tiles.clear();
  keep.clear();
  for (std::uint64_t tap = 0; tap < (s.host_im2col || s.pointwise ? 1 : s.taps); ++tap)
    for (std::uint64_t gj = 0; gj < s.gin; ++gj) {
      const std::uint64_t gi = s.depthwise ? go : gj;
      std::vector<std::int8_t> t(n_ * n_, 0);
      for (std::uint64_t k = 0; k < n_ && gi * n_ + k < (s.host_im2col ? xp.channels : s.cin); ++k) {
        if (s.depthwise) {
          t[k * n_ + k] = l.weights[tap * s.cout + gi * n_ + k];
        } else {
          for (std::uint64_t j = 0; j < n_ && go * n_ + j < s.cout; ++j)
            t[k * n_ + j] = w_at(l, tap * s.cin + gi * n_ + k, go * n_ + j);
        }
      }
      const bool zero = std::all_of(t.begin(), t.end(), [](std::int8_t v) { return v == 0; });
      keep.push_back(!zero || (tiles.size() + 1 == s.rounds && std::none_of(keep.begin(), keep.end(), [](bool b) { return b; })));
      tiles.push_back(keep.back() ? tile(std::move(t)) : 0);
    }
}

void OnChip::lower_conv(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const TensorInfo& in = infos_[x];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const ConvShape s = conv_shape(i);
  const bool depthwise = s.depthwise, host_im2col = s.host_im2col, pointwise = s.pointwise;
  const std::uint64_t taps = s.taps, gin = s.gin, rounds = s.rounds;
  const std::int32_t zin = in.quant.zero_point;
  const std::vector<std::int64_t> bias = folded_bias(l, zin);
  const std::uint64_t op_pixels = yp.pixels;
  const std::uint64_t per = samples_per_piece(op_pixels);
  std::vector<std::uint64_t> tiles;
  std::vector<bool> keep;
  for (std::uint64_t go = 0; go < yp.groups; ++go) {
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, go);
    conv_tiles(i, go, tiles, keep);
    std::uint64_t last_kept = 0;
    for (std::uint64_t r = 0; r < rounds; ++r)
      if (keep[r]) last_kept = r;
    for (const Job& job : jobs(op_pixels, yp.w, bc)) {
      const Band band = job.band;
      const std::uint64_t n_end = job.n0 + job.samples, p0 = band.p0;
      const std::uint64_t pixels = band.pixels_or(op_pixels);  // per sample of the job
      const std::uint64_t acc = next_acc(job.samples * pixels);
      bias_passes(btiles, acc, job.samples, pixels, i);
      // The ACTs of samples [a, n] of the job once their last pass is in.
      const auto act = [&](std::uint64_t a, std::uint64_t n) {
        activate(i, go, a, n, acc + (a - job.n0) * pixels, bc, band);
      };
      bool first = btiles.empty();
      const auto mmc = [&](std::uint64_t t, bool sw, std::uint64_t ub, std::uint64_t acc_row,
                           std::uint64_t rows, std::optional<isa::ConvGeometry> geo) {
        Op op;
        op.opcode = Opcode::MMC;
        op.flags = (sw ? isa::kFlagMmcSwitch : 0) | (first ? isa::kFlagMmcOverwrite : 0) |
                   (geo ? isa::kFlagMmcConvolve : 0);
        op.a = static_cast<std::int64_t>(ub);
        op.b = static_cast<std::int64_t>(acc_row);
        op.c = static_cast<std::int64_t>(rows);
        op.geometry = geo;
        op.tile = t;
        op.layer = i;
        push(op);
      };
      if (host_im2col || pointwise) {
        // K tiles of consecutive rows: the job's samples (or band) at once.
        for (std::uint64_t gi = 0; gi < gin; ++gi) {
          if (!keep[gi]) continue;
          mmc(tiles[gi], true, plane(x, gi, job.n0, bc) + p0, acc, job.samples * pixels, std::nullopt);
          first = false;
        }
        for (std::uint64_t a = job.n0; a < n_end; a += per) act(a, std::min(n_end, a + per) - 1);
        continue;
      }
      // One pass per kernel offset and input group, sample by sample; a
      // band starts its map p0 / out_w output rows down.
      const std::int64_t y0 = static_cast<std::int64_t>(p0 / yp.w);
      for (std::uint64_t tap = 0; tap < taps; ++tap) {
        const std::uint64_t dy = tap / l.kernel_w, dx = tap % l.kernel_w;
        for (std::uint64_t gj = 0; gj < gin; ++gj) {
          if (!keep[tap * gin + gj]) continue;
          const std::uint64_t gi = depthwise ? go : gj;
          const isa::ConvGeometry g = window_geometry(l, xp, yp, zin, xp.h, 0, y0, dy, dx, false);
          const bool last_round = tap * gin + gj == last_kept;
          std::uint64_t a = job.n0;
          for (std::uint64_t n = job.n0; n < n_end; ++n) {
            mmc(tiles[tap * gin + gj], n == job.n0, plane(x, gi, n, bc), acc + (n - job.n0) * pixels, pixels, g);
            if (last_round && (n + 1 - a == per || n + 1 == n_end)) {
              act(a, n);
              a = n + 1;
            }
          }
          first = false;
        }
      }
    }
  }
}

void OnChip::lower_dense(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const std::uint64_t nout = l.weight_shape[1];
  const std::vector<std::int64_t> bias = folded_bias(l, infos_[x].quant.zero_point);
  const bool gather = flattened_map(x);
  const std::uint64_t per = samples_per_piece(1);
  for (std::uint64_t go = 0; go < yp.groups; ++go) {
    const std::uint64_t acc = next_acc(bc);
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, go);
    bias_passes(btiles, acc, bc, 1, i);
    bool first = btiles.empty();
    // K tiles: (pixel, input group) of a flattened map, or input groups.
    for (std::uint64_t p = 0; p < xp.pixels; ++p)
      for (std::uint64_t gi = 0; gi < xp.groups; ++gi) {
        std::vector<std::int8_t> t(n_ * n_, 0);
        for (std::uint64_t k = 0; k < n_ && gi * n_ + k < xp.channels; ++k)
          for (std::uint64_t j = 0; j < n_ && go * n_ + j < nout; ++j)
            t[k * n_ + j] = w_at(l, p * xp.channels + gi * n_ + k, go * n_ + j);
        Op op;
        op.opcode = Opcode::MMC;
        op.flags = isa::kFlagMmcSwitch | (first ? isa::kFlagMmcOverwrite : 0);
        op.b = static_cast<std::int64_t>(acc);
        op.c = static_cast<std::int64_t>(bc);
        op.tile = tile(std::move(t));
        op.layer = i;
        if (gather) {
          // Pixel p of every sample: the samples' planes as the rows of a map.
          isa::ConvGeometry g;
          g.in_h = static_cast<std::uint32_t>(bc);
          g.in_w = static_cast<std::uint32_t>(xp.pixels);
          g.out_w = 1;
          g.origin_x = static_cast<std::int32_t>(p);
          op.flags |= isa::kFlagMmcConvolve;
          op.geometry = g;
        }
        op.a = static_cast<std::int64_t>(plane(x, gi, 0, bc));
        push(op);
        first = false;
      }
    for (std::uint64_t n0 = 0; n0 < bc; n0 += per) activate(i, go, n0, std::min(bc, n0 + per) - 1, acc + n0, bc);
  }
}

void OnChip::lower_add(std::size_t i, std::uint64_t bc) {
  const auto ids = layer_inputs(net_, i);
  const QuantParams qa = infos_[ids[0]].quant, qb = infos_[ids[1]].quant;
  const AddFactors f = add_factors(qa.scale, qb.scale);
  const Place& yp = places_[i + 1];
  const std::int64_t folded = wrap32(-(std::int64_t{f.a} * qa.zero_point + std::int64_t{f.b} * qb.zero_point));
  std::vector<std::int64_t> bias(yp.channels, folded);
  const std::uint64_t per = samples_per_piece(yp.pixels);
  for (std::uint64_t g = 0; g < yp.groups; ++g) {
    const std::vector<std::uint64_t> btiles = bias_tiles(bias, g);
    std::vector<std::uint64_t> tiles;
    for (int side = 0; side < 2; ++side) {
      std::vector<std::int8_t> t(n_ * n_, 0);
      for (std::uint64_t k = 0; k < n_ && g * n_ + k < yp.channels; ++k)
        t[k * n_ + k] = static_cast<std::int8_t>(side == 0 ? f.a : f.b);
      tiles.push_back(tile(std::move(t)));
    }
    for (const Job& job : jobs(yp.pixels, yp.w, bc)) {
      const std::uint64_t n_end = job.n0 + job.samples;
      const std::uint64_t pixels = job.band.pixels_or(yp.pixels);  // per sample of the job
      const std::uint64_t acc = next_acc(job.samples * pixels);
      bias_passes(btiles, acc, job.samples, pixels, i);
      bool first = btiles.empty();
      for (int side = 0; side < 2; ++side) {
        Op op;
        op.opcode = Opcode::MMC;
        op.flags = isa::kFlagMmcSwitch | (first ? isa::kFlagMmcOverwrite : 0);
        op.a = static_cast<std::int64_t>(plane(ids[side], g, job.n0, bc) + job.band.p0);
        op.b = static_cast<std::int64_t>(acc);
        op.c = static_cast<std::int64_t>(job.samples * pixels);
        op.tile = tiles[side];
        op.layer = i;
        push(op);
        first = false;
      }
      for (std::uint64_t a = job.n0; a < n_end; a += per)
        activate(i, g, a, std::min(n_end, a + per) - 1, acc + (a - job.n0) * pixels, bc, job.band);
    }
  }
}

isa::ConvGeometry window_geometry(const Layer& l, const Place& xp, const Place& yp, std::int32_t pad,
                                  std::uint64_t in_h, std::uint64_t row0, std::uint64_t y0, std::uint64_t dy,
                                  std::uint64_t dx, bool pool) {
  isa::ConvGeometry g;
  g.in_h = static_cast<std::uint32_t>(in_h);
  g.in_w = static_cast<std::uint32_t>(xp.w);
  g.out_w = static_cast<std::uint32_t>(yp.w);
  g.stride_y = l.stride_h;
  g.stride_x = l.stride_w;
  g.pad = static_cast<std::int8_t>(pad);
  g.origin_y = static_cast<std::int32_t>(static_cast<std::int64_t>(dy) - std::int64_t{l.pad_top} +
                                         static_cast<std::int64_t>(y0 * l.stride_h) - static_cast<std::int64_t>(row0));
  g.origin_x = static_cast<std::int32_t>(dx) - static_cast<std::int32_t>(l.pad_left);
  if (pool) {
    g.win_h = l.kernel_h;
    g.win_w = l.kernel_w;
  }
  return g;
}

void OnChip::lower_pool(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t x = layer_inputs(net_, i)[0];
  const TensorInfo& in = infos_[x];
  const Place& xp = places_[base_of(x)];
  const Place& yp = places_[i + 1];
  const bool global = l.kind == LayerKind::GlobalAvgPool2d;
  const bool average = l.kind != LayerKind::MaxPool2d;
  const bool out = base_of(net_.layers.size()) == i + 1;
  isa::ConvGeometry g;
  g.pad = static_cast<std::int8_t>(in.quant.zero_point);
  if (global) {
    // Every sample's map is one window of a map of bc*H rows.
    g.in_h = static_cast<std::uint32_t>(bc * xp.h);
    g.in_w = static_cast<std::uint32_t>(xp.w);
    g.out_w = 1;
    g.stride_y = static_cast<std::uint32_t>(xp.h);
    g.win_h = static_cast<std::uint32_t>(xp.h);
    g.win_w = static_cast<std::uint32_t>(xp.w);
  } else {
    g = window_geometry(l, xp, yp, in.quant.zero_point, xp.h, 0, 0, 0, 0, true);
  }
  std::optional<model::Requant> q;
  if (average) q = avgpool_requant(l, in, infos_[i + 1], layer_label(l, i));
  const std::uint64_t per = samples_per_piece(yp.pixels);
  for (std::uint64_t gr = 0; gr < yp.groups; ++gr) {
    const std::uint64_t samples = global ? bc : 1;
    for (std::uint64_t n = 0; n < bc; n += samples) {
      Op op;
      op.opcode = Opcode::POOL;
      op.flags = average ? isa::kFlagPoolAverage : 0;
      op.a = static_cast<std::int64_t>(plane(x, gr, n, bc));
      op.b = static_cast<std::int64_t>(plane(i + 1, gr, n, bc));
      op.c = static_cast<std::int64_t>(samples * yp.pixels);
      op.geometry = g;
      op.requant = q;
      op.layer = i;
      push(op);
      if (out && (global || (n + 1) % per == 0 || n + 1 == bc)) {
        const std::uint64_t n0 = global ? 0 : n + 1 - ((n % per) + 1);
        write_out(gr, n0, global ? bc - 1 : n, bc, ops_.size() - 1, std::nullopt);
      }
    }
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
    switch (net_.layers[i].kind) {
      case LayerKind::Conv2d:
        if (touches_spill(i)) lower_conv_spill(i); else lower_conv(i, bc);
        break;
      case LayerKind::Dense: lower_dense(i, bc); break;
      case LayerKind::Add: lower_add(i, bc); break;
      case LayerKind::Concat: lower_concat(i, bc); break;
      case LayerKind::Mul:
      case LayerKind::Affine: lower_vec(i, bc); break;
      case LayerKind::Upsample: lower_upsample(i, bc); break;
      case LayerKind::MaxPool2d:
      case LayerKind::AvgPool2d:
        if (touches_spill(i)) lower_pool_spill(i); else lower_pool(i, bc);
        break;
      case LayerKind::GlobalAvgPool2d: lower_pool(i, bc); break;
      case LayerKind::Flatten: break;
    }
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

// Estimated cycles of the batch in chunks of b samples, to choose b: a chunk's
// array time is, per weight tile, the longer of its rows and the tile's
// stream from weight memory (T cycles; every chunk reloads every tile); the
// first chunk's input and the last chunk's output cross the host link while
// the array waits, the other chunks' transfers overlap the array's work.
// Fewer, larger chunks load fewer weights; more, smaller ones hide more host
// traffic (a batch of 8 CNN0 samples: 2 chunks of 4).
double OnChip::estimate(std::uint64_t b) const {
  OnChip trial = *this;
  trial.ops_.clear();
  trial.two_inputs_ = false;
  trial.chunk_ = b;
  trial.chunks_ = 1;
  trial.lower_chunk(0, b);
  // Per tile: its rows, its stream from memory, and the back-to-back MMC.S
  // chain's bound max(N + 1, (B + 2N + 1) / 2) (docs/microarchitecture.md);
  // per layer: the 2N cycles its first pass waits for the previous layer's
  // last results to leave the array.
  const double t = static_cast<double>(model::weight_tile_cycles(cfg_));
  const double nn = static_cast<double>(n_);
  const auto tile_time = [&](double rows) {
    return std::max({rows, t, nn + 1, (rows + 2 * nn + 1) / 2});
  };
  double array = 0, group = 0;
  bool in_group = false;
  std::size_t layer = ~std::size_t{0};
  for (const Op& op : trial.ops_) {
    if (op.opcode != Opcode::MMC) continue;
    if (op.layer != layer) {
      array += 2 * nn;
      layer = op.layer;
    }
    if (op.flags & isa::kFlagMmcSwitch) {
      if (in_group) array += tile_time(group);
      group = 0;
      in_group = true;
    }
    group += static_cast<double>(op.c);
  }
  if (in_group) array += tile_time(group);
  const double bh = static_cast<double>(cfg_.host_bytes_per_cycle), nb = static_cast<double>(n_);
  const double in = static_cast<double>(places_[0].rows(b)) * nb / bh;
  const double out = static_cast<double>(places_[output_tensor_].rows(b)) * nb *
                     (infos_.back().int32 ? isa::kHostRowsPerAccRow : 1) / bh;
  const double chunks = static_cast<double>(ceil_div(batch_, b));
  return in + out + chunks * array + (chunks - 1) * std::max(0.0, in + out - array);
}

NetworkPlan OnChip::compile() {
  if (batch_ == 0) throw CompileError("the batch is empty");
  place();
  // The largest chunk that fits, two input slots when there is more than one chunk.
  std::uint64_t best = 0;
  bool two = false;
  std::string why = fits(batch_, false);
  if (why.empty()) {
    best = batch_;
  } else {
    for (bool dbl : {true, false}) {
      std::uint64_t lo = 1, hi = batch_ - 1;
      if (!fits(1, dbl).empty()) continue;
      while (lo < hi) {
        const std::uint64_t mid = lo + (hi - lo + 1) / 2;
        if (fits(mid, dbl).empty()) lo = mid; else hi = mid - 1;
      }
      best = lo;
      two = dbl;
      break;
    }
    if (best == 0) {
      // Not even one sample's maps fit: spill the largest to host memory,
      // a sample per chunk.
      const std::string whole = fits(1, false);
      if (!plan_spill()) throw CompileError(fmt::format("the network does not fit on chip: {}", whole));
      best = 1;
      two = false;
    }
  }
  // Among up to 8 times as many chunks as the largest fitting chunk needs,
  // the count with the smallest estimate (ties: fewer chunks).
  const std::uint64_t fewest = ceil_div(batch_, best);
  chunks_ = fewest;
  double best_estimate = spill_ ? 0.0 : estimate(ceil_div(batch_, fewest));
  for (std::uint64_t k = fewest + 1; !spill_ && k <= std::min(batch_, 8 * fewest); ++k) {
    const std::uint64_t b = ceil_div(batch_, k);
    if (ceil_div(batch_, b) != k || !fits(b, true).empty()) continue;  // a count no chunk size gives
    const double e = estimate(b);
    if (e < best_estimate) {
      best_estimate = e;
      chunks_ = k;
      two = true;
    }
  }
  chunk_ = ceil_div(batch_, chunks_);
  two_inputs_ = two && chunks_ > 1;
  if (spill_) {
    // The staging slots take what the unified buffer has left, up to what
    // the largest band of any layer that touches a spilled map can use.
    // The slots at their minimum fit (plan_spill); first-fit placement
    // need not grow by exactly the slots' rows, so the largest size that
    // still fits is searched from that guess down.
    std::uint64_t lo = stage_min();
    stage_slot_ = 0;
    const std::uint64_t rest = cfg_.ub_rows - *allocate(chunk_, false, false);
    std::uint64_t hi = std::max(lo, std::min(stage_useful(), rest / 2));
    while (lo < hi) {
      stage_slot_ = lo + (hi - lo + 1) / 2;
      if (allocate(chunk_, two_inputs_, false)) lo = stage_slot_; else hi = stage_slot_ - 1;
    }
    stage_slot_ = lo;
  }
  ub_used_ = *allocate(chunk_, two_inputs_, true);
  const_rows_ = const_rows(chunk_);
  const std::uint64_t acc_max = job_acc_rows(chunk_);
  acc_two_ = 2 * acc_max <= cfg_.acc_rows;
  acc_half_ = acc_max;

  const Place& in = places_[0];
  const Place& outp = places_[output_tensor_];
  const bool out32 = infos_.back().int32;
  out_host_ = chunks_ * chunk_ * in.groups * in.pixels;
  std::uint64_t host_rows =
      out_host_ + chunks_ * chunk_ * outp.groups * outp.pixels * (out32 ? isa::kHostRowsPerAccRow : 1);
  spill_host_ = host_rows;
  for (std::size_t t = 1; t < places_.size(); ++t)
    if (places_[t].host) {
      places_[t].host_row = host_rows;
      host_rows += places_[t].rows(1);
    }
  if (spill_ && host_rows > cfg_.host_rows)
    throw CompileError(fmt::format(
        "the input, output and spilled maps of {} need {} of host memory, there are {}: --config FILE with "
        "{{\"host_rows\": {}}}",
        plural(batch_, "sample"), plural(host_rows, "row"), cfg_.host_rows, host_rows));
  if (host_rows > cfg_.host_rows)
    throw CompileError(fmt::format("the input and output of {} need {} of host memory, there are {}",
                                   plural(batch_, "sample"), plural(host_rows, "row"), cfg_.host_rows));

  if (needs_const_) lower_const();
  for (std::uint64_t c = 0; c < chunks_; ++c) lower_chunk(c, std::min(chunk_, batch_ - c * chunk_));
  const std::uint64_t tiles = tiles_.count();
  if (tiles > cfg_.weight_tiles)
    throw CompileError(fmt::format("the network's weights need {}, weight memory has {}",
                                   plural(tiles, "tile"), cfg_.weight_tiles));

  NetworkPlan plan;
  plan.net = net_;
  plan.infos = infos_;
  plan.batch = batch_;
  plan.layer_segment.assign(net_.layers.size(), std::size_t{0});
  plan.steps.push_back({false, 0, 0});
  SegmentPlan seg;
  for (std::size_t i = 0; i < net_.layers.size(); ++i) seg.layers.push_back(i);
  Emitter e;
  e.comment(fmt::format("{}: the whole network on chip, {} of {} per chunk", net_.name.empty() ? "network" : net_.name,
                        plural(chunks_, "chunk"), plural(chunk_, "sample")));
  onchip::schedule(ops_, cfg_, e);
  seg.program.code = std::move(e.code());
  seg.assembly = std::move(e.text());
  seg.instruction_layer = std::move(e.layers());
  seg.weights = tiles_.take();
  seg.weight_tiles_used = tiles;
  seg.host_rows_used = host_rows;
  seg.unit_is_sample = true;
  seg.units = batch_;
  seg.chunk_units = chunk_;
  seg.on_chip = true;
  seg.in_groups = in.groups;
  seg.in_pixels = in.pixels;
  seg.in_im2col = im2col_.has_value();
  seg.in_im2col_layer = im2col_.value_or(0);
  seg.out_host_row = out_host_;
  seg.out_groups = outp.groups;
  seg.out_pixels = outp.pixels;
  seg.out_channels = outp.channels;
  seg.out_int32 = out32;
  seg.out_shape = infos_.back().shape;
  seg.array_n = n_;
  seg.summary = fmt::format("unified buffer {} of {} rows by liveness, {}, {}", ub_used_, cfg_.ub_rows,
                            plural(tiles, "weight tile"),
                            needs_const_ ? fmt::format("a constant plane of {}", plural(const_rows_, "row"))
                                         : std::string("no constant plane"));
  if (spill_) {
    std::vector<std::string> maps;
    for (std::size_t t = 0; t < places_.size(); ++t)
      if (places_[t].host) maps.push_back(t == 0 ? std::string("the input") : fmt::format("the output of {}", layer_label(net_.layers[t - 1], t - 1)));
    std::string names;
    for (std::size_t k = 0; k < maps.size(); ++k) names += (k ? ", " : "") + maps[k];
    const std::uint64_t spilled_rows = host_rows - spill_host_;
    seg.summary += fmt::format("; spilled to host memory, read and written in bands: {}{}, 2 staging slots of {}",
                               names, spilled_rows ? fmt::format(" ({} of host memory)", plural(spilled_rows, "row")) : "",
                               plural(stage_slot_, "row"));
  }
  if (im2col_)
    seg.summary += fmt::format("; the host lays out the im2col of {} ({} instead of {} on chip)",
                               layer_label(net_.layers[*im2col_], *im2col_), plural(in.groups, "K tile"),
                               plural(std::uint64_t{net_.layers[*im2col_].kernel_h} * net_.layers[*im2col_].kernel_w *
                                          ceil_div(infos_[0].shape[2], n_), "pass", "passes"));
  plan.segments.push_back(std::move(seg));
  return plan;
}

}  // namespace tpu::compiler::onchip

namespace tpu::compiler {

NetworkPlan compile_on_chip(const Network& net, std::uint64_t batch, const ArchConfig& cfg) {
  return onchip::OnChip(net, batch, cfg).compile();
}

NetworkPlan compile_network(const Network& net, std::uint64_t batch, const ArchConfig& cfg,
                            CompileMode mode) {
  if (mode == CompileMode::OnChip) return compile_on_chip(net, batch, cfg);
  if (mode == CompileMode::Segments) return compile_segments(net, batch, cfg);
  try {
    return compile_on_chip(net, batch, cfg);
  } catch (const CompileError& on_chip) {
    infer_network(net);  // a malformed network is reported as such
    try {
      return compile_segments(net, batch, cfg);
    } catch (const CompileError& segments) {
      throw CompileError(fmt::format("{} (and with host steps: {})", on_chip.what(), segments.what()));
    }
  }
}

// The host image of an on-chip program: its input planes chunk by chunk.
std::vector<std::int8_t> on_chip_host_image(const NetworkPlan& plan, const SegmentPlan& seg,
                                            const Tensor& input) {
  const std::uint64_t n = seg.array_n;
  std::vector<std::int8_t> host(seg.host_rows_used * n, 0);
  const TensorInfo& info = plan.infos[0];
  const bool map = info.shape.size() == 3;
  const std::uint64_t h = map ? info.shape[0] : 1, w = map ? info.shape[1] : 1;
  const std::uint64_t c = map ? info.shape[2] : info.shape[0];
  const std::int32_t zin = info.quant.zero_point;
  const Layer* conv = seg.in_im2col ? &plan.net.layers[seg.in_im2col_layer] : nullptr;
  const std::uint64_t ow = conv ? plan.infos[seg.in_im2col_layer + 1].shape[1] : w;
  const auto value = [&](std::uint64_t s, std::uint64_t p, std::uint64_t f) -> std::int8_t {
    if (!conv) return static_cast<std::int8_t>(input.data[(s * h * w + p) * c + f]);
    const std::uint64_t ci = f % c, tap = f / c;
    const std::int64_t y = static_cast<std::int64_t>((p / ow) * conv->stride_h + tap / conv->kernel_w) - conv->pad_top;
    const std::int64_t x = static_cast<std::int64_t>((p % ow) * conv->stride_w + tap % conv->kernel_w) - conv->pad_left;
    if (y < 0 || x < 0 || y >= static_cast<std::int64_t>(h) || x >= static_cast<std::int64_t>(w))
      return static_cast<std::int8_t>(zin);
    return static_cast<std::int8_t>(input.data[((s * h + static_cast<std::uint64_t>(y)) * w + static_cast<std::uint64_t>(x)) * c + ci]);
  };
  const std::uint64_t lanes = conv ? std::uint64_t{conv->kernel_h} * conv->kernel_w * c : c;
  const std::uint64_t b = seg.chunk_units;
  for (std::uint64_t ch = 0; ch * b < seg.units; ++ch) {
    const std::uint64_t bc = std::min(b, seg.units - ch * b);
    const std::uint64_t base = ch * b * seg.in_groups * seg.in_pixels;
    for (std::uint64_t g = 0; g < seg.in_groups; ++g)
      for (std::uint64_t s = 0; s < bc; ++s)
        for (std::uint64_t p = 0; p < seg.in_pixels; ++p) {
          std::int8_t* row = &host[(base + (g * bc + s) * seg.in_pixels + p) * n];
          for (std::uint64_t j = 0; j < n && g * n + j < lanes; ++j) row[j] = value(ch * b + s, p, g * n + j);
        }
  }
  return host;
}

Tensor on_chip_output(const NetworkPlan& plan, const SegmentPlan& seg, const std::int8_t* host) {
  const std::uint64_t n = seg.array_n;
  Tensor y;
  y.shape = {plan.batch};
  y.shape.insert(y.shape.end(), seg.out_shape.begin(), seg.out_shape.end());
  y.int32 = seg.out_int32;
  const std::uint64_t P = seg.out_pixels, C = seg.out_channels;
  y.data.resize(plan.batch * P * C);
  const std::uint64_t per = seg.out_int32 ? isa::kHostRowsPerAccRow : 1;
  const std::uint64_t b = seg.chunk_units;
  for (std::uint64_t ch = 0; ch * b < seg.units; ++ch) {
    const std::uint64_t bc = std::min(b, seg.units - ch * b);
    const std::uint64_t base = seg.out_host_row + ch * b * seg.out_groups * P * per;
    for (std::uint64_t s = 0; s < bc; ++s)
      for (std::uint64_t p = 0; p < P; ++p)
        for (std::uint64_t o = 0; o < C; ++o) {
          const std::uint64_t g = o / n, j = o % n;
          const std::int8_t* r = host + (base + ((g * bc + s) * P + p) * per) * n;
          y.data[((ch * b + s) * P + p) * C + o] = seg.out_int32 ? read_int32_le(r + 4 * j) : r[j];
        }
  }
  return y;
}

}  // namespace tpu::compiler
