#include "compiler/gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <stdexcept>

#include "common/plural.h"
#include "compiler/emitter.h"

namespace tpu::compiler {

using isa::Opcode;

GemmPlan compile_gemm(const MatrixI8& a, const MatrixI8& b, const GemmSpec& spec,
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
  const std::uint64_t m = a.rows, k = a.cols, n_out = b.cols;
  const std::uint64_t kt = ceil_div(k, n), nt = ceil_div(n_out, n);
  const bool int8_out = spec.requant.has_value();

  // UB: two A regions of kt*mc rows, and for int8 output two result regions of
  // mc rows. ACC: two regions of mc rows.
  const std::uint64_t ub_per_row = 2 * kt + (int8_out ? 2 : 0);
  const std::uint64_t field_max = static_cast<std::uint64_t>(isa::field_spec(isa::Field::Rows).max);
  const std::uint64_t mc = std::min({m, cfg.ub_rows / ub_per_row, cfg.acc_rows / 2, field_max});
  if (mc == 0)
    throw CompileError(fmt::format(
        "K = {} needs {} unified buffer rows per row of A, but the unified buffer has {}", k,
        ub_per_row, cfg.ub_rows));

  GemmPlan plan;
  plan.m = m;
  plan.k = k;
  plan.n_out = n_out;
  plan.chunk_rows = mc;
  plan.int8_output = int8_out;
  const std::uint64_t rows_per_c = int8_out ? 1 : isa::kHostRowsPerAccRow;
  const std::uint64_t a_rows = kt * m;
  plan.c_host_row = a_rows;
  plan.host_rows_used = a_rows + nt * m * rows_per_c;
  plan.weight_tiles_used = kt * nt;
  if (plan.host_rows_used > cfg.host_rows)
    throw CompileError(fmt::format("A and C need {} host memory rows, but it has {}",
                                   plan.host_rows_used, cfg.host_rows));
  if (plan.weight_tiles_used > cfg.weight_tiles)
    throw CompileError(fmt::format("B needs {} weight tiles, but weight memory has {}",
                                   plan.weight_tiles_used, cfg.weight_tiles));

  // Host image: A chunk-major, then room for C.
  plan.host.assign(plan.host_rows_used * n, 0);
  const std::uint64_t chunks = ceil_div(m, mc);
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint64_t m0 = c * mc, rows = std::min(mc, m - m0);
    for (std::uint64_t t = 0; t < kt; ++t)
      for (std::uint64_t i = 0; i < rows; ++i) {
        std::int8_t* dst = &plan.host[(m0 * kt + t * rows + i) * n];
        for (std::uint64_t col = t * n; col < std::min(k, t * n + n); ++col)
          dst[col - t * n] = a.at(m0 + i, col);
      }
  }
  // Weight image.
  plan.weights.assign(plan.weight_tiles_used * n * n, 0);
  for (std::uint64_t u = 0; u < nt; ++u)
    for (std::uint64_t t = 0; t < kt; ++t) {
      std::int8_t* tile = &plan.weights[(u * kt + t) * n * n];
      for (std::uint64_t r = t * n; r < std::min(k, t * n + n); ++r)
        for (std::uint64_t col = u * n; col < std::min(n_out, u * n + n); ++col)
          tile[(r - t * n) * n + (col - u * n)] = b.at(r, col);
    }

  // Program.
  Emitter e;
  e.comment(fmt::format("GEMM {}x{}x{} on a {}x{} array: {}, {}, {} of {}, {} output", m, k, n_out,
                        n, n, plural(kt, "k-tile"), plural(nt, "column tile"),
                        plural(chunks, "chunk"), plural(mc, "row"), int8_out ? "int8" : "int32"));
  std::vector<std::uint64_t> tile_order;
  for (std::uint64_t c = 0; c < chunks; ++c)
    for (std::uint64_t u = 0; u < nt; ++u)
      for (std::uint64_t t = 0; t < kt; ++t) tile_order.push_back(u * kt + t);
  WeightPrefetcher rw(e, tile_order, cfg.fifo_depth);
  if (spec.requant)
    e.emit(Opcode::SETQ, 0, spec.requant->multiplier, spec.requant->shift,
           spec.requant->zero_point);

  const std::uint64_t ub_a_region = kt * mc;
  const std::uint64_t ub_out_base = 2 * ub_a_region;
  const auto load_chunk = [&](std::uint64_t c) {
    const std::uint64_t m0 = c * mc, rows = std::min(mc, m - m0);
    e.comment(fmt::format("chunk {}: {} of A into UB region {}", c, plural_range(m0, rows, "row"),
                          c % 2));
    e.emit(Opcode::RHM, 0, m0 * kt, (c % 2) * ub_a_region, kt * rows);
  };

  // Output of one column tile, emitted one tile late so that it overlaps the
  // next tile's MMCs instead of stalling them.
  struct PendingOutput {
    std::uint64_t chunk, u, acc_base, rows;
    std::uint64_t slot;
  };
  std::optional<PendingOutput> pending;
  const auto drain = [&](const PendingOutput& p) {
    const std::uint64_t m0 = p.chunk * mc;
    const std::uint64_t col0 = p.u * n;
    e.comment(fmt::format("output: C {}, {}", plural_range(m0, p.rows, "row"),
                          plural_range(col0, std::min(n_out, col0 + n) - col0, "column")));
    const std::uint64_t host = plan.c_host_row + (p.u * m + m0) * rows_per_c;
    if (!int8_out) {
      e.emit(Opcode::WHM, isa::kFlagWhmAcc, p.acc_base, host, p.rows);
    } else {
      const std::uint64_t ub = ub_out_base + p.slot * mc;
      e.emit(Opcode::ACT, act_flags(spec.act), p.acc_base, ub, p.rows);
      e.emit(Opcode::WHM, 0, ub, host, p.rows);
    }
  };

  load_chunk(0);
  std::size_t use = 0;
  std::uint64_t column_tiles_done = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) load_chunk(c + 1);
    const std::uint64_t rows = std::min(mc, m - c * mc);
    const std::uint64_t ub_base = (c % 2) * ub_a_region;
    for (std::uint64_t u = 0; u < nt; ++u, ++column_tiles_done) {
      const std::uint64_t slot = column_tiles_done % 2;
      const std::uint64_t acc_base = slot * mc;
      e.comment(fmt::format("chunk {}, column tile {}: ACC region {}", c, u, slot));
      for (std::uint64_t t = 0; t < kt; ++t, ++use) {
        rw.before_use(use);
        e.emit(Opcode::MMC,
               static_cast<std::uint8_t>(isa::kFlagMmcSwitch | (t == 0 ? isa::kFlagMmcOverwrite : 0)),
               ub_base + t * rows, acc_base, rows);
      }
      if (pending) drain(*pending);
      pending = PendingOutput{c, u, acc_base, rows, slot};
    }
  }
  drain(*pending);
  e.emit(Opcode::HLT, 0);

  plan.program.array_n = static_cast<unsigned>(n);
  plan.program.code = std::move(e.code());
  plan.assembly = fmt::format(".array {}\n", n) + e.text();
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
