// The ONNX Resize (and Upsample) nodes tpu-sim maps: nearest with integer
// factors (docs/onnx.md, docs/quantization.md "Nearest upsampling").
#pragma once

#include <cstddef>
#include <string>

namespace tpu::onnximport {

// Whether Resize's coordinate transformation `ctm` and `nearest_mode` map
// every output index o of an axis of `in` elements upsampled `s` times to
// input index floor(o / s), as tpu-sim's upsample reads it: "" if so, else
// why not (one line). Unknown modes are reported too.
std::string resize_nearest_mismatch(const std::string& ctm, const std::string& nearest_mode, std::size_t in,
                                    unsigned s);

}  // namespace tpu::onnximport
