// Small helpers the network compiler's files share (not part of the API).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/network.h"

namespace tpu::compiler {

inline std::int32_t wrap32(std::int64_t v) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v)));
}

// The int32 that WHM.A wrote as four little-endian bytes (docs/isa.md).
inline std::int32_t read_int32_le(const std::int8_t* bytes) {
  std::uint32_t u = 0;
  for (unsigned byte = 0; byte < 4; ++byte)
    u |= std::uint32_t{static_cast<std::uint8_t>(bytes[byte])} << (8 * byte);
  return static_cast<std::int32_t>(u);
}

inline std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "()" : s;
}

inline std::string layer_label(const Layer& layer, std::size_t index) {
  return layer.name.empty() ? fmt::format("layer {} ({})", index, layer_kind_name(layer.kind))
                            : fmt::format("layer '{}'", layer.name);
}

// Output size along one axis of a window of k with this stride and padding;
// 0 when the window does not fit.
inline std::size_t conv_out(std::size_t in, unsigned k, unsigned stride, unsigned pad_a,
                            unsigned pad_b) {
  const std::size_t padded = in + pad_a + pad_b;
  return padded < k ? 0 : (padded - k) / stride + 1;
}

inline std::size_t element_count(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

// A conv2d with groups = input channels.
inline bool is_depthwise(const Layer& l) { return l.kind == LayerKind::Conv2d && l.groups > 1; }

// The output of an upsample layer reading `cur` (lower_upsample.cpp); throws
// CompileError naming `what`.
TensorInfo infer_upsample(const Layer& l, const TensorInfo& cur, const std::string& what);

// Throws CompileError unless x is a batch of int8 samples of info's shape.
void check_tensor(const Tensor& x, const TensorInfo& info, const std::string& what);

// The host memory layouts of the two compilers' programs (compile_on_chip.cpp,
// segment_compiler.cpp); program_host_image and program_output dispatch.
std::vector<std::int8_t> on_chip_host_image(const NetworkPlan& plan, const OnChipPlan& prog, const Tensor& input);
Tensor on_chip_output(const NetworkPlan& plan, const OnChipPlan& prog, const std::int8_t* host);
std::vector<std::int8_t> segments_host_image(const NetworkPlan& plan, const SegmentPlan& seg,
                                             const Tensor& input);
Tensor segments_output(const NetworkPlan& plan, const SegmentPlan& seg, const std::int8_t* host);

}  // namespace tpu::compiler
