// On-chip pass 2, allocation. Reads the placement (onchip_place.cpp) and a
// chunk size; produces the accumulator jobs of a layer (whole chunks, groups
// of samples or bands of output rows), the unified buffer rows of each
// placed tensor by first-fit over live ranges (allocate), why a chunk does
// not fit (fits), and the host memory rows of the input, output and spilled
// maps (allocate_host).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "common/plural.h"
#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

// Accumulator (and constant) rows per sample of the largest job: a conv's or
// an add's output pixels, 1 for a dense layer.
std::uint64_t OnChip::job_rows_per_sample() const {
  std::uint64_t r = 1;
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const LayerKind k = net_.layers[i].kind;
    if (k == LayerKind::Conv2d || k == LayerKind::Add || k == LayerKind::Concat || k == LayerKind::MatMul ||
        k == LayerKind::TokenBias)
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
  // The token_bias constants, loaded once at the start, live to their layer,
  // or to the end when the batch runs in several chunks: every chunk's
  // token_bias reads them, so the maps of the layers after it (which live
  // past it in one chunk's ranges) must not take their rows.
  std::vector<std::uint64_t> dummy_tokens(token_constants_.size());
  for (std::size_t k = 0; k < token_constants_.size(); ++k)
    items.push_back({token_constants_[k].rows, -1,
                     b < batch_ ? layers_ : static_cast<int>(token_constants_[k].layer),
                     commit ? &token_constants_[k].ub : &dummy_tokens[k]});
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
    if (l.kind == LayerKind::Dense && (l.pixel >= 0 || flattened_map(layer_inputs(net_, i)[0])) && b > 65535)
      return "a flattened map's gather exceeds in_h";
    if (l.kind == LayerKind::Softmax && (in.pixels * b > field || in.groups > 65535))
      return fmt::format("{}: the SMAX of {} exceeds the rows or stride field", layer_label(l, i), plural(b, "sample"));
  }
  return "";
}

// Commits the unified buffer's allocation for the chosen chunk, and splits
// the accumulators in two halves when two of the largest jobs fit.
void OnChip::commit_allocation() {
  ub_used_ = *allocate(chunk_, two_inputs_, true);
  const_rows_ = const_rows(chunk_);
  const std::uint64_t acc_max = job_acc_rows(chunk_);
  acc_two_ = 2 * acc_max <= cfg_.acc_rows;
  acc_half_ = acc_max;
}

// The host memory rows: the input's planes chunk by chunk from row 0, the
// output's after them, then each spilled map's (one sample's rows). Returns
// the rows used; throws when they exceed host memory.
std::uint64_t OnChip::allocate_host() {
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
  // The host scratch of the run-time tiles: N rows per reserved slot.
  scratch_host_ = host_rows;
  host_rows += runtime_slots_ * n_;
  // The constant rows (token_bias's planes), written by the host with the input.
  host_constants_row_ = host_rows;
  for (TokenConstants& tc : token_constants_) tc.host += host_constants_row_;
  host_rows += host_constants_.size() / n_;
  if (spill_ && host_rows > cfg_.host_rows)
    throw CompileError(fmt::format(
        "the input, output and spilled maps of {} need {} of host memory, there are {}: --config FILE with "
        "{{\"host_rows\": {}}}",
        plural(batch_, "sample"), plural(host_rows, "row"), cfg_.host_rows, host_rows));
  if (host_rows > cfg_.host_rows)
    throw CompileError(fmt::format("the input and output of {} need {} of host memory, there are {}",
                                   plural(batch_, "sample"), plural(host_rows, "row"), cfg_.host_rows));
  return host_rows;
}

}  // namespace tpu::compiler::onchip
