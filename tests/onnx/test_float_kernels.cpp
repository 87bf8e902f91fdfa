// The float executor's GEMM kernels (src/onnx/float_kernels.h) against plain
// loops written here in double: convolutions of random shapes with groups,
// depthwise, channel multipliers, strides, dilation and padding, and dense
// layers; each at 1 thread and at more threads than rows, which must give
// the same bits (the machine's core count must not change a calibration).
// run_float over a small network: the same bits at 1 and 3 threads, and in
// chunks of one sample the same within float rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <random>
#include <vector>

#include "onnx/float_exec.h"
#include "onnx/float_kernels.h"

namespace {

using tpu::onnximport::ConvGeom;

std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The convolution by its definition, in double; also returns sum |terms| per
// output (the scale of its float rounding).
std::vector<double> naive_conv(const ConvGeom& g, std::size_t batch, const std::vector<float>& x,
                               const std::vector<float>& w, const std::vector<float>& bias,
                               std::vector<double>& magnitude) {
  const std::size_t cig = g.c / g.groups, cog = g.co / g.groups;
  std::vector<double> y(batch * g.oh * g.ow * g.co);
  magnitude.assign(y.size(), 0.0);
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t oy = 0; oy < g.oh; ++oy)
      for (std::size_t ox = 0; ox < g.ow; ++ox)
        for (std::size_t co = 0; co < g.co; ++co) {
          const std::size_t grp = co / cog, at = ((n * g.oh + oy) * g.ow + ox) * g.co + co;
          double s = bias.empty() ? 0.0 : bias[co], m = std::abs(s);
          for (std::size_t dy = 0; dy < g.kh; ++dy)
            for (std::size_t dx = 0; dx < g.kw; ++dx)
              for (std::size_t ci = 0; ci < cig; ++ci) {
                const long iy = static_cast<long>(oy * g.stride_h + dy * g.dilation_h) - g.pad_top;
                const long ix = static_cast<long>(ox * g.stride_w + dx * g.dilation_w) - g.pad_left;
                if (iy < 0 || ix < 0 || iy >= static_cast<long>(g.h) || ix >= static_cast<long>(g.w)) continue;
                const double term =
                    static_cast<double>(x[((n * g.h + iy) * g.w + ix) * g.c + grp * cig + ci]) *
                    w[((dy * g.kw + dx) * cig + ci) * g.co + co];
                s += term;
                m += std::abs(term);
              }
          y[at] = s;
          magnitude[at] = m;
        }
  return y;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& mag) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-5 * (mag[i] + 1.0)) ++bad;
  CHECK(bad == 0);
}

ConvGeom random_geom(std::mt19937& rng) {
  const auto pick = [&](unsigned lo, unsigned hi) { return std::uniform_int_distribution<unsigned>(lo, hi)(rng); };
  ConvGeom g;
  const unsigned kind = pick(0, 3);  // 0 dense groups 1, 1 grouped, 2 depthwise, 3 channel multiplier
  g.groups = kind == 0 ? 1 : pick(2, 4);
  const unsigned cig = kind >= 2 ? 1 : pick(1, 9), cog = kind == 2 ? 1 : kind == 3 ? pick(2, 3) : pick(1, 20);
  g.c = g.groups * cig, g.co = g.groups * cog;
  g.kh = pick(1, 5), g.kw = pick(1, 5);
  g.stride_h = pick(1, 3), g.stride_w = pick(1, 3);
  g.dilation_h = pick(1, 3), g.dilation_w = pick(1, 3);
  g.pad_top = pick(0, 2), g.pad_left = pick(0, 2);
  const unsigned pad_bottom = pick(0, 2), pad_right = pick(0, 2);
  const unsigned span_h = (g.kh - 1) * g.dilation_h + 1, span_w = (g.kw - 1) * g.dilation_w + 1;
  g.h = pick(span_h > g.pad_top + pad_bottom ? span_h - g.pad_top - pad_bottom : 1, 19);
  g.w = pick(span_w > g.pad_left + pad_right ? span_w - g.pad_left - pad_right : 1, 19);
  g.oh = (g.h + g.pad_top + pad_bottom - span_h) / g.stride_h + 1;
  g.ow = (g.w + g.pad_left + pad_right - span_w) / g.stride_w + 1;
  return g;
}

}  // namespace

