// The independent int8 reference for networks: every layer computed directly
// from its definition (docs/quantization.md), without the compiler's lowering:
// a convolution as a sum over its window (no im2col, padding by bounds
// checks), the input zero point subtracted from every input (not folded into
// the bias), the bias added in int64, the requantization multiplier and shift
// found by a search rather than frexp, and the requantization and activation
// of compiler/reference.h. Depthwise conv2d, pooling with padding (max:
// padded positions never win; average: count_include_pad), global average
// pooling and add follow the integer semantics of docs/quantization.md
// directly (the add's input weights computed here from their formula), and
// the network is read as a graph: each layer reads its inputs by tensor id.
#pragma once

#include <vector>

#include "compiler/network.h"

namespace tpu::compiler {

// M, S of the scheme for a real multiplier, found independently of
// requant_from_multiplier: the shift S for which 2^30 <= real * 2^S < 2^31.
model::Requant reference_requant(double real, std::int32_t zero_point);

// The output of every layer: outputs[i] is layer i's output for input x
// (tensor id i + 1; each layer reads its inputs by tensor id, 0 being x).
std::vector<Tensor> reference_network_all(const Network& net, const Tensor& x);

// The network's output.
Tensor reference_network(const Network& net, const Tensor& x);

// --- attention (softmax_reference.cpp) ---
// A softmax layer on x (its info `in`): SMAX's integer arithmetic per token
// (each sample's pixel's channels), written from docs/quantization.md
// ("Integer softmax, LayerNorm and GELU"), not from the model's code.
Tensor reference_softmax(const TensorInfo& in, const Tensor& x);
// A matmul layer (matmul_reference.cpp): per sample, acc = sum_k (a - z_a) * b
// in int64 over A's tokens and B (transposed or not), requantized with
// reference_requant(alpha * s_a * s_b / s_o).
Tensor reference_matmul(const Layer& l, const TensorInfo& ia, const TensorInfo& ib, const TensorInfo& out,
                        const Tensor& a, const Tensor& b);

}  // namespace tpu::compiler
