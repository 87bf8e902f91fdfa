// The float executor's heavy layers (float_exec.h): convolutions and dense
// layers as matrix products on Eigen's GEMM, in blocks spread over threads.
// A convolution is lowered block by block to im2col rows (never the whole
// map's at once, so memory stays bounded), one GEMM per group; a depthwise
// convolution (one input and one output channel per group) runs as a direct
// loop over channels instead, which a GEMM of width 1 would waste. Results
// equal a plain loop's up to float rounding (the order of the sums
// differs). A block's size depends on the layer only, never on the thread
// count, and Eigen forms each sum the same way for the same call sizes: any
// thread count gives the same bits.
#pragma once

#include <cstddef>
#include <functional>

namespace tpu::onnximport {

// A convolution, feature maps NHWC (C order), weights
// KH x KW x (C / groups) x CO (output channel fastest), groups dividing both
// C and CO; output pixel (oy, ox) reads input (oy * stride + dy * dilation -
// pad_top, ox * stride + dx * dilation - pad_left), zero outside the map.
struct ConvGeom {
  std::size_t h = 0, w = 0, c = 0;     // input
  std::size_t oh = 0, ow = 0, co = 0;  // output
  unsigned kh = 1, kw = 1;
  unsigned stride_h = 1, stride_w = 1;
  unsigned dilation_h = 1, dilation_w = 1;
  unsigned pad_top = 0, pad_left = 0;
  unsigned groups = 1;
};

// Calls body(first, count) on disjoint bands of rows 0 .. rows - 1 covering
// all of them, on up to `threads` threads (0: model::default_gemm_threads(),
// model/int8_gemm.h), the calling thread taking the first band; bands have at least `min_rows` rows.
void parallel_rows(std::size_t rows, unsigned threads, std::size_t min_rows,
                   const std::function<void(std::size_t first, std::size_t count)>& body);

// y = conv(x, w) + bias (bias: CO values or null) for `batch` samples one
// after the other in x and y.
void conv2d_nhwc(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y,
                 unsigned threads, std::size_t batch = 1);

// y (m x n) = x (m x k) * w (k x n) + bias (n values or null), all row-major.
void dense_rows(const float* x, std::size_t m, std::size_t k, std::size_t n, const float* w,
                const float* bias, float* y, unsigned threads);

}  // namespace tpu::onnximport
