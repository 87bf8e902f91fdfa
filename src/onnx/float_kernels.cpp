#include "onnx/float_kernels.h"

#include "model/int8_gemm.h"

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

namespace tpu::onnximport {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMat = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutMat = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

Eigen::Index ix(std::size_t v) { return static_cast<Eigen::Index>(v); }

// c (m x n, row stride ldc) = a (m x k, lda) * b (k x n, ldb).
void gemm(const float* a, std::size_t lda, const float* b, std::size_t ldb, float* c, std::size_t ldc,
          std::size_t m, std::size_t k, std::size_t n) {
  MutMat(c, ix(m), ix(n), Eigen::OuterStride<>(ix(ldc))).noalias() =
      ConstMat(a, ix(m), ix(k), Eigen::OuterStride<>(ix(lda))) *
      ConstMat(b, ix(k), ix(n), Eigen::OuterStride<>(ix(ldb)));
}

// The rows of one GEMM call: a fixed function of K, never of the thread
// count, so that every row's sums are formed by the same calls (Eigen's
// blocking depends on the call's sizes) on any machine. About 2 MiB of
// im2col rows, at least 32 (Eigen packs B once per call): 112 rows for a
// 3x3x512 window, so that even the 7x7 maps of 4 images give two threads work.
std::size_t block_rows(std::size_t k) {
  return std::clamp<std::size_t>((std::size_t{1} << 19) / std::max<std::size_t>(k, 1) / 16 * 16, 32, 512);
}

// Columns of one dense GEMM call: wide layers split over threads by columns.
constexpr std::size_t kDenseBlockCols = 256;

void add_bias(float* y, std::size_t rows, std::size_t n, std::size_t ld, const float* bias) {
  if (!bias) return;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < n; ++j) y[r * ld + j] += bias[j];
}

// The im2col rows [first, first + rows) of group `grp` (output pixels in
// order, all samples of the batch one after the other): row r holds the
// window of its pixel as (dy, dx, ci), the weights' row order.
void im2col(const ConvGeom& g, const float* x, std::size_t grp, std::size_t first, std::size_t rows,
            float* buf) {
  const std::size_t cig = g.c / g.groups, k = std::size_t{g.kh} * g.kw * cig;
  const std::size_t pixels = g.oh * g.ow;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t p = first + r, n = p / pixels, oy = p % pixels / g.ow, ox = p % g.ow;
    const float* xs = x + n * g.h * g.w * g.c;
    float* dst = buf + r * k;
    for (unsigned dy = 0; dy < g.kh; ++dy) {
      const long iy = static_cast<long>(oy * g.stride_h + std::size_t{dy} * g.dilation_h) - g.pad_top;
      for (unsigned dx = 0; dx < g.kw; ++dx, dst += cig) {
        const long jx = static_cast<long>(ox * g.stride_w + std::size_t{dx} * g.dilation_w) - g.pad_left;
        if (iy < 0 || jx < 0 || iy >= static_cast<long>(g.h) || jx >= static_cast<long>(g.w)) {
          std::fill(dst, dst + cig, 0.0f);
          continue;
        }
        const float* src = xs + (static_cast<std::size_t>(iy) * g.w + static_cast<std::size_t>(jx)) * g.c + grp * cig;
        std::memcpy(dst, src, cig * sizeof(float));
      }
    }
  }
}

// Depthwise rows [first, first + rows): one input and one output channel per
// group, the channels innermost (contiguous in x, w and y).
void depthwise_rows(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y,
                    std::size_t first, std::size_t rows) {
  const std::size_t pixels = g.oh * g.ow, c = g.c;
  for (std::size_t p = first; p < first + rows; ++p) {
    const std::size_t n = p / pixels, oy = p % pixels / g.ow, ox = p % g.ow;
    const float* xs = x + n * g.h * g.w * c;
    float* out = y + p * c;
    for (std::size_t ch = 0; ch < c; ++ch) out[ch] = bias ? bias[ch] : 0.0f;
    for (unsigned dy = 0; dy < g.kh; ++dy) {
      const long iy = static_cast<long>(oy * g.stride_h + std::size_t{dy} * g.dilation_h) - g.pad_top;
      if (iy < 0 || iy >= static_cast<long>(g.h)) continue;
      for (unsigned dx = 0; dx < g.kw; ++dx) {
        const long jx = static_cast<long>(ox * g.stride_w + std::size_t{dx} * g.dilation_w) - g.pad_left;
        if (jx < 0 || jx >= static_cast<long>(g.w)) continue;
        const float* px = xs + (static_cast<std::size_t>(iy) * g.w + static_cast<std::size_t>(jx)) * c;
        const float* wt = w + (std::size_t{dy} * g.kw + dx) * c;
        for (std::size_t ch = 0; ch < c; ++ch) out[ch] += px[ch] * wt[ch];
      }
    }
  }
}

