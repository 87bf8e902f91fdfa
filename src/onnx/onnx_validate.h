// The first pass of the ONNX importer: checks a parsed model against what
// tpu-sim and libonnx can take before libonnx's checker and shape inference
// see it. libonnx trusts some of a model's numbers (its Conv and pool shape
// inference divides by `strides`, its checker multiplies dims in int64 and
// lets the count wrap), so a model that only this pass stands between and a
// crash is refused here, with the same one-line FileError as the importer's:
//
// - the default domain's opset: 1 to kMaxOpset;
// - every node: an operator of the default domain that the importer maps
//   (node_operator_error), no graph, sparse-tensor or type attribute (no
//   supported operator takes one), window attributes (strides, dilations,
//   kernel_shape, pads, group) within kWindowLimit;
// - every tensor (initializers, tensor attributes): a data type with a
//   known element size, dims not negative and at most UINT32_MAX, their
//   product computed with overflow checks, and exactly that many elements in
//   the raw or typed data; no external data, no sparse initializers;
// - every value's declared shape: no negative dimension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
}  // namespace onnx

namespace tpu::onnximport {

// The highest opset of the default domain the importer takes: the last that
// Debian's libonnx 1.12 defines, and the versions of the supported operators
// that docs/onnx.md describes (a later opset may change them unseen).
inline constexpr std::int64_t kMaxOpset = 17;

// The largest stride, dilation, kernel size, pad or group count a node may
// hold (tpu-sim's layer fields are unsigned; real networks stay far below).
inline constexpr std::int64_t kWindowLimit = 65536;

// The most elements one sample of a tensor may have (the model's input and
// every layer's output, checked as the importer computes their shapes): 2^26,
// more than a 3 x 4096 x 4096 image; the importer keeps per-element tables
// (a flattened map's permutation) that must fit in memory.
inline constexpr std::uint64_t kMaxTensorElements = std::uint64_t{1} << 26;

// Whether a shape has at most kMaxTensorElements elements (the product
// computed with overflow checks).
bool within_tensor_limit(const std::vector<std::size_t>& shape);

// Throws FileError ("WHERE: reason", one line) for the first thing in `model`
// the importer or libonnx cannot take safely.
void validate_model(const onnx::ModelProto& model, const std::string& where);

// The number of elements of `t` (the product of its dims); throws FileError
// ("WHERE: WHAT 'NAME': ...") for a negative or too large dimension and a
// product past 2^64.
std::uint64_t tensor_element_count(const onnx::TensorProto& t, const std::string& what, const std::string& where);

// Why the importer cannot take an operator `op` of `domain`; empty when it
// maps it onto tpu-sim's layers.
std::string node_operator_error(const std::string& domain, const std::string& op);

}  // namespace tpu::onnximport
