// The host memory of a plan's programs (host_image.h): the on-chip
// program's planes here, the host-step programs' GEMM rows from the
// host-step compiler (compiler/host_layout.h).
#include "runtime/host_image.h"

#include <fmt/format.h>

#include <algorithm>

#include "compiler/host_layout.h"
#include "compiler/shapes.h"

namespace tpu::compiler {
namespace {

// The host image of an on-chip program: its input planes chunk by chunk,
// written into `host` (seg.host_rows_used rows of N, zero before).
void on_chip_host_image(const NetworkPlan& plan, const OnChipPlan& seg, const Tensor& input, std::int8_t* host) {
  const std::uint64_t n = seg.array_n;
  const TensorInfo& info = plan.infos[0];
  const bool map = info.shape.size() == 3;
  const std::uint64_t h = map ? info.shape[0] : 1, w = map ? info.shape[1] : 1;
  const std::uint64_t c = map ? info.shape[2] : info.shape[0];
  const std::int32_t zin = info.quant.zero_point;
  const Layer* conv = seg.in_im2col ? &plan.net.layers[seg.in_im2col_layer] : nullptr;
  const std::uint64_t ow = conv ? plan.infos[seg.in_im2col_layer + 1].shape[1] : w;
  const std::uint64_t lanes = conv ? std::uint64_t{conv->kernel_h} * conv->kernel_w * c : c;
  // Lanes [g * n, g * n + n) of pixel p of sample s: the input's channels,
  // or the im2col of the first convolution (lane f: tap f / c, channel f % c;
  // the input's zero point outside the map).
  const auto fill_row = [&](std::int8_t* row, std::uint64_t s, std::uint64_t p, std::uint64_t g) {
    const std::uint64_t f0 = g * n, count = std::min(n, lanes - f0);
    if (!conv) {
      const std::int32_t* x = &input.data[(s * h * w + p) * c + f0];
      for (std::uint64_t j = 0; j < count; ++j) row[j] = static_cast<std::int8_t>(x[j]);
      return;
    }
    const std::int64_t y0 = static_cast<std::int64_t>((p / ow) * conv->stride_h) - conv->pad_top;
    const std::int64_t x0 = static_cast<std::int64_t>((p % ow) * conv->stride_w) - conv->pad_left;
    // Tap by tap: the tap's pixel is tested once and its channels copied
    // (the lanes of one tap are consecutive channels).
    std::uint64_t tap = f0 / c, ci = f0 % c;
    for (std::uint64_t j = 0; j < count; ci = 0, ++tap) {
      const std::uint64_t take = std::min(c - ci, count - j);
      const std::int64_t y = y0 + static_cast<std::int64_t>(tap / conv->kernel_w);
      const std::int64_t x = x0 + static_cast<std::int64_t>(tap % conv->kernel_w);
      if (y < 0 || x < 0 || y >= static_cast<std::int64_t>(h) || x >= static_cast<std::int64_t>(w)) {
        std::fill_n(row + j, take, static_cast<std::int8_t>(zin));
      } else {
        const std::int32_t* src =
            &input.data[((s * h + static_cast<std::uint64_t>(y)) * w + static_cast<std::uint64_t>(x)) * c + ci];
        for (std::uint64_t t = 0; t < take; ++t) row[j + t] = static_cast<std::int8_t>(src[t]);
      }
      j += take;
    }
  };
  const std::uint64_t b = seg.chunk_units;
  for (std::uint64_t ch = 0; ch * b < seg.units; ++ch) {
    const std::uint64_t bc = std::min(b, seg.units - ch * b);
    const std::uint64_t base = ch * b * seg.in_groups * seg.in_pixels;
    for (std::uint64_t g = 0; g < seg.in_groups && g * n < lanes; ++g)
      for (std::uint64_t s = 0; s < bc; ++s)
        for (std::uint64_t p = 0; p < seg.in_pixels; ++p)
          fill_row(&host[(base + (g * bc + s) * seg.in_pixels + p) * n], ch * b + s, p, g);
  }
  std::copy(seg.host_constants.begin(), seg.host_constants.end(), host + seg.host_constants_row * n);
}

Tensor on_chip_output(const NetworkPlan& plan, const OnChipPlan& seg, const std::int8_t* host) {
  const std::uint64_t n = seg.array_n;
  const std::uint64_t P = seg.out_pixels, C = seg.out_channels;
  Tensor y = output_tensor(plan, seg, plan.batch * P * C);
  const std::uint64_t per = host_rows_per_output_row(seg);
  const std::uint64_t b = seg.chunk_units;
  for (std::uint64_t ch = 0; ch * b < seg.units; ++ch) {
    const std::uint64_t bc = std::min(b, seg.units - ch * b);
    const std::uint64_t base = seg.out_host_row + ch * b * seg.out_groups * P * per;
    for (std::uint64_t s = 0; s < bc; ++s)
      for (std::uint64_t p = 0; p < P; ++p)
        for (std::uint64_t o = 0; o < C; ++o) {
          const std::uint64_t g = o / n, j = o % n;
          const std::int8_t* r = host + (base + ((g * bc + s) * P + p) * per) * n;
          y.data[((ch * b + s) * P + p) * C + o] = output_lane(seg, r, j);
        }
  }
  return y;
}

}  // namespace

std::vector<std::int8_t> program_host_image(const NetworkPlan& plan, std::size_t k, const Tensor& input) {
  if (!plan.on_chip_plan) return segments_host_image(plan, plan.segment_plans.at(k), input);
  std::vector<std::int8_t> host(plan.on_chip_plan->host_rows_used * plan.on_chip_plan->array_n, 0);
  write_program_host_image(plan, k, input, host.data(), host.size());
  return host;
}

void write_program_host_image(const NetworkPlan& plan, std::size_t k, const Tensor& input, std::int8_t* host,
                              std::size_t size) {
  if (!plan.on_chip_plan) {
    const std::vector<std::int8_t> image = segments_host_image(plan, plan.segment_plans.at(k), input);
    if (image.size() > size)
      throw CompileError(fmt::format("the host image of program {} needs {} bytes, host memory has {}", k,
                                     image.size(), size));
    std::copy(image.begin(), image.end(), host);
    return;
  }
  const OnChipPlan& seg = *plan.on_chip_plan;
  check_tensor(input, plan.infos[0], "the network input");
  if (input.batch() != plan.batch)
    throw CompileError(fmt::format("the batch is {} but the plan is for {}", input.batch(), plan.batch));
  if (seg.host_rows_used * seg.array_n > size)
    throw CompileError(fmt::format("the host image needs {} bytes, host memory has {}",
                                   seg.host_rows_used * seg.array_n, size));
  on_chip_host_image(plan, seg, input, host);
}

Tensor program_output(const NetworkPlan& plan, std::size_t k, const std::int8_t* host) {
  return plan.on_chip_plan ? on_chip_output(plan, *plan.on_chip_plan, host) : segments_output(plan, plan.segment_plans.at(k), host);
}

}  // namespace tpu::compiler