TEST_CASE("conv2d_nhwc equals the convolution's definition on random shapes, at any thread count",
          "[onnx][float]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const ConvGeom g = random_geom(rng);
    const std::size_t batch = 1 + trial % 3;
    INFO("trial " << trial << ": " << g.h << "x" << g.w << "x" << g.c << " -> " << g.oh << "x" << g.ow << "x" << g.co
                  << ", kernel " << g.kh << "x" << g.kw << ", stride " << g.stride_h << "," << g.stride_w
                  << ", dilation " << g.dilation_h << "," << g.dilation_w << ", groups " << g.groups);
    const auto x = random_values(batch * g.h * g.w * g.c, rng);
    const auto w = random_values(std::size_t{g.kh} * g.kw * (g.c / g.groups) * g.co, rng);
    const auto bias = trial % 2 ? random_values(g.co, rng) : std::vector<float>{};
    std::vector<double> mag;
    const auto want = naive_conv(g, batch, x, w, bias, mag);
    std::vector<float> one(want.size()), many(want.size());
    const float* b = bias.empty() ? nullptr : bias.data();
    tpu::onnximport::conv2d_nhwc(g, x.data(), w.data(), b, one.data(), 1, batch);
    tpu::onnximport::conv2d_nhwc(g, x.data(), w.data(), b, many.data(), 5, batch);
    check_close(one, want, mag);
    CHECK(one == many);
  }
}

TEST_CASE("conv2d_nhwc splits a large map into GEMM blocks and threads without changing a bit", "[onnx][float]") {
  // 2 x 40 x 40 pixels = 3200 rows, K = 3 * 3 * 16: several blocks of rows.
  std::mt19937 rng(3);
  ConvGeom g;
  g.h = g.w = g.oh = g.ow = 40;
  g.c = 16, g.co = 24, g.kh = g.kw = 3, g.pad_top = g.pad_left = 1;
  const auto x = random_values(2 * 40 * 40 * 16, rng), w = random_values(9 * 16 * 24, rng), bias = random_values(24, rng);
  std::vector<double> mag;
  const auto want = naive_conv(g, 2, x, w, bias, mag);
  std::vector<float> one(want.size()), many(want.size());
  tpu::onnximport::conv2d_nhwc(g, x.data(), w.data(), bias.data(), one.data(), 1, 2);
  tpu::onnximport::conv2d_nhwc(g, x.data(), w.data(), bias.data(), many.data(), 7, 2);
  check_close(one, want, mag);
  CHECK(one == many);
}

TEST_CASE("dense_rows equals the matrix product, at any thread count", "[onnx][float]") {
  std::mt19937 rng(11);
  for (const auto& [m, k, n] : std::vector<std::array<std::size_t, 3>>{{1, 1, 1}, {1, 300, 700}, {5, 17, 3}, {600, 40, 520}}) {
    INFO(m << " x " << k << " x " << n);
    const auto x = random_values(m * k, rng), w = random_values(k * n, rng), bias = random_values(n, rng);
    std::vector<double> want(m * n), mag(m * n);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        double s = bias[j], a = std::abs(s);
        for (std::size_t q = 0; q < k; ++q) {
          const double t = static_cast<double>(x[i * k + q]) * w[q * n + j];
          s += t;
          a += std::abs(t);
        }
        want[i * n + j] = s, mag[i * n + j] = a;
      }
    std::vector<float> one(m * n), many(m * n);
    tpu::onnximport::dense_rows(x.data(), m, k, n, w.data(), bias.data(), one.data(), 1);
    tpu::onnximport::dense_rows(x.data(), m, k, n, w.data(), bias.data(), many.data(), 4);
    check_close(one, want, mag);
    CHECK(one == many);
  }
}

