// Quantizes an imported float network into tpu-sim's int8 network with the
// rules of docs/quantization.md, the same as tools/quantize_model.py:
// activations affine per tensor from their calibrated range (widened to
// include 0; a ReLU's starts at 0), weights symmetric per tensor
// (max|w| / 127), biases int32 at the accumulator scale, rounding half to
// even in double. Pools and flatten keep their input's quantization;
// sigmoid and tanh outputs are fixed by the tables (1/127, 0). A last dense
// or conv2d layer without activation writes its int32 accumulators, so
// logits lose nothing to a final requantization.
#pragma once

#include <vector>

#include "compiler/network.h"
#include "onnx/float_exec.h"
#include "onnx/float_net.h"

namespace tpu::onnximport {

// (scale, zero point) of an int8 tensor covering [lo, hi] and 0.
compiler::QuantParams activation_quant(double lo, double hi);

// Symmetric per-tensor weights: scale max|w| / 127 (1 if all zero),
// q = clamp(round_half_even(w / scale), -127, 127).
std::vector<std::int8_t> quantize_weights(const std::vector<float>& w, double& scale);

// `ranges` per tensor id, from run_float over the calibration set. A QDQ
// network (net.qdq) keeps its own quantization instead: activations as its
// QuantizeLinear nodes give them, weights at their scale (ranges unused);
// a dense or conv2d layer without a QuantizeLinear (the last) writes int32.
compiler::Network quantize_float(const FloatNet& net, const std::vector<Range>& ranges);

}  // namespace tpu::onnximport
