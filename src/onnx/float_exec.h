// The float forward pass of an imported network, in tpu layout (NHWC), used
// to calibrate the activation ranges the quantizer needs (and to compare the
// import with the framework's own output). The batch runs layer by layer in
// chunks of samples (as many as a memory budget allows, each tensor freed
// after its last reader); convolutions and dense layers are GEMMs on Eigen
// split over threads (float_kernels.h), the other layers plain loops. The
// result does not depend on the thread count (docs/onnx.md, "Calibration").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
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
  // The range of both sets of values (the order of merges does not matter).
  void merge(const Range& o) {
    all_finite = all_finite && o.all_finite;
    if (!o.seen) return;
    if (!seen) lo = o.lo, hi = o.hi, seen = true;
    lo = std::min(lo, o.lo);
    hi = std::max(hi, o.hi);
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

struct FloatOptions {
  unsigned threads = 0;  // 0: model::default_gemm_threads() (model/int8_gemm.h)
  // Called after each layer of each chunk of samples: samples [first,
  // first + count) of `batch`, layer `layer` (0-based) of `layers` done.
  std::function<void(std::size_t first, std::size_t count, std::size_t batch, std::size_t layer,
                     std::size_t layers)>
      progress;
  // Bytes of tensors a chunk of samples may hold at once (its size follows).
  std::size_t memory_budget = std::size_t{256} << 20;
};

// Runs `net` on `batch` samples of `input` (batch x net.input_shape, tpu
// layout, C order). Throws CompileError on inconsistent shapes.
FloatRun run_float(const FloatNet& net, const std::vector<float>& input, std::size_t batch,
                   const FloatOptions& options = {});

}  // namespace tpu::onnximport
