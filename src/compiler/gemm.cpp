// The GEMM compiler's driver (gemm.h): reads A, B and the requantization,
// produces a GemmPlan: its layout (chunks of A, host and weight rows), its
// memory images, and its program, lowered by lower_gemm (gemm_lower.cpp) and
// emitted in order (emit_in_order.cpp). Also the result's read-back and
// --requant's parser.
#include "compiler/gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "compiler/gemm_lower.h"

namespace tpu::compiler {

namespace {

// The plan's shapes and where everything goes: checks the shapes against
// each other and the memories, and sizes the chunks of A. The UB holds two A
// regions of kt*mc rows and, for int8 output, two result regions of mc rows;
// the accumulators two regions of mc rows.
GemmPlan gemm_layout(const MatrixI8& a, const MatrixI8& b, const GemmSpec& spec,
                     const ArchConfig& cfg) {
  if (a.rows == 0 || a.cols == 0 || b.cols == 0)
    throw CompileError(fmt::format("empty GEMM: A is {}x{}, B is {}x{}", a.rows, a.cols, b.rows,
                                   b.cols));
  if (a.cols != b.rows)
    throw CompileError(fmt::format("shapes do not match: A is {}x{} but B is {}x{}", a.rows,
                                   a.cols, b.rows, b.cols));
  if (spec.act != model::ActFunction::None && !spec.requant)
    throw CompileError("an activation needs a requantization (int8 output)");

  const std::uint64_t n = cfg.array_n;
  GemmPlan plan;
  plan.m = a.rows;
  plan.k = a.cols;
  plan.n_out = b.cols;
  plan.int8_output = spec.requant.has_value();
  const std::uint64_t kt = ceil_div(plan.k, n), nt = ceil_div(plan.n_out, n);
  const std::uint64_t ub_per_row = 2 * kt + (plan.int8_output ? 2 : 0);
  const std::uint64_t field_max = static_cast<std::uint64_t>(isa::field_spec(isa::Field::Rows).max);
  plan.chunk_rows = std::min({plan.m, cfg.ub_rows / ub_per_row, cfg.acc_rows / 2, field_max});
  if (plan.chunk_rows == 0)
    throw CompileError(fmt::format(
        "K = {} needs {} unified buffer rows per row of A, but the unified buffer has {}", plan.k,
        ub_per_row, cfg.ub_rows));

  const std::uint64_t rows_per_c = plan.int8_output ? 1 : isa::kHostRowsPerAccRow;
  plan.c_host_row = kt * plan.m;
  plan.host_rows_used = plan.c_host_row + nt * plan.m * rows_per_c;
  plan.weight_tiles_used = kt * nt;
  if (plan.host_rows_used > cfg.host_rows)
    throw CompileError(fmt::format("A and C need {} host memory rows, but it has {}",
                                   plan.host_rows_used, cfg.host_rows));
  if (plan.weight_tiles_used > cfg.weight_tiles)
    throw CompileError(fmt::format("B needs {} weight tiles, but weight memory has {}",
                                   plan.weight_tiles_used, cfg.weight_tiles));
  return plan;
}

// The host image (A chunk-major, then room for C) and the weight image.
void gemm_images(const MatrixI8& a, const MatrixI8& b, std::uint64_t n, GemmPlan& plan) {
  const std::uint64_t m = plan.m, k = plan.k, n_out = plan.n_out, mc = plan.chunk_rows;
  const std::uint64_t kt = ceil_div(k, n), nt = ceil_div(n_out, n);
  plan.host.assign(plan.host_rows_used * n, 0);
  for (std::uint64_t c = 0; c < ceil_div(m, mc); ++c) {
    const std::uint64_t m0 = c * mc, rows = std::min(mc, m - m0);
    for (std::uint64_t t = 0; t < kt; ++t)
      for (std::uint64_t i = 0; i < rows; ++i) {
        std::int8_t* dst = &plan.host[(m0 * kt + t * rows + i) * n];
        for (std::uint64_t col = t * n; col < std::min(k, t * n + n); ++col)
          dst[col - t * n] = a.at(m0 + i, col);
      }
  }
  plan.weights.assign(plan.weight_tiles_used * n * n, 0);
  for (std::uint64_t u = 0; u < nt; ++u)
    for (std::uint64_t t = 0; t < kt; ++t) {
      std::int8_t* tile = &plan.weights[(u * kt + t) * n * n];
      for (std::uint64_t r = t * n; r < std::min(k, t * n + n); ++r)
        for (std::uint64_t col = u * n; col < std::min(n_out, u * n + n); ++col)
          tile[(r - t * n) * n + (col - u * n)] = b.at(r, col);
    }
}

}  // namespace

GemmPlan compile_gemm(const MatrixI8& a, const MatrixI8& b, const GemmSpec& spec,
                      const ArchConfig& cfg) {
  GemmPlan plan = gemm_layout(a, b, spec, cfg);
  gemm_images(a, b, cfg.array_n, plan);
  Emitter e;
  // The GEMM sets its one requantization itself, first (gemm_lower.cpp).
  emit_in_order(lower_gemm(plan, spec, cfg.array_n), cfg, std::nullopt, e);
  plan.program.array_n = static_cast<unsigned>(cfg.array_n);
  plan.program.code = std::move(e.code());
  plan.assembly = fmt::format(".array {}\n", cfg.array_n) + e.text();
  return plan;
}

std::vector<std::int32_t> extract_result(const GemmPlan& plan, const std::int8_t* host,
                                         std::uint64_t n) {
  std::vector<std::int32_t> c(plan.m * plan.n_out);
  const std::uint64_t rows_per_c = plan.int8_output ? 1 : isa::kHostRowsPerAccRow;
  for (std::uint64_t m = 0; m < plan.m; ++m)
    for (std::uint64_t col = 0; col < plan.n_out; ++col) {
      const std::uint64_t u = col / n, j = col % n;
      const std::int8_t* row = host + (plan.c_host_row + (u * plan.m + m) * rows_per_c) * n;
      if (plan.int8_output) {
        c[m * plan.n_out + col] = row[j];
      } else {
        std::uint32_t v = 0;
        for (unsigned byte = 0; byte < 4; ++byte)
          v |= std::uint32_t{static_cast<std::uint8_t>(row[4 * j + byte])} << (8 * byte);
        c[m * plan.n_out + col] = static_cast<std::int32_t>(v);
      }
    }
  return c;
}

model::Requant parse_requant(const std::string& text) {
  long long v[3];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lld,%lld,%lld%c", &v[0], &v[1], &v[2], &tail) != 3)
    throw std::invalid_argument("expected M,S,Z, e.g. 93,9,-3");
  const isa::Field fields[3] = {isa::Field::QMul, isa::Field::QShift, isa::Field::QZero};
  for (int i = 0; i < 3; ++i) {
    const isa::FieldSpec& f = isa::field_spec(fields[i]);
    if (v[i] < f.min || v[i] > f.max)
      throw std::invalid_argument(fmt::format("{} = {} is outside {}..{}", f.name, v[i], f.min, f.max));
  }
  return {static_cast<std::int32_t>(v[0]), static_cast<std::uint32_t>(v[1]), static_cast<std::int8_t>(v[2])};
}

}  // namespace tpu::compiler
