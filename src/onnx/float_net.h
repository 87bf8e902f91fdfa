// A float network imported from ONNX, in tpu-sim's layer vocabulary and
// layout: the layers of compiler::Network (dense, conv2d, pools, add,
// flatten) with float weights, already rearranged for the TPU (conv weights
// HWIO, dense weights K x Nout, feature maps NHWC), batch normalization and
// constant padding folded in, activations fused into their producer. The
// float executor (float_exec.h) runs it to calibrate activation ranges; the
// quantizer (quantize_float.h) turns it into a compiler::Network.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "compiler/network.h"

namespace tpu::onnximport {

struct FloatLayer {
  compiler::LayerKind kind = compiler::LayerKind::Dense;
  std::string name;  // the ONNX node that made it
  // Dense: K x Nout; Conv2d: KH x KW x Cin x Cout (depthwise: KH x KW x 1 x C).
  std::vector<std::size_t> weight_shape;
  std::vector<float> weights;
  std::vector<float> bias;  // Nout, or empty
  model::ActFunction act = model::ActFunction::None;
  // A Clip(0, hi) fused as ReLU keeps its upper bound here: the float pass
  // clips at it, and the calibrated output range then never exceeds it, so the
  // int8 saturation of the quantized layer performs the clip (ReLU6).
  float clip_hi = std::numeric_limits<float>::infinity();
  unsigned kernel_h = 1, kernel_w = 1;
  unsigned stride_h = 1, stride_w = 1;
  unsigned pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  unsigned groups = 1;
  // Tensor ids: 0 the network input, i + 1 the output of layer i. A dense
  // layer may read several (its K rows their features in order, as
  // compiler::Layer), and `pixel` (>= 0) of its first input, a map, only.
  std::vector<std::size_t> inputs;
  std::int64_t pixel = -1;
  // A QDQ model's quantized weights (dense, conv2d): their per-tensor scale;
  // `weights` then hold the dequantized values scale * q (0: a float model's
  // weights, quantized by tpu-sim).
  double weight_scale = 0.0;
  // A channel selection or permutation (Slice, Split, the channel shuffle):
  // a 1x1 conv2d of 0/1 weights whose output keeps its input's quantization,
  // so that it copies exactly (docs/onnx.md).
  bool keep_quant = false;
  // Affine (the vector unit): act(alpha * x + beta); with unit_range (a
  // HardSigmoid) the result is clamped to [0, 1] and quantized at scale 1/255,
  // zero point -128, where the int8 saturation is that clamp. Mul: inputs a
  // map and the same shape or a 1 x 1 x C vector (docs/quantization.md).
  double alpha = 1.0, beta = 0.0;
  bool unit_range = false;
  // --- attention (docs/quantization.md, "Softmax and attention") ---
  // MatMul of two activations: B (inputs[1]) used transposed; alpha scales the
  // product. B is quantized symmetric (zero point 0), whatever layer makes it.
  bool transpose_b = false;
  // LayerNorm (over the last axis, without its affine: the importer makes
  // the affine a depthwise 1x1 conv2d): the variance's epsilon.
  double eps = 1e-5;
  // TokenBias (docs/quantization.md, "Constant tokens and positions"):
  // prefix_tokens tokens of zeros in front of the input's H*W pixels, then
  // `bias` (one per output token and channel, row-major) added.
  unsigned prefix_tokens = 0;
};

// A QDQ model's quantization of one tensor (a QuantizeLinear on it), in
// tpu-sim's int8 terms (a uint8 zero point z becomes z - 128).
struct TensorQuant {
  bool set = false;
  compiler::QuantParams quant;
};

struct FloatNet {
  std::string name;
  std::vector<std::size_t> input_shape;        // one sample, tpu layout: {H, W, C} or {F}
  std::vector<std::size_t> model_input_shape;  // one sample, the model's: {C, H, W} or {F}
  // A sequence input (a recurrent layer's), model_input_shape {L, D}: the
  // model's (N, L, D), or with seq_first_input its (L, N, D); held 1 x L x D.
  bool sequence_input = false, seq_first_input = false;
  // The output is a token sequence (N, L, D) (import_transformer.cpp), held 1 x L x D.
  bool token_output = false;
  std::vector<FloatLayer> layers;              // the output is the last layer's
  std::vector<std::size_t> model_output_shape; // one sample, the model's layout
  // For a 1-D output that came from flattening a map: output_perm[i] is the
  // tpu-layout index of the model's feature i (empty: the identity).
  std::vector<std::size_t> output_perm;
  // A QDQ model (QuantizeLinear/DequantizeLinear nodes) brings its own
  // quantization: per tensor id, and needs no calibration.
  bool qdq = false;
  std::vector<TensorQuant> tensor_quant;
  // Groups of tensor ids quantized alike (over the union of their ranges):
  // a recurrent layer's state at every time step, so that every step's gate
  // layers get the same int8 weights (docs/quantization.md, "Recurrent layers").
  std::vector<std::vector<std::size_t>> tied;
  // One-line warnings of the import (what tpu-sim computes differently from
  // the model), printed by `tpu-sim net`.
  std::vector<std::string> warnings;
};

// One sample's shape of every tensor (tensor ids as FloatLayer::inputs),
// in tpu layout; throws CompileError naming the layer on a mismatch.
std::vector<std::vector<std::size_t>> float_shapes(const FloatNet& net);

}  // namespace tpu::onnximport
