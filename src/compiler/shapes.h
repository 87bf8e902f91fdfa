// Shapes and names of the network IR's tensors and layers (network.h): the
// text of a shape and of a layer for messages, element counts, a window's
// output size, and the check that a tensor is a batch of a tensor's shape.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <vector>

#include "compiler/network.h"

namespace tpu::compiler {

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

// Throws CompileError unless x is a batch of int8 samples of info's shape
// (graph.cpp).
void check_tensor(const Tensor& x, const TensorInfo& info, const std::string& what);

}  // namespace tpu::compiler
