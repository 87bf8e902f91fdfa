// The host memory layout of a host-step program (segment_chain.h): reads a
// SegmentPlan and produces the host memory image for its input tensor (the
// first layer's GEMM rows: a conv2d's im2col, chunk by chunk and K tile by K
// tile, with the constant lanes and block), and reads its output tensor back
// from the final host memory.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/host_layout.h"
#include "compiler/shapes.h"

namespace tpu::compiler {
namespace {

// Sample n's value at (y, x, c) of an HWC tensor, or the zero point outside.
struct HwcView {
  const std::int32_t* data;
  std::size_t h, w, c;
  std::int32_t at(std::size_t n, std::int64_t y, std::int64_t x, std::size_t ch,
                  std::int32_t pad) const {
    if (y < 0 || x < 0 || y >= static_cast<std::int64_t>(h) || x >= static_cast<std::int64_t>(w))
      return pad;
    return data[((n * h + static_cast<std::size_t>(y)) * w + static_cast<std::size_t>(x)) * c + ch];
  }
};

}  // namespace

std::vector<std::int8_t> segments_host_image(const NetworkPlan& plan, const SegmentPlan& seg,
                                             const Tensor& input) {
  const std::size_t first = seg.layers.front();
  const Layer& l = plan.net.layers[first];
  const TensorInfo& in = plan.infos[first];
  check_tensor(input, in, fmt::format("the input of {}", layer_label(l, first)));
  if (input.batch() != plan.batch)
    throw CompileError(fmt::format("the batch is {} but the plan is for {}", input.batch(),
                                   plan.batch));
  const std::uint64_t n = seg.array_n;
  std::vector<std::int8_t> host(seg.host_rows_used * n, 0);
  std::vector<std::int8_t> lane_value(seg.in_k_tiles * n, 0);
  for (const auto& [lane, value] : seg.host_lane_values) lane_value[lane] = value;

  const bool conv = l.kind == LayerKind::Conv2d;
  const std::size_t oh = conv ? plan.infos[first + 1].shape[0] : 1;
  const std::size_t ow = conv ? plan.infos[first + 1].shape[1] : 1;
  const std::size_t pixels = oh * ow;
  const HwcView view{input.data.data(), conv ? in.shape[0] : 1, conv ? in.shape[1] : 1,
                     conv ? in.shape[2] : in.shape[0]};
  const std::int32_t pad = in.quant.zero_point;
  std::vector<std::int32_t> row(seg.in_k_tiles * n);
  const std::uint64_t b = seg.chunk_units, units = seg.units;
  for (std::uint64_t c = 0; c * b < units; ++c) {
    const std::uint64_t bc = std::min(b, units - c * b);
    const std::uint64_t rows = bc * seg.rows_per_unit_in;
    for (std::uint64_t i = 0; i < rows; ++i) {
      // Sample and pixel of chunk row i.
      std::uint64_t s, p;
      if (seg.unit_is_sample) {
        p = i / bc;
        s = c * b + i % bc;
      } else {
        const std::uint64_t m = c * b + i;
        s = m / pixels;
        p = m % pixels;
      }
      for (std::uint64_t f = 0; f < row.size(); ++f) {
        if (f >= seg.in_k) {
          row[f] = lane_value[f];
        } else if (!conv) {
          row[f] = input.data[s * seg.in_k + f];
        } else {
          const std::uint64_t ci = f % in.shape[2], tap = f / in.shape[2];
          const std::uint64_t dy = tap / l.kernel_w, dx = tap % l.kernel_w;
          const std::int64_t y = static_cast<std::int64_t>((p / ow) * l.stride_h + dy) - l.pad_top;
          const std::int64_t x = static_cast<std::int64_t>((p % ow) * l.stride_w + dx) - l.pad_left;
          row[f] = view.at(s, y, x, ci, pad);
        }
      }
      for (std::uint64_t t = 0; t < seg.in_k_tiles; ++t) {
        std::int8_t* dst = &host[((c * b * seg.rows_per_unit_in) * seg.in_k_tiles + t * rows + i) * n];
        for (std::uint64_t j = 0; j < n; ++j) dst[j] = static_cast<std::int8_t>(row[t * n + j]);
      }
    }
  }
  for (std::uint64_t r = 0; r < seg.const_rows; ++r)
    std::copy(seg.const_lane_values.begin(), seg.const_lane_values.end(),
              &host[(seg.const_host_row + r) * n]);
  return host;
}

Tensor segments_output(const NetworkPlan& plan, const SegmentPlan& seg, const std::int8_t* host) {
  const std::uint64_t n = seg.array_n;
  Tensor y = output_tensor(plan, seg, plan.batch * element_count(seg.out_shape));  // out_rows x out_cols values
  const std::uint64_t per = seg.out_int32 ? isa::kHostRowsPerAccRow : 1;
  for (std::uint64_t m = 0; m < seg.out_rows; ++m)
    for (std::uint64_t o = 0; o < seg.out_cols; ++o) {
      const std::uint64_t v = o / n, j = o % n;
      const std::int8_t* r = host + (seg.out_host_row + (v * seg.out_rows + m) * per) * n;
      y.data[m * seg.out_cols + o] = seg.out_int32 ? read_int32_le(r + 4 * j) : r[j];
    }
  return y;
}

}  // namespace tpu::compiler
