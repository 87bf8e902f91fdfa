// The host-step network compiler (`--host-steps`, and the fallback for
// networks that do not fit on chip): reads a chain network and produces a
// NetworkPlan of a program per chain of layers whose input needs no
// rearrangement, with im2col, max-pool and flatten done by the host between
// programs (docs/quantization.md, "With host steps"). Here: the grouping of
// layers into segments, and build_segment, which runs one segment's passes
// (segment_chain.h) and emits its program; segment_image.cpp has the host
// memory layout of its programs.
#include <fmt/format.h>

#include "compiler/host_layout.h"
#include "compiler/shapes.h"
#include "compiler/segment_chain.h"

namespace tpu::compiler {
namespace {

bool is_pointwise(const Layer& l) {
  return l.kind == LayerKind::Conv2d && l.kernel_h == 1 && l.kernel_w == 1 && l.stride_h == 1 &&
         l.stride_w == 1 && l.pad_top == 0 && l.pad_bottom == 0 && l.pad_left == 0 &&
         l.pad_right == 0;
}

// The program of layers `layer_ids` (a chain of dense and conv2d layers with
// in-UB flattens), or nullopt when not one unit of it fits the unified buffer
// or the accumulators.
std::optional<SegmentPlan> build_segment(const NetworkPlan& plan,
                                         const std::vector<std::size_t>& layer_ids,
                                         const ArchConfig& cfg) {
  const std::uint64_t n = cfg.array_n;
  SegmentPlan seg;
  seg.layers = layer_ids;
  seg.array_n = n;
  segment::Chain chain = segment::build_chain(plan, layer_ids, n, seg);
  const std::optional<segment::Layout> layout = segment::layout_segment(plan, chain, cfg, seg);
  if (!layout) return std::nullopt;
  segment::segment_weights(chain, n, seg);
  Emitter e;
  // A program starts with the requantization register at its reset values:
  // a layer that uses those needs no SETQ.
  emit_in_order(segment::lower_segment(plan, chain, *layout, seg), cfg, model::Requant{}, e);
  seg.program.array_n = static_cast<unsigned>(n);
  seg.program.code = std::move(e.code());
  seg.instruction_layer = std::move(e.layers());
  seg.assembly = fmt::format(".array {}\n", n) + e.text();
  return seg;
}

// Throws CompileError unless every layer of `net` has a host-step mapping.
void check_host_step_layers(const Network& net) {
  if (!is_chain(net))
    throw CompileError("a network with branches (layers naming their inputs) runs only on chip");
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    const bool padded_pool = l.kind == LayerKind::MaxPool2d &&
                             (l.pad_top || l.pad_bottom || l.pad_left || l.pad_right);
    if (l.kind == LayerKind::AvgPool2d || l.kind == LayerKind::GlobalAvgPool2d ||
        l.kind == LayerKind::Add || l.kind == LayerKind::Concat || l.kind == LayerKind::Mul ||
        l.kind == LayerKind::Affine || l.kind == LayerKind::Upsample || l.kind == LayerKind::Softmax ||
        l.kind == LayerKind::MatMul || l.kind == LayerKind::LayerNorm || l.kind == LayerKind::Gelu ||
        l.kind == LayerKind::TokenBias || is_depthwise(l) || padded_pool)
      throw CompileError(fmt::format("{}: runs only on chip (the host-step compiler has no {})",
                                     layer_label(l, i),
                                     padded_pool ? "padded max-pool" : layer_kind_name(l.kind)));
    if (l.pixel >= 0)
      throw CompileError(fmt::format("{}: runs only on chip (the host-step compiler has no dense layer of one pixel)",
                                     layer_label(l, i)));
  }
}

// Walks the layers in order, growing the current segment while the next
// layer can join it (and it still fits) and closing it otherwise; pools and
// flattens the UB cannot do become host steps.
class Grouper {
 public:
  Grouper(NetworkPlan& plan, const ArchConfig& cfg) : plan_(plan), net_(plan.net), cfg_(cfg) {}

