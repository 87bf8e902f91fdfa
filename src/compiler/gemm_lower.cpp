// Lowering of a GEMM (gemm.h) into ops: reads the plan's layout (chunks of
// A, C's host rows) and produces the OpList of its program. A chunk of A is
// double-buffered in the UB (the next chunk loads while this one computes),
// column tiles alternate between two accumulator regions (one drains while
// the next computes), and each column tile's output is written one tile late
// so that it overlaps the next tile's MMCs instead of stalling them.
#include "compiler/gemm_lower.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/plural.h"

namespace tpu::compiler {

using isa::Opcode;

OpList lower_gemm(const GemmPlan& plan, const GemmSpec& spec, std::uint64_t n) {
  const std::uint64_t m = plan.m, n_out = plan.n_out, mc = plan.chunk_rows;
  const std::uint64_t kt = ceil_div(plan.k, n), nt = ceil_div(n_out, n), chunks = ceil_div(m, mc);
  const bool int8_out = plan.int8_output;
  const std::uint64_t rows_per_c = int8_out ? 1 : isa::kHostRowsPerAccRow;
  OpList ops;
  ops.comment(fmt::format("GEMM {}x{}x{} on a {}x{} array: {}, {}, {} of {}, {} output", m, plan.k,
                          n_out, n, n, plural(kt, "k-tile"), plural(nt, "column tile"),
                          plural(chunks, "chunk"), plural(mc, "row"), int8_out ? "int8" : "int32"));
  if (spec.requant) ops.push(Opcode::SETQ, 0, 0, 0, 0).requant = spec.requant;

  const std::uint64_t ub_a_region = kt * mc;
  const std::uint64_t ub_out_base = 2 * ub_a_region;
  const auto load_chunk = [&](std::uint64_t c) {
    const std::uint64_t m0 = c * mc, rows = std::min(mc, m - m0);
    ops.comment(fmt::format("chunk {}: {} of A into UB region {}", c, plural_range(m0, rows, "row"),
                            c % 2));
    ops.push(Opcode::RHM, 0, m0 * kt, (c % 2) * ub_a_region, kt * rows);
  };
  // The output of one column tile (`slot`: its accumulator and UB region).
  struct PendingOutput {
    std::uint64_t chunk, u, acc_base, rows, slot;
  };
  const auto drain = [&](const PendingOutput& p) {
    const std::uint64_t m0 = p.chunk * mc;
    const std::uint64_t col0 = p.u * n;
    ops.comment(fmt::format("output: C {}, {}", plural_range(m0, p.rows, "row"),
                            plural_range(col0, std::min(n_out, col0 + n) - col0, "column")));
    const std::uint64_t host = plan.c_host_row + (p.u * m + m0) * rows_per_c;
    if (!int8_out) {
      ops.push(Opcode::WHM, isa::kFlagWhmAcc, p.acc_base, host, p.rows);
    } else {
      const std::uint64_t ub = ub_out_base + p.slot * mc;
      ops.push(Opcode::ACT, act_flags(spec.act), p.acc_base, ub, p.rows).requant = spec.requant;
      ops.push(Opcode::WHM, 0, ub, host, p.rows);
    }
  };

  load_chunk(0);
  std::optional<PendingOutput> pending;
  std::uint64_t column_tiles_done = 0;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) load_chunk(c + 1);
    const std::uint64_t rows = std::min(mc, m - c * mc);
    const std::uint64_t ub_base = (c % 2) * ub_a_region;
    for (std::uint64_t u = 0; u < nt; ++u, ++column_tiles_done) {
      const std::uint64_t slot = column_tiles_done % 2;
      const std::uint64_t acc_base = slot * mc;
      ops.comment(fmt::format("chunk {}, column tile {}: ACC region {}", c, u, slot));
      for (std::uint64_t t = 0; t < kt; ++t)
        ops.push(Opcode::MMC,
                 static_cast<std::uint8_t>(isa::kFlagMmcSwitch | (t == 0 ? isa::kFlagMmcOverwrite : 0)),
                 ub_base + t * rows, acc_base, rows)
            .tile = u * kt + t;
      if (pending) drain(*pending);
      pending = PendingOutput{c, u, acc_base, rows, slot};
    }
  }
  drain(*pending);
  return ops;
}

}  // namespace tpu::compiler