TEST_CASE("parallel_rows covers every row once, in bands of at least min_rows", "[onnx][float]") {
  for (std::size_t rows : {1u, 2u, 7u, 64u, 1000u})
    for (unsigned threads : {1u, 2u, 3u, 8u}) {
      std::vector<int> seen(rows, 0);
      std::vector<std::size_t> sizes;
      std::mutex lock;
      tpu::onnximport::parallel_rows(rows, threads, 4, [&](std::size_t first, std::size_t count) {
        const std::lock_guard<std::mutex> hold(lock);
        sizes.push_back(count);
        for (std::size_t r = first; r < first + count; ++r) ++seen[r];
      });
      CHECK(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(rows));
      CHECK(sizes.size() <= threads);
      // Threads are used once there are rows for two bands.
      if (threads > 1 && rows >= 8) CHECK(sizes.size() > 1);
      if (sizes.size() > 1) CHECK(*std::max_element(sizes.begin(), sizes.end()) >= 4);
    }
}

namespace {

// conv 3x3 (ReLU) -> max-pool 2x2 -> flatten -> dense, random weights.
tpu::onnximport::FloatNet small_cnn(std::mt19937& rng) {
  using tpu::compiler::LayerKind;
  tpu::onnximport::FloatNet net;
  net.input_shape = {9, 9, 3};
  tpu::onnximport::FloatLayer conv;
  conv.kind = LayerKind::Conv2d;
  conv.name = "conv";
  conv.weight_shape = {3, 3, 3, 8};
  conv.weights = random_values(3 * 3 * 3 * 8, rng);
  conv.bias = random_values(8, rng);
  conv.kernel_h = conv.kernel_w = 3;
  conv.pad_top = conv.pad_bottom = conv.pad_left = conv.pad_right = 1;
  conv.act = tpu::model::ActFunction::Relu;
  conv.inputs = {0};
  tpu::onnximport::FloatLayer pool;
  pool.kind = LayerKind::MaxPool2d;
  pool.name = "pool";
  pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
  pool.inputs = {1};
  tpu::onnximport::FloatLayer flat;
  flat.kind = LayerKind::Flatten;
  flat.name = "flat";
  flat.inputs = {2};
  tpu::onnximport::FloatLayer dense;
  dense.kind = LayerKind::Dense;
  dense.name = "dense";
  dense.weight_shape = {4 * 4 * 8, 5};
  dense.weights = random_values(4 * 4 * 8 * 5, rng);
  dense.inputs = {3};
  net.layers = {conv, pool, flat, dense};
  return net;
}

}  // namespace

TEST_CASE("run_float gives the same bits at any thread count, and chunks change only rounding", "[onnx][float]") {
  std::mt19937 rng(5);
  const auto net = small_cnn(rng);
  const std::size_t batch = 6;
  const auto x = random_values(batch * 9 * 9 * 3, rng);
  tpu::onnximport::FloatOptions one, many, chunked;
  one.threads = 1;
  many.threads = 3;
  chunked.threads = 2;
  chunked.memory_budget = 1;  // one sample per chunk
  std::size_t calls = 0;
  chunked.progress = [&](std::size_t first, std::size_t count, std::size_t total, std::size_t layer,
                         std::size_t layers) {
    CHECK(count == 1);
    CHECK(total == batch);
    CHECK(layers == 4);
    CHECK(layer == calls % 4);
    CHECK(first == calls / 4);
    ++calls;
  };
  const auto a = tpu::onnximport::run_float(net, x, batch, one);
  const auto b = tpu::onnximport::run_float(net, x, batch, many);
  const auto c = tpu::onnximport::run_float(net, x, batch, chunked);
  CHECK(calls == batch * 4);
  CHECK(a.output == b.output);
  REQUIRE(a.output.size() == c.output.size());
  for (std::size_t i = 0; i < a.output.size(); ++i) CHECK(c.output[i] == Approx(a.output[i]).margin(1e-5));
  REQUIRE(a.ranges.size() == 5);
  for (std::size_t t = 0; t < 5; ++t) {
    CHECK(a.ranges[t].lo == b.ranges[t].lo);
    CHECK(a.ranges[t].hi == b.ranges[t].hi);
    CHECK(c.ranges[t].hi == Approx(a.ranges[t].hi).margin(1e-5));
  }
  CHECK(a.ranges[1].lo == 0.0);  // the ReLU
}
