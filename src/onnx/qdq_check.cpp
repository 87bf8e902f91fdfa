// After a QDQ graph (importer.h; docs/onnx.md, "QDQ models"): every tensor's
// quantization from its QuantizeLinear (FloatNet::tensor_quant), checked
// layer by layer against what tpu-sim can compute (an int8 output where it
// requantizes, a multiplier below 2^31, a Clip where int8 saturates), with a
// warning in FloatNet::warnings wherever tpu-sim rounds differently.
#include "onnx/importer.h"

#include <algorithm>

namespace tpu::onnximport::detail {

void Importer::finish_qdq() {
  net_.qdq = true;
  net_.tensor_quant.assign(net_.layers.size() + 1, TensorQuant{});
  for (const auto& [t, q] : tq_) net_.tensor_quant.at(t) = TensorQuant{true, q};
  if (!net_.tensor_quant[0].set) fail("the model's input is not quantized (no QuantizeLinear reads it)");
  bool requantizes = false;
  for (std::size_t i = 0; i < net_.layers.size(); ++i) {
    const FloatLayer& l = net_.layers[i];
    TensorQuant& tq = net_.tensor_quant[i + 1];
    const std::string node = fmt::format("node '{}' ({})", l.name, layer_op_.at(i));
    const bool last = i + 1 == net_.layers.size();
    switch (l.kind) {
      case LayerKind::MaxPool2d:
      case LayerKind::Flatten:
        if (!tq.set) tq = net_.tensor_quant.at(l.inputs.at(0));
        break;
      case LayerKind::Concat:
      case LayerKind::Mul:
      case LayerKind::Affine:
      case LayerKind::Upsample:  // refused at its node already
      case LayerKind::Softmax:
      case LayerKind::MatMul:
      case LayerKind::LayerNorm:
      case LayerKind::Gelu:
      case LayerKind::TokenBias:
        fail(fmt::format("{}: is not supported in a QDQ model", node));
      case LayerKind::Dense:
      case LayerKind::Conv2d:
        requantizes = check_qdq_gemm(l, tq, node, last) || requantizes;
        break;
      case LayerKind::Add:
      case LayerKind::AvgPool2d:
      case LayerKind::GlobalAvgPool2d:
        if (!tq.set)
          fail(fmt::format("{}: its output is not quantized (no QuantizeLinear follows it): tpu-sim computes in int8",
                           node));
        requantizes = true;
        if (l.kind == LayerKind::Add) check_qdq_add(l, tq, node);
        break;
    }
  }
  if (requantizes)
    warn("requantization: tpu-sim multiplies by a 31-bit fixed-point M / 2^S and rounds ties up, where the model's "
         "QuantizeLinear rounds a float quotient ties to even; an int8 value can differ by one (docs/onnx.md, \"QDQ "
         "models\", measures how often)");
}

// A conv2d or dense layer: an int8 output (only the last layer, without
// activation, may give its int32 accumulators), its Clip where int8
// saturates, a multiplier the compiler can apply. Whether it requantizes.
bool Importer::check_qdq_gemm(const FloatLayer& l, const TensorQuant& tq, const std::string& node, bool last) const {
  if (!tq.set && !(last && l.act == model::ActFunction::None))
    fail(fmt::format("{}: its output is not quantized (no QuantizeLinear follows it): tpu-sim computes in int8 "
                     "(only the last layer, without activation, may give its int32 accumulators)", node));
  if (tq.set && std::isfinite(l.clip_hi)) {
    const double top = round_even(l.clip_hi / tq.quant.scale) + tq.quant.zero_point;
    if (top < 127)
      fail(fmt::format("{}: Clip at {} is inside its output's quantized range (up to {:.6g}): tpu-sim clips "
                       "only where int8 saturates", node, l.clip_hi, tq.quant.scale * (127 - tq.quant.zero_point)));
  }
  if (tq.set) {
    // The compiler's (M, S) needs m < 2^31 (docs/quantization.md, section 1).
    const double m = net_.tensor_quant.at(l.inputs.at(0)).quant.scale * l.weight_scale / tq.quant.scale;
    if (!(m < 2147483648.0))
      fail(fmt::format("{}: the requantization multiplier s_in * s_w / s_out = {:.6g} is 2^31 or more, which "
                       "tpu-sim cannot apply (check the scales)", node, m));
  }
  return tq.set;
}

// An add: a multiplier the compiler can apply, and a warning where the
// integer factors that match the operands' scales are not exact.
void Importer::check_qdq_add(const FloatLayer& l, const TensorQuant& tq, const std::string& node) {
  const double sa = net_.tensor_quant.at(l.inputs.at(0)).quant.scale;
  const double sb = net_.tensor_quant.at(l.inputs.at(1)).quant.scale;
  const double m = std::max(sa, sb) / 127.0 / tq.quant.scale;
  if (!(m < 2147483648.0))
    fail(fmt::format("{}: the requantization multiplier (s_hi / 127) / s_out = {:.6g} is 2^31 or more, "
                     "which tpu-sim cannot apply (check the scales)", node, m));
  const compiler::AddFactors f = compiler::add_factors(sa, sb);
  // The operand of the smaller scale is weighted d_lo / 127 for s_lo / s_hi.
  const double ratio = std::min(sa, sb) / std::max(sa, sb);
  const double got = static_cast<double>(std::min(f.a, f.b)) / 127.0;
  if (got != ratio)
    warn(fmt::format("{}: the operands' scales {:.6g} and {:.6g} are matched by integer factors {} and {}: the "
                     "operand of the smaller scale is weighted {:.6g} instead of {:.6g} ({:+.2g}%)",
                     node, sa, sb, f.a, f.b, got, ratio, 100.0 * (got / ratio - 1.0)));
}

}  // namespace tpu::onnximport::detail