  void run() {
    for (std::size_t i = 0; i < net_.layers.size(); ++i) {
      switch (net_.layers[i].kind) {
        case LayerKind::Dense: dense(i); break;
        case LayerKind::Conv2d: conv(i); break;
        case LayerKind::Flatten: flatten(i); break;
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
        case LayerKind::Upsample:
        case LayerKind::Softmax:
        case LayerKind::MatMul:
        case LayerKind::LayerNorm:
        case LayerKind::Gelu:
        case LayerKind::TokenBias: throw CompileError("internal error: an on-chip layer in a host-step plan");
      }
    }
    close();
  }

 private:
  void dense(std::size_t i) {
    if (!cur_.empty() && !last_gemm()->int32_output) {
      if (extend(i)) return;
      // Does not fit: the previous output goes to the host (and a tentative
      // in-UB flatten becomes a host flatten).
      if (net_.layers[cur_.back()].kind == LayerKind::Flatten) {
        const std::size_t f = cur_.back();
        cur_.pop_back();
        cur_plan_ = build_segment(plan_, cur_, cfg_);
        close();
        host_step(f);
      } else {
        close();
      }
    } else {
      close();
    }
    start(i);
  }

  void conv(std::size_t i) {
    const bool joins = !cur_.empty() && net_.layers[cur_.back()].kind == LayerKind::Conv2d &&
                       is_pointwise(net_.layers[i]) && !net_.layers[cur_.back()].int32_output;
    if (joins && extend(i)) return;
    close();
    start(i);
  }

  void flatten(std::size_t i) {
    const bool next_dense = i + 1 < net_.layers.size() && net_.layers[i + 1].kind == LayerKind::Dense;
    if (!cur_.empty() && next_dense && !last_gemm()->int32_output) {
      // Tentative: the dense layer decides whether it stays in the UB. The
      // plan without it stays valid (cur_plan_ is not rebuilt here).
      cur_.push_back(i);
      cur_plan_->layers.push_back(i);
    } else {
      close();
      host_step(i);
    }
  }

  // Layer i joins the current segment if the segment still fits with it.
  bool extend(std::size_t i) {
    std::vector<std::size_t> candidate = cur_;
    candidate.push_back(i);
    std::optional<SegmentPlan> p = build_segment(plan_, candidate, cfg_);
    if (!p) return false;
    cur_ = std::move(candidate);
    cur_plan_ = std::move(p);
    return true;
  }

  void start(std::size_t i) {
    cur_ = {i};
    cur_plan_ = build_segment(plan_, cur_, cfg_);
    if (!cur_plan_)
      throw CompileError(fmt::format(
          "{} does not fit: one row of its input and output needs more unified buffer rows or "
          "accumulator rows than there are",
          layer_label(net_.layers[i], i)));
  }

  void close() {
    if (cur_.empty()) return;
    if (!cur_plan_) throw CompileError("internal error: a segment without a plan");
    const std::size_t index = plan_.segment_plans.size();
    for (std::size_t id : cur_plan_->layers) plan_.layer_segment[id] = index;
    plan_.segment_plans.push_back(std::move(*cur_plan_));
    plan_.steps.push_back({false, cur_.front(), index});
    cur_.clear();
    cur_plan_.reset();
  }

  void host_step(std::size_t i) { plan_.steps.push_back({true, i, 0}); }

  // The current segment's last GEMM layer.
  const Layer* last_gemm() const {
    for (auto it = cur_.rbegin(); it != cur_.rend(); ++it)
      if (net_.layers[*it].kind != LayerKind::Flatten) return &net_.layers[*it];
    return nullptr;
  }

  NetworkPlan& plan_;
  const Network& net_;
  const ArchConfig& cfg_;
  std::vector<std::size_t> cur_;  // the current segment's layers
  std::optional<SegmentPlan> cur_plan_;
};

}  // namespace

NetworkPlan compile_segments(const Network& net, std::uint64_t batch, const ArchConfig& cfg) {
  if (batch == 0) throw CompileError("the batch is empty");
  check_host_step_layers(net);
  NetworkPlan plan;
  plan.net = net;
  plan.infos = infer_network(net);
  plan.batch = batch;
  plan.layer_segment.assign(net.layers.size(), std::nullopt);
  Grouper(plan, cfg).run();
  return plan;
}

}  // namespace tpu::compiler
