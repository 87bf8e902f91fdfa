// The float forward pass of an imported network, in tpu layout (NHWC), used
// to calibrate the activation ranges the quantizer needs (and to compare the
// import with the framework's own output). Plain loops in float with double
// accumulation per output: calibration runs it once per calibration sample.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "onnx/float_net.h"

namespace tpu::onnximport {

// The smallest and largest value seen in a tensor.
struct Range {
  double lo = 0.0, hi = 0.0;
  bool seen = false;
  bool all_finite = true;  // no NaN or infinity seen (else lo and hi ignore them)
  void add(float v) {
    if (!std::isfinite(v)) all_finite = false;
    else if (!seen) lo = hi = v, seen = true;
    else if (v < lo) lo = v;
    else if (v > hi) hi = v;
  }
};

struct FloatRun {
  std::vector<float> output;        // batch x the last layer's shape, tpu layout
  std::vector<std::size_t> output_shape;  // one sample
  std::vector<Range> ranges;        // per tensor id, over the whole batch
};

// The shape of layer `l`'s output (one sample, tpu layout) given the
// shapes of the tensors before it; throws CompileError naming the layer.
std::vector<std::size_t> float_layer_shape(const FloatLayer& l,
                                           const std::vector<std::vector<std::size_t>>& shapes);

// Runs `net` on `batch` samples of `input` (batch x net.input_shape, tpu
// layout, C order). Throws CompileError on inconsistent shapes.
FloatRun run_float(const FloatNet& net, const std::vector<float>& input, std::size_t batch);

}  // namespace tpu::onnximport
