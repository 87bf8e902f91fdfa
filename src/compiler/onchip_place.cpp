// On-chip pass 1, placement (docs/quantization.md, "Whole networks on
// chip"). Reads the network and its tensors' shapes (infer_network);
// produces each tensor's Place (planes of N channels, pixels per sample, a
// flatten's output as a view of its input, the live range from the step
// that writes it to the last that reads it), the readers of each tensor,
// whether the host lays out the first convolution's im2col, and whether the
// program needs a constant plane (biases and input zero points).
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

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
    const auto ids = layer_inputs(net_, i);
    const bool zero_point = std::any_of(ids.begin(), l.kind == LayerKind::Dense ? ids.end() : ids.begin() + 1,
                                        [&](std::size_t t) { return infos_[t].quant.zero_point != 0; });
    const bool has_bias = l.kind == LayerKind::Add || l.kind == LayerKind::Concat ||
                          ((l.kind == LayerKind::Conv2d || l.kind == LayerKind::Dense) &&
                           (!l.bias.empty() || zero_point));
    needs_const_ = needs_const_ || has_bias;
  }
  // A matmul's second operand becomes weight tiles at run time: on the host
  // route through tiles reserved for it, as many as keep the weight FIFO and
  // the shadow registers full while the next one is written (lower_matmul.cpp).
  const bool matmul = std::any_of(net_.layers.begin(), net_.layers.end(),
                                  [](const Layer& l) { return l.kind == LayerKind::MatMul; });
  if (matmul && cfg_.ub_weight_path == 0) runtime_slots_ = cfg_.fifo_depth + 2;
  for (std::size_t i = 0; i < net_.layers.size(); ++i)
    if (net_.layers[i].kind == LayerKind::TokenBias) place_token_bias(i);
}

}  // namespace tpu::compiler::onchip
