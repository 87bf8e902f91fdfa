// The TPUv1 counters (the rows of the paper's Table 3) on programs whose
// every cycle the document's closed forms place: docs/microarchitecture.md,
// "Closed forms" and "The TPUv1 counters". Expected values are derived here
// from those sections; the model is only run and observed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/tpu.h"
#include "model_test_support.h"
#include "perf_recount.h"

namespace {

using namespace tpu;
using model::PerfCounters;
using model::RunLog;
using testing::Cycle;
using testing::for_each_config;


Cycle tile_cycles(const ArchConfig& c) { return ceil_div(c.array_n * c.array_n, c.weight_bytes_per_cycle); }

// Cycles x..y (0 when empty).
Cycle span(Cycle x, Cycle y) { return y >= x ? y - x + 1 : 0; }

RunLog run(const ArchConfig& cfg, const std::string& src, model::Memories& mem, const isa::Program** out = nullptr) {
  static isa::Program prog;
  prog = testing::assemble_for(cfg, src, true, "perf.s");
  if (out) *out = &prog;
  return testing::run_to_halt(cfg, prog, mem);
}

// Tile t all ones.
void fill_tile(model::Memories& mem, std::uint64_t t) {
  std::fill_n(mem.weights.row(t), mem.weights.width(), std::int8_t{1});
}

void check_counters(const RunLog& log, const PerfCounters& e) {
  const PerfCounters& p = log.stats.tpuv1;
  CHECK(p.array_active_cycles == e.array_active_cycles);
  CHECK(p.weight_stall_cycles == e.weight_stall_cycles);
  CHECK(p.weight_shift_cycles == e.weight_shift_cycles);
  CHECK(p.non_matrix_cycles == e.non_matrix_cycles);
  CHECK(p.raw_stall_cycles == e.raw_stall_cycles);
  CHECK(p.input_data_stall_cycles == e.input_data_stall_cycles);
  CHECK(p.useful_macs == e.useful_macs);
  CHECK(p.unused_macs == e.unused_macs);
  // Rows 1, 4, 5 and 6 of the paper's table partition the cycles.
  CHECK(p.array_active_cycles + p.weight_stall_cycles + p.weight_shift_cycles + p.non_matrix_cycles ==
        log.stats.cycles);
}

}  // namespace

TEST_CASE("TPUv1 counters: RW, MMC.S, HLT waits D_w for weight memory and N for the shift",
          "[perf]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = cfg.weight_latency + tile_cycles(cfg);
    for (Cycle b : {Cycle{1}, n, 3 * n + 2}) {
      model::Memories mem(cfg);
      fill_tile(mem, 0);
      const RunLog log = run(cfg, "RW 0\nMMC.S 0, 0, " + std::to_string(b) + "\nHLT\n", mem);
      // RW at 0 completes at D_w. The MMC.S issues at 1 and waits in the
      // matrix unit: in 2..D_w for weight memory, then D_w + 1 .. D_w + N
      // while the tile shifts into the shadow and one more cycle for the
      // unit to see it loaded; it starts at D_w + N + 2 and the run takes
      // D_w + B + 3N + 3.
      PerfCounters e;
      e.array_active_cycles = b;
      e.weight_stall_cycles = dw - 1;
      e.weight_shift_cycles = n + 1;
      e.non_matrix_cycles = (dw + b + 3 * n + 3) - b - dw - n;
      e.useful_macs = b * n * n;
      check_counters(log, e);
    }
  });
}

TEST_CASE("TPUv1 counters: useful MACs count the tile's nonzero rows and columns", "[perf]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle b = 5;
    for (const auto& [r, c] : {std::pair<Cycle, Cycle>{1, 1}, {n / 2, n - 1}, {n, 2}, {n, n}}) {
      CAPTURE(r, c);
      model::Memories mem(cfg);
      // Tile 1: W[k][j] nonzero on k < r, j < c, with zeros scattered inside
      // that block (a row or column with one nonzero weight is used).
      std::int8_t* w = mem.weights.row(1);
      for (Cycle k = 0; k < r; ++k)
        for (Cycle j = 0; j < c; ++j) w[k * n + j] = static_cast<std::int8_t>((k == j || j == 0 || k == 0) ? 3 : 0);
      // The MMC before any switch uses the reset weights (all zero): its
      // MACs are all unused.
      const RunLog log = run(cfg, "MMC 0, 0, 2\nRW 1\nMMC.S 0, 0, 5\nMMC 0, 0, 5\nHLT\n", mem);
      CHECK(log.stats.tpuv1.useful_macs == 2 * b * r * c);
      CHECK(log.stats.tpuv1.unused_macs == (2 + 2 * b) * n * n - 2 * b * r * c);
    }
  });
}

TEST_CASE("TPUv1 counters: useful MACs count scattered nonzero rows and columns, every byte lane", "[perf]") {
  // The rows and columns used are scattered over the tile (every byte lane
  // of an 8-byte word, and the lanes past the last whole word when N is not a
  // multiple of 8), and the weights include -128 (0x80) and 1; each used row
  // and each used column holds at least one nonzero weight, every other
  // weight is 0. Expected: |rows| * |columns| per row the MMC reads.
  for_each_config([](const ArchConfig& cfg) {
    const std::size_t n = cfg.array_n;
    for (const std::size_t step : {std::size_t{1}, std::size_t{3}, std::size_t{7}}) {
      CAPTURE(n, step);
      std::vector<std::size_t> rows, cols;
      for (std::size_t k = step % n; k < n; k += step + 1) rows.push_back(k);
      for (std::size_t j = (step + 1) % n; j < n; j += step) cols.push_back(j);
      model::Memories mem(cfg);
      std::int8_t* w = mem.weights.row(1);
      // Used row i meets used column i (mod |columns|) and, past the
      // columns, column i mod |columns| again, so each of both is covered.
      const std::size_t m = std::max(rows.size(), cols.size());
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t k = rows[i % rows.size()], j = cols[i % cols.size()];
        w[k * n + j] = static_cast<std::int8_t>(i % 2 ? -128 : 1);
      }
      const Cycle b = 3;
      const RunLog log = run(cfg, "RW 1\nMMC.S 0, 0, 3\nHLT\n", mem);
      CHECK(log.stats.tpuv1.useful_macs == b * rows.size() * cols.size());
    }
  });
}

