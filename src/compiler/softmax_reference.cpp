// The independent C++ reference of a softmax layer: the integer softmax of
// docs/quantization.md ("Integer softmax, LayerNorm and GELU") token by token,
// in plain int64 and unsigned __int128 arithmetic, with the compiler's
// constants (attention.h) as the registers.
#include <algorithm>

#include "compiler/attention.h"
#include "compiler/layer_reference.h"
#include "compiler/reference.h"

namespace tpu::compiler {

Tensor reference_softmax(const TensorInfo& in, const Tensor& x) {
  const SoftmaxConstants c = softmax_constants(in.quant.scale);
  const std::size_t d = in.shape.back();
  const std::int64_t k = std::max<std::int64_t>(c.k0, 1);
  const std::int64_t e_max = (std::int64_t{1} << 39) - 1;
  Tensor y;
  y.shape = x.shape;
  y.data.resize(x.data.size());
  std::vector<std::int64_t> e(d);
  for (std::size_t t = 0; t + d <= x.data.size(); t += d) {
    const std::int32_t m = *std::max_element(x.data.begin() + static_cast<std::ptrdiff_t>(t),
                                             x.data.begin() + static_cast<std::ptrdiff_t>(t + d));
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < d; ++i) {
      const std::int64_t p = std::min<std::int64_t>((std::int64_t{x.data[t + i]} - m) * (std::int64_t{1} << c.shift), 0);
      const std::int64_t z = (-p) / k;  // -p >= 0: division is floor
      const std::int64_t r = p + z * k;
      const std::int64_t u = std::clamp<std::int64_t>(r + c.k1, INT32_MIN, INT32_MAX);
      const std::int64_t l = std::max<std::int64_t>(u * u + c.k2, 0);
      e[i] = z >= 63 ? 0 : std::min(l >> z, e_max);
      sum += e[i];
    }
    const std::int64_t recip = sum == 0 ? 0 : static_cast<std::int64_t>((static_cast<unsigned __int128>(1) << 62) /
                                                                         static_cast<unsigned __int128>(sum));
    for (std::size_t i = 0; i < d; ++i) {
      const unsigned __int128 prod = static_cast<unsigned __int128>(e[i]) * static_cast<unsigned __int128>(recip);
      const std::int64_t v = static_cast<std::int64_t>(std::min<unsigned __int128>(prod >> 32, INT32_MAX));
      y.data[t + i] = reference_requantize(static_cast<std::int32_t>(v), c.requant);
    }
  }
  return y;
}

}  // namespace tpu::compiler
