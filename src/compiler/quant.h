// The quantization scheme of docs/quantization.md: affine per-tensor int8
// activations (scale, zero point), symmetric per-tensor int8 weights, int32
// biases at the accumulator scale, and the requantization multiplier and
// shift the activation unit's SETQ takes, derived from the scales.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/activation.h"

namespace tpu::compiler {

// v wrapped to int32, as the accumulators' two's-complement sums wrap.
inline std::int32_t wrap32(std::int64_t v) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v)));
}

// real value = scale * (q - zero_point); zero_point in -128..127.
struct QuantParams {
  double scale = 1.0;
  std::int32_t zero_point = 0;
};

// The input scale of the sigmoid and tanh tables (ACT.Q, ACT.T compute
// f(y / 16)), and the output quantization they produce (127 * f, zero point 0).
inline constexpr double kSigmoidTanhInputScale = 1.0 / 16.0;
inline constexpr double kSigmoidTanhOutputScale = 1.0 / 127.0;

// (M, S) with M / 2^S as close to `real` as 31 bits allow, per
// docs/quantization.md: real = f * 2^e with f in [0.5, 1); M = round(f * 2^31)
// (halves away from zero), S = 31 - e; M = 2^31 becomes 2^30 with S - 1; a
// shift above 62 is clamped to 62 with M = round(real * 2^62). Throws
// CompileError when `real` is not positive and finite or needs S < 0
// (real >= 2^31).
model::Requant requant_from_multiplier(double real, std::int32_t zero_point);

// The requantization of a dense or conv2d layer: real multiplier
// input_scale * weight_scale / output_scale (evaluated in this order, in
// double), where output_scale is the layer's output scale for no activation
// and ReLU, and 1/16 (the tables' input scale) with zero point 0 for sigmoid
// and tanh.
model::Requant layer_requant(double input_scale, double weight_scale, const QuantParams& output,
                             model::ActFunction act);

// The integer factors of a residual add (docs/quantization.md): the operand
// of the larger scale s_hi gets 127, the other round(127 * s_lo / s_hi)
// clamped to 1..127; the accumulators then hold the sum at scale s_hi / 127.
struct AddFactors {
  std::int32_t a = 127, b = 127;
  double acc_scale = 1.0;
};
AddFactors add_factors(double scale_a, double scale_b);
// The requantization of an add: real multiplier (s_hi / 127) / s_out.
model::Requant add_requant(const QuantParams& a, const QuantParams& b, const QuantParams& out);

// The integer factors of a concat (docs/quantization.md): input i weighs
// round(127 * s_i / s_hi) clamped to 1..127, s_hi the largest input scale;
// the accumulators hold the inputs at scale s_hi / 127.
struct ConcatFactors {
  std::vector<std::int32_t> d;
  double acc_scale = 1.0;
};
ConcatFactors concat_factors(const std::vector<double>& scales);
// The requantization of a concat: real multiplier (s_hi / 127) / s_out.
model::Requant concat_requant(const std::vector<double>& scales, const QuantParams& out);

// The vector registers and requantization of a layer on the vector unit
// (docs/quantization.md, "Layers on the vector unit"): VSRC's zero points,
// VSCL's factors and operation, and SETQ's (M, S, Z).
struct VecParams {
  std::uint8_t op = 0;  // isa::VecOperation
  std::int32_t za = 0, zb = 0, da = 1, db = 1;
  model::Requant requant;
};
// A mul of a by b: v = (a - z_a)(b - z_b), m = s_a * s_b / s_o (s_o = 1/16 for sigmoid and tanh).
VecParams mul_vec(const QuantParams& a, const QuantParams& b, const QuantParams& out,
                  model::ActFunction act);
// An affine y = act(alpha * x + beta) of x, its operand B x itself read at zero point z_x - k.
VecParams affine_vec(const QuantParams& x, double alpha, double beta, const QuantParams& out,
                     model::ActFunction act);

// Decomposes int32 biases into int8 digits on constant input lanes: for each
// column o, bias[o] = sum over lanes l of values[l] * digits[l][o] exactly,
// with every digit in -127..127. Lanes are tried largest |value| first (each
// digit the rounded quotient of what is left, clamped). Returns nullopt when
// some column cannot be represented (no lane of value +-1, or too few lanes).
// Lanes of value 0 get digit 0.
std::optional<std::vector<std::vector<std::int8_t>>> decompose_bias(
    const std::vector<std::int32_t>& bias, const std::vector<std::int32_t>& values);

}  // namespace tpu::compiler
