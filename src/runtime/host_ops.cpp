// The host's operations on tensors (host_ops.h).
#include "runtime/host_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/shapes.h"

namespace tpu::compiler {

Tensor host_maxpool(const Layer& pool, const Tensor& x) {
  const std::size_t h = x.shape[1], w = x.shape[2], c = x.shape[3];
  const std::size_t oh = conv_out(h, pool.kernel_h, pool.stride_h, 0, 0);
  const std::size_t ow = conv_out(w, pool.kernel_w, pool.stride_w, 0, 0);
  Tensor y;
  y.shape = {x.batch(), oh, ow, c};
  y.int32 = x.int32;
  y.data.resize(x.batch() * oh * ow * c);
  for (std::size_t s = 0; s < x.batch(); ++s)
    for (std::size_t i = 0; i < oh; ++i)
      for (std::size_t j = 0; j < ow; ++j)
        for (std::size_t ch = 0; ch < c; ++ch) {
          std::int32_t m = std::numeric_limits<std::int32_t>::min();
          for (unsigned dy = 0; dy < pool.kernel_h; ++dy)
            for (unsigned dx = 0; dx < pool.kernel_w; ++dx)
              m = std::max(m, x.data[((s * h + i * pool.stride_h + dy) * w + j * pool.stride_w + dx) * c + ch]);
          y.data[((s * oh + i) * ow + j) * c + ch] = m;
        }
  return y;
}

Tensor host_flatten(const Tensor& x) {
  Tensor y = x;
  std::size_t count = 1;
  for (std::size_t i = 1; i < x.shape.size(); ++i) count *= x.shape[i];
  y.shape = {x.batch(), count};
  return y;
}

Tensor quantize_input(const Network& net, const std::vector<std::size_t>& shape,
                      const std::vector<double>& values) {
  Tensor x;
  x.shape = shape;
  x.data.resize(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i] / net.input.scale;
    if (!std::isfinite(v)) throw CompileError(fmt::format("input element {} is not finite", i));
    const double r = std::nearbyint(v) + net.input.zero_point;  // ties to even
    x.data[i] = static_cast<std::int32_t>(std::clamp(r, -128.0, 127.0));
  }
  return x;
}

}  // namespace tpu::compiler