TEST_CASE("TPUv1 counters: an MMC waiting for the host DMA's rows is an input data stall", "[perf]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (Cycle rows : {Cycle{1}, 3 * n}) {
      model::Memories mem(cfg);
      fill_tile(mem, 0);
      const std::string b = std::to_string(rows);
      const RunLog log = run(cfg, "RHM 0, 0, " + b + "\nRW 0\nMMC.S 0, 0, " + b + "\nHLT\n", mem);
      // RHM at 0 completes at d_h = Lh + ceil(B*N/Bh); the MMC.S reads its
      // rows: a RAW stall in 2..d_h, all of it an input data stall. RW at 1
      // completes at d_w = 1 + Lw + T; the shadow is loaded at the start of
      // d_w + 1 + N. The MMC.S issues at d_h + 1 and starts at
      // s = max(d_h + 2, d_w + N + 2), waiting in the matrix unit from
      // d_h + 2 on: for weight memory up to d_w, for the shift after.
      const Cycle d_h = cfg.host_latency + ceil_div(rows * n, cfg.host_bytes_per_cycle);
      const Cycle d_w = 1 + cfg.weight_latency + tile_cycles(cfg);
      const Cycle s = std::max(d_h + 2, d_w + n + 2);
      const Cycle cycles = s + rows + 2 * n + 1;
      PerfCounters e;
      e.array_active_cycles = rows;
      e.input_data_stall_cycles = span(2, d_h);
      e.weight_stall_cycles = span(d_h + 2, std::min(s - 1, d_w));
      e.weight_shift_cycles = span(std::max(d_h + 2, d_w + 1), s - 1);
      e.non_matrix_cycles = cycles - rows - e.weight_stall_cycles - e.weight_shift_cycles;
      e.useful_macs = rows * n * n;
      CHECK(log.stats.cycles == cycles);
      check_counters(log, e);
    }
  });
}

TEST_CASE("TPUv1 counters: an ACT waiting for the array's results is a RAW stall while the array drains",
          "[perf]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = cfg.weight_latency + tile_cycles(cfg);
    const Cycle b = 2 * n + 1;
    model::Memories mem(cfg);
    fill_tile(mem, 0);
    const std::string rows = std::to_string(b);
    const RunLog log = run(cfg, "RW 0\nMMC.S 0, 0, " + rows + "\nACT 0, 100, " + rows + "\nHLT\n", mem);
    // MMC.S issues at 1, waits in the matrix unit in 2 .. s - 1 (weight
    // memory up to D_w, the shift after), reads rows in s .. s + B - 1 with
    // s = D_w + N + 2, and completes at d_m = s + B + 2N - 1; the ACT
    // reading its accumulators stalls in 2 .. d_m: its cycles that are
    // neither the wait for weights nor active are the last 2N, a RAW stall.
    // The ACT issues at d_m + 1 and completes at d_m + 1 + B + A; HLT follows.
    const Cycle s = dw + n + 2;
    const Cycle d_m = s + b + 2 * n - 1;
    const Cycle cycles = d_m + 1 + b + cfg.act_latency + 2;
    PerfCounters e;
    e.array_active_cycles = b;
    e.weight_stall_cycles = dw - 1;
    e.weight_shift_cycles = n + 1;
    e.raw_stall_cycles = 2 * n;
    e.non_matrix_cycles = cycles - b - dw - n;
    e.useful_macs = b * n * n;
    CHECK(log.stats.cycles == cycles);
    check_counters(log, e);
  });
}

TEST_CASE("TPUv1 counters: the stall runs and the counters match a cycle-by-cycle recount on "
          "compiled-style chains",
          "[perf]") {
  // Several tiles streaming behind MMC.S chains of short and long passes
  // (short passes expose the shift, FIFO-full stalls hold RWs back).
  for_each_config([](const ArchConfig& cfg) {
    for (Cycle b : {Cycle{2}, Cycle{cfg.array_n * 3}}) {
      model::Memories mem(cfg);
      for (std::uint64_t t = 0; t < 8; ++t) fill_tile(mem, t);
      std::string src = "RHM 0, 0, " + std::to_string(b) + "\n";
      // Two tiles ahead (the shadow and the FIFO), then a switch and an RW in turn.
      src += "RW 0\nRW 1\n";
      for (int t = 0; t < 8; ++t) {
        src += "MMC.S 0, 0, " + std::to_string(b) + "\n";
        if (t + 2 < 8) src += "RW " + std::to_string(t + 2) + "\n";
      }
      src += "ACT 0, 2000, " + std::to_string(b) + "\nHLT\n";
      const isa::Program* prog = nullptr;
      const RunLog log = run(cfg, src, mem, &prog);
      const PerfCounters expected = testing::recount_perf(cfg, *prog, log, mem.weights.row(0));
      CHECK(testing::same_counters(log.stats.tpuv1, expected));
      CHECK(log.stats.tpuv1.array_active_cycles == log.stats.array_active_cycles);
    }
  });
}
