// The host memory of an on-chip program: the image the host writes (the
// input's planes chunk by chunk, or the first convolution's im2col) and the
// output tensor read back from the planes the program wrote.
#include <algorithm>

#include "compiler/network_util.h"

namespace tpu::compiler {

// The host image of an on-chip program: its input planes chunk by chunk.
std::vector<std::int8_t> on_chip_host_image(const NetworkPlan& plan, const OnChipPlan& seg, const Tensor& input) {
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

Tensor on_chip_output(const NetworkPlan& plan, const OnChipPlan& seg, const std::int8_t* host) {
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
