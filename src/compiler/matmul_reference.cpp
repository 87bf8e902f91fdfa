// The independent C++ reference of a matmul of two activations
// (docs/quantization.md, "MatMul of two activations"): the sum over A's
// features of (a - z_a) * b in int64, B read transposed or not (its zero
// point is 0), then the requantization of compiler/reference.h with the
// multiplier found by reference_requant.
#include "compiler/layer_reference.h"
#include "compiler/reference.h"

namespace tpu::compiler {

Tensor reference_matmul(const Layer& l, const TensorInfo& ia, const TensorInfo& ib, const TensorInfo& out,
                        const Tensor& a, const Tensor& b) {
  const std::size_t tokens = ia.shape[0] * ia.shape[1], k = ia.shape[2], cols = out.shape[2];
  const std::size_t per_a = tokens * k, per_b = ib.shape[0] * ib.shape[1] * ib.shape[2];
  const model::Requant q = reference_requant(l.alpha * ia.quant.scale * ib.quant.scale / l.output.scale,
                                             l.output.zero_point);
  Tensor y;
  y.shape = {a.batch(), out.shape[0], out.shape[1], cols};
  y.data.resize(a.batch() * tokens * cols);
  for (std::size_t s = 0; s < a.batch(); ++s)
    for (std::size_t i = 0; i < tokens; ++i)
      for (std::size_t j = 0; j < cols; ++j) {
        std::int64_t acc = 0;
        for (std::size_t f = 0; f < k; ++f) {
          // B[f][j]: with transpose_b, token j's feature f; without, token f's feature j.
          const std::int32_t bv = l.transpose_b ? b.data[s * per_b + j * k + f] : b.data[s * per_b + f * cols + j];
          acc += (std::int64_t{a.data[s * per_a + i * k + f]} - ia.quant.zero_point) * bv;
        }
        // |acc| <= K * 255 * 128: int32 up to K = 65793; the accumulators wrap beyond.
        y.data[(s * tokens + i) * cols + j] = reference_requantize(wrap32(acc), q);
      }
  return y;
}

}  // namespace tpu::compiler
