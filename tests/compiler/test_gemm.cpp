// The GEMM regression: every shape of the issue on arrays of 4, 8, 16, 32 and
// 256, int32 output and requantized int8 with each activation, compiled,
// simulated cycle by cycle and compared bit for bit with the independent
// reference (Eigen's product, and a requantization written separately from
// the model's).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "compiler/gemm.h"
#include "compiler/reference.h"
#include "model/tpu.h"

namespace {

using namespace tpu;
using compiler::GemmSpec;
using compiler::MatrixI8;
using model::ActFunction;

struct Shape {
  std::size_t m, k, n;
};

MatrixI8 random_matrix(std::size_t rows, std::size_t cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-128, 127);
  MatrixI8 m{rows, cols, std::vector<std::int8_t>(rows * cols)};
  for (auto& v : m.data) v = static_cast<std::int8_t>(d(rng));
  return m;
}

ArchConfig config_for(unsigned n) {
  if (n == 256) return preset_config("tpuv1");
  ArchConfig c = preset_config(n <= 16 ? "small" + std::to_string(n) : "small16");
  c.array_n = n;
  return c;
}

// Requantization that maps the accumulators' typical spread (about
// 128 * 74 * sqrt(K) for uniform int8) onto roughly +-40, so that outputs
// are neither all saturated nor all zero.
model::Requant requant_for(std::size_t k) {
  const double spread = 128.0 * 74.0 * std::sqrt(static_cast<double>(k));
  const auto shift = static_cast<std::uint32_t>(std::clamp(std::lround(std::log2(77.0 * spread / 40.0)), 0L, 62L));
  return {77, shift, -5};
}

// Compiles, runs and compares; returns the run's cycle count.
std::uint64_t check_gemm(const Shape& s, unsigned n, const GemmSpec& spec, std::mt19937& rng) {
  const ArchConfig cfg = config_for(n);
  const MatrixI8 a = random_matrix(s.m, s.k, rng);
  const MatrixI8 b = random_matrix(s.k, s.n, rng);
  const compiler::GemmPlan plan = compiler::compile_gemm(a, b, spec, cfg);
  model::Memories mem(cfg);
  std::copy(plan.host.begin(), plan.host.end(), mem.host.data().begin());
  std::copy(plan.weights.begin(), plan.weights.end(), mem.weights.data().begin());
  const model::RunLog log = model::run_program(cfg, plan.program, mem);
  REQUIRE_FALSE(log.fault);
  REQUIRE(log.halted);
  const std::vector<std::int32_t> got = compiler::extract_result(plan, mem.host.data().data(), n);
  const std::vector<std::int32_t> want = compiler::reference_gemm(a, b, spec);
  REQUIRE(got.size() == want.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && mismatches++ == 0)
      FAIL_CHECK("C[" << i / s.n << "][" << i % s.n << "] = " << got[i] << ", reference "
                      << want[i]);
  CHECK(mismatches == 0);
  // Every row of A meets every weight tile once: M * Kt * Nt rows of N x N MACs.
  const std::uint64_t kt = (s.k + n - 1) / n, nt = (s.n + n - 1) / n;
  CHECK(log.stats.macs == s.m * kt * nt * n * n);
  return log.stats.cycles;
}

std::vector<Shape> shapes_for(unsigned n) {
  std::vector<Shape> s = {{1, 1, 1}, {7, 13, 5}, {n - 1, n + 1, n}, {n, n, n}, {n + 1, n - 1, n + 1},
                          {100, 300, 77}, {256, 256, 256}, {1000, 64, 64}};
  return s;
}

void run_regression(unsigned n) {
  std::mt19937 rng(1000 + n);
  for (const Shape& s : shapes_for(n)) {
    CAPTURE(n, s.m, s.k, s.n);
    {
      INFO("int32 output");
      check_gemm(s, n, GemmSpec{}, rng);
    }
    for (ActFunction f : {ActFunction::None, ActFunction::Relu, ActFunction::Sigmoid, ActFunction::Tanh}) {
      INFO("int8 output, activation " << static_cast<int>(f));
      check_gemm(s, n, GemmSpec{requant_for(s.k), f}, rng);
    }
  }
}

}  // namespace

TEST_CASE("GEMM regression on a 4x4 array", "[gemm][n4]") { run_regression(4); }
TEST_CASE("GEMM regression on an 8x8 array", "[gemm][n8]") { run_regression(8); }
TEST_CASE("GEMM regression on a 16x16 array", "[gemm][n16]") { run_regression(16); }
TEST_CASE("GEMM regression on a 32x32 array", "[gemm][n32]") { run_regression(32); }
TEST_CASE("GEMM regression on a 256x256 array (tpuv1)", "[gemm][n256]") { run_regression(256); }

TEST_CASE("the compiler rejects shapes that do not fit or do not match", "[gemm]") {
  std::mt19937 rng(1);
  const ArchConfig cfg = config_for(8);
  const MatrixI8 a = random_matrix(4, 5, rng), b = random_matrix(6, 3, rng);
  CHECK_THROWS_WITH(compiler::compile_gemm(a, b, {}, cfg),
                    Catch::Contains("shapes do not match: A is 4x5 but B is 6x3"));
  ArchConfig tiny = cfg;
  tiny.ub_rows = 1;  // one k-tile needs two rows (double-buffered A)
  const MatrixI8 b2 = random_matrix(5, 3, rng);
  CHECK_THROWS_WITH(compiler::compile_gemm(a, b2, {}, tiny), Catch::Contains("unified buffer"));
  ArchConfig few_tiles = cfg;
  few_tiles.weight_tiles = 1;
  const MatrixI8 a3 = random_matrix(4, 20, rng), b3 = random_matrix(20, 3, rng);
  CHECK_THROWS_WITH(compiler::compile_gemm(a3, b3, {}, few_tiles), Catch::Contains("weight tiles"));
}

TEST_CASE("an activation without a requantization is rejected", "[gemm]") {
  std::mt19937 rng(2);
  const MatrixI8 a = random_matrix(2, 2, rng), b = random_matrix(2, 2, rng);
  CHECK_THROWS_AS(compiler::compile_gemm(a, b, GemmSpec{std::nullopt, ActFunction::Relu}, config_for(4)),
                  compiler::CompileError);
}

TEST_CASE("M larger than the unified buffer is split into chunks", "[gemm]") {
  std::mt19937 rng(3);
  ArchConfig cfg = config_for(4);
  cfg.ub_rows = 40;  // 2 k-tiles: chunks of 10 rows
  cfg.acc_rows = 64;
  const MatrixI8 a = random_matrix(37, 8, rng), b = random_matrix(8, 6, rng);
  const compiler::GemmPlan plan = compiler::compile_gemm(a, b, {}, cfg);
  CHECK(plan.chunk_rows == 10);
  model::Memories mem(cfg);
  std::copy(plan.host.begin(), plan.host.end(), mem.host.data().begin());
  std::copy(plan.weights.begin(), plan.weights.end(), mem.weights.data().begin());
  const model::RunLog log = model::run_program(cfg, plan.program, mem);
  REQUIRE(log.halted);
  CHECK(compiler::extract_result(plan, mem.host.data().data(), 4) ==
        compiler::reference_gemm(a, b, {}));
}
