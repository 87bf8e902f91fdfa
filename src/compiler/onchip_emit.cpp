// On-chip pass 5, emission. Reads the lowered ops, the tiles and the
// choices of the earlier passes; produces the network plan: the scheduled
// program (onchip_schedule.cpp) with its assembly and the layer of each
// instruction, the weight image, the host memory layout and the summary the
// plan printout shows.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "common/plural.h"
#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

NetworkPlan OnChip::emit(std::uint64_t host_rows) {
  const std::uint64_t stored = tiles_.count(), tiles = stored + runtime_slots_;
  // The run-time tiles' slots are the tiles after the network's.
  for (Op& op : ops_)
    if (op.runtime_tile) {
      if (op.opcode == isa::Opcode::HWT)
        op.b += static_cast<std::int64_t>(stored);
      else
        op.tile += stored;
    }
  const Place& in = places_[0];
  const Place& outp = places_[output_tensor_];
  NetworkPlan plan;
  plan.net = net_;
  plan.infos = infos_;
  plan.batch = batch_;
  plan.layer_segment.assign(net_.layers.size(), std::size_t{0});
  plan.steps.push_back({false, 0, 0});
  OnChipPlan seg;
  for (std::size_t i = 0; i < net_.layers.size(); ++i) seg.layers.push_back(i);
  Emitter e;
  e.comment(fmt::format("{}: the whole network on chip, {} of {} per chunk", net_.name.empty() ? "network" : net_.name,
                        plural(chunks_, "chunk"), plural(chunk_, "sample")));
  // A program carries code only: the weight image and the host image are the
  // runner's (runtime/host_image.cpp). The host image holds, besides the
  // input, the token_bias constants, which come from the model, not the
  // input: say where they go, for a program saved and run alone.
  if (!host_constants_.empty())
    e.comment(fmt::format("host rows {}-{}: token_bias constants (int8 digit planes of the bias), written by the "
                          "host with the input; not in this file (docs/quantization.md)",
                          host_constants_row_, host_constants_row_ + host_constants_.size() / n_ - 1));
  onchip::schedule(ops_, cfg_, e);
  seg.program.code = std::move(e.code());
  seg.assembly = std::move(e.text());
  seg.instruction_layer = std::move(e.layers());
  seg.weights = tiles_.take();
  seg.weights.resize(tiles * n_ * n_, 0);  // the run-time tiles start as zeros
  conv_tile_cache_.clear();  // its indices were into the store just taken
  seg.weight_tiles_used = tiles;
  seg.host_rows_used = host_rows;
  seg.unit_is_sample = true;
  seg.units = batch_;
  seg.chunk_units = chunk_;
  seg.in_groups = in.groups;
  seg.in_pixels = in.pixels;
  seg.in_im2col = im2col_.has_value();
  seg.in_im2col_layer = im2col_.value_or(0);
  seg.out_host_row = out_host_;
  seg.out_groups = outp.groups;
  seg.out_pixels = outp.pixels;
  seg.out_channels = outp.channels;
  seg.out_int32 = infos_.back().int32;
  seg.out_shape = infos_.back().shape;
  seg.array_n = n_;
  seg.host_constants = std::move(host_constants_);
  seg.host_constants_row = host_constants_row_;
  seg.summary = summary(tiles, host_rows);
  plan.on_chip_plan = std::move(seg);
  return plan;
}

// What the compiler chose, for the plan printout.
std::string OnChip::summary(std::uint64_t tiles, std::uint64_t host_rows) const {
  const Place& in = places_[0];
  std::string s = fmt::format("unified buffer {} of {} rows by liveness, {}, {}", ub_used_, cfg_.ub_rows,
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
    s += fmt::format("; spilled to host memory, read and written in bands: {}{}, 2 staging slots of {}", names,
                     spilled_rows ? fmt::format(" ({} of host memory)", plural(spilled_rows, "row")) : "",
                     plural(stage_slot_, "row"));
  }
  if (im2col_)
    s += fmt::format("; the host lays out the im2col of {} ({} instead of {} on chip)",
                     layer_label(net_.layers[*im2col_], *im2col_), plural(in.groups, "K tile"),
                     plural(std::uint64_t{net_.layers[*im2col_].kernel_h} * net_.layers[*im2col_].kernel_w *
                                ceil_div(infos_[0].shape[2], n_), "pass", "passes"));
  return s;
}

}  // namespace tpu::compiler::onchip