// A 1x1 convolution at stride 1 without padding reads the map itself as its
// im2col matrix.
bool pointwise(const ConvGeom& g) {
  return g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 && g.pad_left == 0 &&
         g.oh == g.h && g.ow == g.w && g.groups == 1;
}

}  // namespace

void parallel_rows(std::size_t rows, unsigned threads, std::size_t min_rows,
                   const std::function<void(std::size_t, std::size_t)>& body) {
  if (rows == 0) return;
  if (threads == 0) threads = model::default_gemm_threads();
  min_rows = std::max<std::size_t>(min_rows, 1);
  const std::size_t bands = std::clamp<std::size_t>(rows / min_rows, 1, threads);
  const std::size_t band = (rows + bands - 1) / bands;
  std::vector<std::thread> helpers;
  std::vector<std::exception_ptr> errors(bands);
  for (std::size_t b = 1; b * band < rows; ++b)
    helpers.emplace_back([&, b] {
      try {
        body(b * band, std::min(band, rows - b * band));
      } catch (...) {
        errors[b] = std::current_exception();
      }
    });
  try {
    body(0, std::min(band, rows));
  } catch (...) {
    errors[0] = std::current_exception();
  }
  for (std::thread& h : helpers) h.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

void conv2d_nhwc(const ConvGeom& g, const float* x, const float* w, const float* bias, float* y, unsigned threads,
                 std::size_t batch) {
  const std::size_t m = batch * g.oh * g.ow;
  if (g.groups == g.c && g.groups == g.co && g.groups > 1) {
    parallel_rows(m, threads, 16, [&](std::size_t first, std::size_t rows) {
      depthwise_rows(g, x, w, bias, y, first, rows);
    });
    return;
  }
  const std::size_t cig = g.c / g.groups, cog = g.co / g.groups, k = std::size_t{g.kh} * g.kw * cig;
  const std::size_t step = block_rows(k), blocks = (m + step - 1) / step;
  const bool direct = pointwise(g);
  parallel_rows(blocks, threads, 1, [&](std::size_t first_block, std::size_t count) {
    std::vector<float> buf(direct ? 0 : step * k);
    for (std::size_t blk = first_block; blk < first_block + count; ++blk) {
      const std::size_t r0 = blk * step, rows = std::min(step, m - r0);
      for (std::size_t grp = 0; grp < g.groups; ++grp) {
        if (!direct) im2col(g, x, grp, r0, rows, buf.data());
        const float* a = direct ? x + r0 * g.c : buf.data();
        gemm(a, direct ? g.c : k, w + grp * cog, g.co, y + r0 * g.co + grp * cog, g.co, rows, k, cog);
      }
      add_bias(y + r0 * g.co, rows, g.co, g.co, bias);
    }
  });
}

void dense_rows(const float* x, std::size_t m, std::size_t k, std::size_t n, const float* w, const float* bias,
                float* y, unsigned threads) {
  const std::size_t row_step = block_rows(k), row_blocks = (m + row_step - 1) / row_step;
  const std::size_t col_blocks = (n + kDenseBlockCols - 1) / kDenseBlockCols;
  parallel_rows(row_blocks * col_blocks, threads, 1, [&](std::size_t first, std::size_t count) {
    for (std::size_t t = first; t < first + count; ++t) {
      const std::size_t r0 = t / col_blocks * row_step, c0 = t % col_blocks * kDenseBlockCols;
      const std::size_t rows = std::min(row_step, m - r0), cols = std::min(kDenseBlockCols, n - c0);
      gemm(x + r0 * k, k, w + c0, n, y + r0 * n + c0, n, rows, k, cols);
      add_bias(y + r0 * n + c0, rows, cols, n, bias ? bias + c0 : nullptr);
    }
  });
}

}  // namespace tpu::onnximport
