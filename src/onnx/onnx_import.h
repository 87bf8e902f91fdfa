// The ONNX importer: reads a .onnx file with the ONNX project's own library
// (protobuf schema, onnx::checker::check_model, onnx::shape_inference, run
// after onnx_validate.h's own checks) and maps its graph onto tpu-sim's
// layers as a FloatNet (float_net.h). docs/onnx.md's operator table is the
// whole list, with each operator's limits; in short:
//
// - Conv (any group count; 1-D on rank-3 inputs) -> conv2d; Gemm, MatMul ->
//   dense; MaxPool, AveragePool, GlobalAveragePool, ReduceMean over H and W
//   -> the pools; Add of two tensors -> add; Concat -> concat; Mul of two
//   tensors -> mul; HardSigmoid, a standalone Sigmoid/Tanh/Relu -> affine;
//   HardSwish -> affine and mul; a standalone BatchNormalization -> a
//   depthwise 1x1 conv2d;
//   Resize/Upsample (nearest) -> upsample;
//   Slice, Split and the channel shuffle -> channel selections; Flatten,
//   Reshape to (N, features) -> flatten.
// - Folded, no layer of their own: BatchNormalization into the Conv or Gemm
//   before it; Relu, Clip(0, hi), Sigmoid, Tanh into the layer before them
//   (Relu and Clip also into an Add); an Add of a constant into the bias of a
//   Conv, Gemm or MatMul; a constant Pad into the padding of the next Conv,
//   MaxPool or AveragePool; Constant, Identity and Dropout (inference).
// - Layout: NCHW in the model, NHWC in tpu-sim. Conv weights (O, I, KH, KW)
//   become HWIO; Gemm weights K x N; the rows of a dense layer that reads a
//   flattened map are permuted from the model's (c, h, w) order to tpu-sim's
//   (h, w, c).
// - QDQ models (QuantizeLinear/DequantizeLinear nodes): each tensor a layer
//   reads keeps the model's scale and zero point (uint8 as int8 - 128), the
//   weights their int8 values and scale (FloatNet::qdq, tensor_quant,
//   FloatLayer::weight_scale); per-channel weight scales are re-quantized
//   per tensor. What tpu-sim computes differently from the model goes into
//   FloatNet::warnings (docs/onnx.md, "QDQ models").
//
// Everything else (an operator, an attribute value, a data type, a graph
// shape) is one FileError line "MODEL: node 'NAME' (OP): what is unsupported".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "onnx/float_net.h"

namespace onnx {
class ModelProto;
}

namespace tpu::onnximport {

// Reads, checks and imports MODEL.onnx. Throws FileError (one line, starting
// with the path).
FloatNet import_onnx(const std::string& path);

// Whether the model at `path` has QuantizeLinear or DequantizeLinear nodes
// (a QDQ model); nothing when it does not parse. Throws FileError when the
// file cannot be read.
std::optional<bool> onnx_has_qdq_nodes(const std::string& path);

// Imports a model already in memory (checked and shape-inferred here);
// `where` starts every error message.
FloatNet import_onnx_model(onnx::ModelProto model, const std::string& where);

// Whether the importer has an importer for operator `op` of the default
// domain (its operator table; node_operator_error refuses the others).
bool imports_operator(std::string_view op);

}  // namespace tpu::onnximport
