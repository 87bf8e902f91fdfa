// Timing of the SystemC model against docs/microarchitecture.md, cycle for
// cycle.
//
// Every expected cycle in this file is derived here, from the document alone:
// its clocking conventions (issue c, start s = c + 1, completion d), the
// controller's stall rules and their order (hazard, unit busy, FIFO full,
// weights not ready, drain), the unit sections and the "Closed forms" table.
// Nothing is taken from src/model/timing.h or any other model code; the model
// is only run and observed (retire records, statistics, memories).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "asm/assembler.h"
#include "model/tpu.h"
#include "model_test_support.h"

namespace {

using namespace tpu;
using model::RunLog;
using model::StallCause;
using testing::check_controller;
using testing::check_halt;
using testing::check_stalls;
using testing::check_mmc;
using testing::check_unit;
using testing::Cycle;
using testing::Stalls;
using testing::for_each_config;

// ---- Configurations ---------------------------------------------------------

// ---- The document's formulas ------------------------------------------------


// Host DMA of `rows` rows of `bytes_per_row` bytes: D_h = Lh + ceil(rows*b/Bh).
Cycle host_duration(const ArchConfig& c, Cycle rows, Cycle bytes_per_row) {
  return c.host_latency + ceil_div(rows * bytes_per_row, c.host_bytes_per_cycle);
}

// Cycles the weight channel streams one tile: T = ceil(N*N/Bw).
Cycle weight_tile_cycles(const ArchConfig& c) {
  return ceil_div(c.array_n * c.array_n, c.weight_bytes_per_cycle);
}

// One weight tile on an idle channel: D_w = Lw + T.
Cycle weight_duration(const ArchConfig& c) {
  return c.weight_latency + ceil_div(c.array_n * c.array_n, c.weight_bytes_per_cycle);
}

// One instruction line with the two facts the document gives about it when
// its unit is idle and its inputs are ready: its completion cycle as a
// function of its issue cycle c (d = s + D - 1 with s = c + 1), and the first
// cycle its unit accepts the next instruction ("Units" table: from d for the
// DMAs, from c + rows for the array and the activation unit).
struct Op {
  std::string text;
  std::function<Cycle(Cycle)> completion;
  std::function<Cycle(Cycle)> accept;
};

std::string line(const std::string& mnemonic, std::initializer_list<Cycle> operands = {}) {
  std::ostringstream s;
  s << mnemonic;
  const char* sep = " ";
  for (Cycle v : operands) {
    s << sep << v;
    sep = ", ";
  }
  s << '\n';
  return s.str();
}

std::string nops(Cycle k) {
  std::string s;
  for (Cycle i = 0; i < k; ++i) s += "NOP\n";
  return s;
}

Op host_op(const std::string& text, Cycle duration) {
  return {text, [duration](Cycle c) { return c + duration; },
          [duration](Cycle c) { return c + duration; }};
}

// RHM h, u, R: d = c + Lh + ceil(R*N/Bh).
Op rhm(const ArchConfig& cfg, Cycle host, Cycle ub, Cycle rows) {
  return host_op(line("RHM", {host, ub, rows}), host_duration(cfg, rows, cfg.array_n));
}

// WHM u, h, R: d = c + Lh + ceil(R*N/Bh).
Op whm(const ArchConfig& cfg, Cycle ub, Cycle host, Cycle rows) {
  return host_op(line("WHM", {ub, host, rows}), host_duration(cfg, rows, cfg.array_n));
}

// WHM.A a, h, R: d = c + Lh + ceil(4*R*N/Bh).
Op whm_acc(const ArchConfig& cfg, Cycle acc, Cycle host, Cycle rows) {
  return host_op(line("WHM.A", {acc, host, rows}), host_duration(cfg, rows, 4 * cfg.array_n));
}

// RW t: d = c + D_w.
// MMC of B rows with its weights ready: d = c + B + 2N; next MMC at c + B.
Op mmc(const ArchConfig& cfg, Cycle ub, Cycle acc, Cycle rows, const std::string& flags = "") {
  const Cycle n = cfg.array_n;
  return {line("MMC" + flags, {ub, acc, rows}), [rows, n](Cycle c) { return c + rows + 2 * n; },
          [rows](Cycle c) { return c + rows; }};
}

// ACT of B rows: d = c + B + A; next ACT at c + B.
Op act(const ArchConfig& cfg, Cycle acc, Cycle ub, Cycle rows, const std::string& flags = "") {
  const Cycle a = cfg.act_latency;
  return {line("ACT" + flags, {acc, ub, rows}), [rows, a](Cycle c) { return c + rows + a; },
          [rows](Cycle c) { return c + rows; }};
}

// ---- Running programs -------------------------------------------------------

isa::Program assemble(const ArchConfig& cfg, const std::string& src) {
  return testing::assemble_for(cfg, src, true, "timing.s");
}

// Runs `src` on `cfg` starting from `mem`; the run must halt without a fault
// and retire every instruction, in program order.
RunLog run(const ArchConfig& cfg, const std::string& src, model::Memories& mem) {
  return testing::run_to_halt(cfg, assemble(cfg, src), mem);
}

RunLog run(const ArchConfig& cfg, const std::string& src) {
  model::Memories mem(cfg);
  return run(cfg, src, mem);
}

// Runs `src`, which must stop on a fault.
model::Fault run_to_fault(const ArchConfig& cfg, const std::string& src, RunLog& log) {
  const isa::Program prog = assemble(cfg, src);
  model::Memories mem(cfg);
  log = model::run_program(cfg, prog, mem);
  REQUIRE(log.fault);
  CHECK_FALSE(log.halted);
  return *log.fault;
}


// ---- Reference data ----------------------------------------------------------

template <typename T>
void fill_random(model::RowMemory<T>& m, Cycle row, Cycle rows, std::mt19937& rng, int lo, int hi) {
  std::uniform_int_distribution<int> d(lo, hi);
  for (Cycle r = row; r < row + rows; ++r)
    for (Cycle j = 0; j < m.width(); ++j) m.row(r)[j] = static_cast<T>(d(rng));
}

void fill_int8(model::RowMemory<std::int8_t>& m, Cycle row, Cycle rows, std::mt19937& rng) {
  fill_random(m, row, rows, rng, -128, 127);
}

// (x . W)[j] = sum over k of x[k] * W[k][j] (isa.md, MMC); tile row-major.
std::int32_t dot(const std::int8_t* x, const std::int8_t* tile, Cycle n, Cycle j) {
  std::int32_t s = 0;
  for (Cycle k = 0; k < n; ++k) s += std::int32_t{x[k]} * std::int32_t{tile[k * n + j]};
  return s;
}

// ACC rows [acc, acc + rows) += or = UB rows [ub, ub + rows) . W (isa.md, MMC).
void ref_mmc(std::vector<std::vector<std::int32_t>>& acc_rows, const model::Memories& mem,
             Cycle tile, Cycle ub, Cycle acc, Cycle rows, bool overwrite, Cycle n) {
  for (Cycle i = 0; i < rows; ++i)
    for (Cycle j = 0; j < n; ++j) {
      const std::int32_t p = dot(mem.ub.row(ub + i), mem.weights.row(tile), n, j);
      std::int32_t& a = acc_rows[acc + i][j];
      a = overwrite ? p : a + p;
    }
}

std::vector<std::vector<std::int32_t>> acc_snapshot(const model::Memories& mem, Cycle rows) {
  std::vector<std::vector<std::int32_t>> v(rows);
  for (Cycle r = 0; r < rows; ++r) v[r].assign(mem.acc.row(r), mem.acc.row(r) + mem.acc.width());
  return v;
}

template <typename A, typename B>
bool same_row(const A* a, const B* b, Cycle n) {
  return std::equal(a, a + n, b);
}

std::int8_t sat8(std::int32_t v) { return static_cast<std::int8_t>(std::clamp(v, -128, 127)); }

// ---- Checks of one two-instruction program ----------------------------------

// `first` then `second` of *different* units, then HLT, on an idle machine.
// With a hazard between them the second issues at d_first + 1 and the stall
// cycles 1 .. d_first are counted under `hazard`; without, it issues at 1.
void check_dependent_pair(const ArchConfig& cfg, const Op& first, const Op& second,
                          std::optional<StallCause> hazard) {
  const std::string src = first.text + second.text + "HLT\n";
  INFO("program:\n" << src);
  const RunLog log = run(cfg, src);
  const Cycle d0 = first.completion(0);
  const Cycle c1 = hazard ? d0 + 1 : 1;
  const Cycle d1 = second.completion(c1);
  const Cycle c_hlt = std::max(d0, d1) + 1;
  check_unit(log, 0, 0, d0);
  check_unit(log, 1, c1, d1);
  check_halt(log, 2, c_hlt);
  Stalls s{{StallCause::Drain, c_hlt - c1 - 1}};
  if (hazard) s[*hazard] = d0;
  check_stalls(log, s);
}

// `first` then `second` of the *same* unit, then HLT, on an idle machine: the
// second issues when the unit accepts it (never later, whatever their ranges)
// and the wait is counted as unit busy. Returns the log for data checks.
RunLog check_same_unit_pair(const ArchConfig& cfg, const Op& first, const Op& second,
                            model::Memories& mem) {
  const std::string src = first.text + second.text + "HLT\n";
  INFO("program:\n" << src);
  RunLog log = run(cfg, src, mem);
  const Cycle d0 = first.completion(0);
  const Cycle c1 = std::max<Cycle>(1, first.accept(0));
  const Cycle d1 = second.completion(c1);
  const Cycle c_hlt = std::max(d0, d1) + 1;
  check_unit(log, 0, 0, d0);
  check_unit(log, 1, c1, d1);
  check_halt(log, 2, c_hlt);
  check_stalls(log, {{StallCause::UnitBusy, c1 - 1}, {StallCause::Drain, c_hlt - c1 - 1}});
  return log;
}

}  // namespace

// ============================================================================
// Single instructions on an idle machine
// ============================================================================

TEST_CASE("Controller-only instructions start and complete in their issue cycle", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const std::string src = "NOP\nSETQ 3, 2, -1\nSYNC\nNOP\nSETQ 1, 0, 0\nHLT\n";
    INFO(src);
    const RunLog log = run(cfg, src);
    for (std::size_t pc = 0; pc < 5; ++pc) check_controller(log, pc, pc);
    check_halt(log, 5, 5);
    check_stalls(log, {});
    CHECK(log.stats.instructions == 6);
  });
}

TEST_CASE("RHM, WHM and WHM.A on an idle machine complete at c + Lh + ceil(rows*b/Bh)",
          "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (Cycle lead : {0, 3}) {
      for (Cycle rows : {1, 2, 3, 7, 13}) {
        // b = N for RHM and WHM, 4N for WHM.A.
        const std::vector<std::pair<Op, Cycle>> ops = {{rhm(cfg, 5, 7, rows), n},
                                                       {whm(cfg, 7, 5, rows), n},
                                                       {whm_acc(cfg, 7, 5, rows), 4 * n}};
        for (const auto& [op, b] : ops) {
          const std::string src = nops(lead) + op.text + "HLT\n";
          INFO("program:\n" << src);
          model::Memories mem(cfg);
          std::mt19937 rng(static_cast<unsigned>(rows * 31 + lead));
          fill_int8(mem.host, 5, 4 * rows, rng);
          fill_int8(mem.ub, 7, rows, rng);
          fill_random(mem.acc, 7, rows, rng, -100000, 100000);
          const model::Memories before = mem;
          const RunLog log = run(cfg, src, mem);

          const Cycle c = lead;
          const Cycle d = c + cfg.host_latency + ceil_div(rows * b, cfg.host_bytes_per_cycle);
          REQUIRE(op.completion(c) == d);
          for (std::size_t pc = 0; pc < lead; ++pc) check_controller(log, pc, pc);
          check_unit(log, lead, c, d);
          check_halt(log, lead + 1, d + 1);
          check_stalls(log, {{StallCause::Drain, d - c}});

          // And the transfer moved the right bytes.
          if (op.text.rfind("RHM", 0) == 0) {
            for (Cycle r = 0; r < rows; ++r)
              CHECK(same_row(mem.ub.row(7 + r), before.host.row(5 + r), n));
          } else if (op.text.rfind("WHM.A", 0) == 0) {
            for (Cycle r = 0; r < rows; ++r) {
              const auto* bytes = reinterpret_cast<const std::uint8_t*>(mem.host.row(5 + 4 * r));
              for (Cycle j = 0; j < n; ++j) {
                std::uint32_t v = 0;
                for (unsigned k = 0; k < 4; ++k) v |= std::uint32_t{bytes[4 * j + k]} << (8 * k);
                CHECK(static_cast<std::int32_t>(v) == before.acc.row(7 + r)[j]);
              }
            }
          } else {
            for (Cycle r = 0; r < rows; ++r)
              CHECK(same_row(mem.host.row(5 + r), before.ub.row(7 + r), n));
          }
        }
      }
    }
  });
}

TEST_CASE("RW on an idle machine completes at c + Lw + ceil(N*N/Bw)", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    for (Cycle lead : {0, 2}) {
      const std::string src = nops(lead) + "RW 3\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      const Cycle c = lead;
      const Cycle d =
          c + cfg.weight_latency + ceil_div(cfg.array_n * cfg.array_n, cfg.weight_bytes_per_cycle);
      // The tile then enters the FIFO and the shadow, but HLT only waits for
      // instructions in flight: the RW is in flight until d.
      check_unit(log, lead, c, d);
      check_halt(log, lead + 1, d + 1);
      check_stalls(log, {{StallCause::Drain, d - c}});
    }
  });
}

TEST_CASE("ACT on an idle machine completes at c + B + A", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    for (Cycle lead : {0, 2}) {
      for (Cycle b : {1, 2, 5, 17}) {
        for (const char* flags : {"", ".R", ".Q", ".T"}) {
          const std::string src =
              nops(lead) + "SETQ 3, 1, 2\n" + line(std::string("ACT") + flags, {4, 9, b}) + "HLT\n";
          INFO(src);
          const RunLog log = run(cfg, src);
          const Cycle c = lead + 1;
          const Cycle d = c + b + cfg.act_latency;
          check_controller(log, lead, lead);
          check_unit(log, lead + 1, c, d);
          check_halt(log, lead + 2, d + 1);
          check_stalls(log, {{StallCause::Drain, d - c}});
        }
      }
    }
    {
      INFO("a SETQ after an ACT does not affect it (registers read at issue)");
      const Cycle n = cfg.array_n;
      const std::string src = "ACT 0, 10, 4\nSETQ 100, 0, 0\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      std::mt19937 rng(static_cast<unsigned>(n));
      fill_random(mem.acc, 0, 4, rng, -300, 300);
      const RunLog log = run(cfg, src, mem);
      const Cycle d = 4 + cfg.act_latency;
      check_unit(log, 0, 0, d);
      check_controller(log, 1, 1);
      check_halt(log, 2, d + 1);
      check_stalls(log, {{StallCause::Drain, d - 1}});
      for (Cycle r = 0; r < 4; ++r)
        for (Cycle j = 0; j < n; ++j) CHECK(mem.ub.row(10 + r)[j] == sat8(mem.acc.row(r)[j]));
    }
  });
}

TEST_CASE("MMC with its weights ready completes at c + B + 2N", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (Cycle b : {1, 2, 4, 16, 35}) {
      CAPTURE(b);
      {
        INFO("MMC without .S uses the current tile (zero at reset), always ready");
        for (const char* flags : {"", ".O"}) {
          const std::string src = "NOP\n" + line(std::string("MMC") + flags, {3, 6, b}) + "HLT\n";
          INFO(src);
          const RunLog log = run(cfg, src);
          check_unit(log, 1, 1, 1 + b + 2 * n);
          check_halt(log, 2, 1 + b + 2 * n + 1);
          check_stalls(log, {{StallCause::Drain, b + 2 * n}});
        }
      }
      {
        INFO("MMC.S long after its tile was loaded");
        // RW at 0 completes at D_w; SYNC waits for it and issues at D_w + 1;
        // the tile is loaded at the start of D_w + 1 + N; after N NOPs the
        // MMC.S issues at D_w + N + 2 without waiting.
        const std::string src = "RW 0\nSYNC\n" + nops(n) + line("MMC.SO", {0, 0, b}) + "HLT\n";
        INFO(src);
        model::Memories mem(cfg);
        std::mt19937 rng(static_cast<unsigned>(b + n));
        fill_int8(mem.weights, 0, 1, rng);
        fill_int8(mem.ub, 0, b, rng);
        auto expect = acc_snapshot(mem, b);
        ref_mmc(expect, mem, 0, 0, 0, b, true, n);
        const RunLog log = run(cfg, src, mem);
        const Cycle dw = weight_duration(cfg);
        const Cycle c_sync = dw + 1;
        const Cycle c = c_sync + n + 1;
        REQUIRE(c >= dw + 1 + n);  // loaded at the start of D_w + 1 + N
        check_unit(log, 0, 0, dw);
        check_controller(log, 1, c_sync);
        check_unit(log, n + 2, c, c + b + 2 * n);
        check_halt(log, n + 3, c + b + 2 * n + 1);
        check_stalls(log, {{StallCause::Drain, dw + b + 2 * n}});
        CHECK(acc_snapshot(mem, b) == expect);
      }
    }
  });
}

TEST_CASE("RW, MMC.S, HLT takes D_w + B + 3N + 3 cycles", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = weight_duration(cfg);
    for (Cycle lead : {0, 4}) {
      for (Cycle b : {Cycle{1}, Cycle{7}, n, 2 * n + 1, 3 * n + 2}) {
        const std::string src = nops(lead) + "RW 0\n" + line("MMC.S", {0, 0, b}) + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        // RW at c = lead completes at c + D_w; the tile is in the FIFO at
        // c + D_w + 1, loads from then on and is loaded at the start of
        // c + 1 + Lw + ceil(N*N/Bw) + N. The MMC.S issues at c + 1, waits
        // in the matrix unit and starts the cycle after the tile is loaded.
        const Cycle c_rw = lead;
        const Cycle s_m = c_rw + 1 + dw + n + 1;
        const Cycle d_m = s_m + b + 2 * n - 1;
        check_unit(log, lead, c_rw, c_rw + dw);
        check_mmc(log, lead + 1, c_rw + 1, s_m, d_m);
        check_halt(log, lead + 2, d_m + 1);
        CHECK(log.stats.cycles == lead + dw + b + 3 * n + 3);
        // HLT waits from c + 2 to d_m; the controller never stalls for weights.
        check_stalls(log, {{StallCause::Drain, d_m - c_rw - 1}});
      }
    }
  });
}

// ============================================================================
// Hazards between units
// ============================================================================

TEST_CASE("RAW through the UB: the reader issues at the writer's completion + 1", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    // Writers of UB rows 10..15; MMC readers write ACC rows 100.. (no other
    // conflict with either writer, which reads host rows or ACC rows 0..5).
    for (const Op& writer : {rhm(cfg, 0, 10, 6), act(cfg, 0, 10, 6)}) {
      const std::vector<std::pair<Op, bool>> readers = {
          {mmc(cfg, 10, 100, 6), true}, {mmc(cfg, 15, 100, 4), true}, {mmc(cfg, 0, 100, 11), true},
          {mmc(cfg, 12, 100, 1), true}, {mmc(cfg, 4, 100, 6), false}, {mmc(cfg, 16, 100, 3), false},
      };
      for (const auto& [reader, overlaps] : readers)
        check_dependent_pair(cfg, writer, reader,
                             overlaps ? std::optional(StallCause::Raw) : std::nullopt);
    }
  });
}

TEST_CASE("RAW through the UB waits for the last of several writers", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    // RHM 0, 0, 4 and RHM 4, 4, R2 (host DMA, back to back); MMC 0, 100, 8
    // reads rows written by both.
    for (Cycle r2 : {1, 5}) {
      const Op w0 = rhm(cfg, 0, 0, 4);
      const Op w1 = rhm(cfg, 4, 4, r2);
      const Op reader = mmc(cfg, 0, 100, 8);
      const std::string src = w0.text + w1.text + reader.text + "HLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      const Cycle d0 = w0.completion(0);
      const Cycle c1 = std::max<Cycle>(1, w0.accept(0));
      const Cycle d1 = w1.completion(c1);
      const Cycle c2 = d1 + 1;
      const Cycle d2 = reader.completion(c2);
      check_unit(log, 0, 0, d0);
      check_unit(log, 1, c1, d1);
      check_unit(log, 2, c2, d2);
      check_halt(log, 3, d2 + 1);
      check_stalls(log, {{StallCause::UnitBusy, c1 - 1},
                         {StallCause::Raw, c2 - c1 - 1},
                         {StallCause::Drain, d2 - c2}});
    }
  });
}

TEST_CASE("RAW through the ACC: the reader issues at the MMC's completion + 1", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    // MMC 0, 20, 6 reads UB rows 0..5 and writes ACC rows 20..25. ACT readers
    // write UB rows 50.., WHM.A readers write host rows.
    const Op writer = mmc(cfg, 0, 20, 6);
    const std::vector<std::pair<Op, bool>> readers = {
        {act(cfg, 20, 50, 6), true},     {act(cfg, 25, 50, 2), true},
        {act(cfg, 14, 50, 7), true},     {act(cfg, 14, 50, 6), false},
        {act(cfg, 26, 50, 3), false},    {whm_acc(cfg, 20, 0, 6), true},
        {whm_acc(cfg, 19, 0, 2), true},  {whm_acc(cfg, 26, 0, 1), false},
        {whm_acc(cfg, 14, 0, 6), false},
    };
    for (const auto& [reader, overlaps] : readers)
      check_dependent_pair(cfg, writer, reader,
                           overlaps ? std::optional(StallCause::Raw) : std::nullopt);
  });
}

TEST_CASE("WAR: a writer waits until the in-flight reader of its rows completes", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    {
      INFO("RHM overwriting UB rows an in-flight MMC reads");
      // MMC 0, 20, 6 reads UB 0..5 (and is in flight until c + 6 + 2N).
      const Op reader = mmc(cfg, 0, 20, 6);
      for (const auto& [writer, overlaps] : std::vector<std::pair<Op, bool>>{
               {rhm(cfg, 0, 0, 6), true}, {rhm(cfg, 0, 5, 3), true}, {rhm(cfg, 0, 6, 3), false}}) {
        check_dependent_pair(cfg, reader, writer,
                             overlaps ? std::optional(StallCause::War) : std::nullopt);
      }
    }
    {
      INFO("MMC overwriting ACC rows an in-flight ACT reads");
      // ACT 0, 10, 6 reads ACC 0..5, writes UB 10..15; MMCs read UB 30...
      const Op reader = act(cfg, 0, 10, 6);
      for (const auto& [writer, overlaps] :
           std::vector<std::pair<Op, bool>>{{mmc(cfg, 30, 0, 6), true},
                                            {mmc(cfg, 30, 5, 2), true},
                                            {mmc(cfg, 30, 6, 4), false}}) {
        check_dependent_pair(cfg, reader, writer,
                             overlaps ? std::optional(StallCause::War) : std::nullopt);
      }
    }
    {
      INFO("ACT overwriting UB rows an in-flight WHM reads");
      // WHM 10, 0, 6 reads UB 10..15; ACTs read ACC 0...
      const Op reader = whm(cfg, 10, 0, 6);
      for (const auto& [writer, overlaps] :
           std::vector<std::pair<Op, bool>>{{act(cfg, 0, 10, 6), true},
                                            {act(cfg, 0, 15, 1), true},
                                            {act(cfg, 0, 16, 1), false},
                                            {act(cfg, 0, 4, 6), false}}) {
        check_dependent_pair(cfg, reader, writer,
                             overlaps ? std::optional(StallCause::War) : std::nullopt);
      }
    }
  });
}

TEST_CASE("WAW: a second writer of the same UB rows waits for the first", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    {
      INFO("ACT after RHM");
      const Op first = rhm(cfg, 0, 10, 6);  // writes UB 10..15
      for (const auto& [second, overlaps] :
           std::vector<std::pair<Op, bool>>{{act(cfg, 0, 10, 6), true},
                                            {act(cfg, 0, 12, 1), true},
                                            {act(cfg, 0, 16, 4), false},
                                            {act(cfg, 0, 0, 10), false}}) {
        check_dependent_pair(cfg, first, second,
                             overlaps ? std::optional(StallCause::Waw) : std::nullopt);
      }
    }
    {
      INFO("RHM after ACT");
      const Op first = act(cfg, 0, 10, 6);  // writes UB 10..15
      for (const auto& [second, overlaps] :
           std::vector<std::pair<Op, bool>>{{rhm(cfg, 0, 10, 6), true},
                                            {rhm(cfg, 0, 15, 9), true},
                                            {rhm(cfg, 0, 0, 10), false}}) {
        check_dependent_pair(cfg, first, second,
                             overlaps ? std::optional(StallCause::Waw) : std::nullopt);
      }
    }
  });
}

TEST_CASE("A cycle failing both the hazard and the unit-busy condition counts as a hazard",
          "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (Cycle r : {1, 8}) {
      for (Cycle b1 : {1, 5, 40}) {
        // RHM 0, 0, R; MMC 50, 0, B1; MMC 0, 100, 3; HLT. The second MMC reads
        // UB rows the RHM writes (RAW until d_h) and waits for the first MMC
        // (array busy until 1 + B1). In its stall window [2, c2 - 1] the
        // cycles up to d_h are hazards, the rest unit busy.
        const Op w = rhm(cfg, 0, 0, r);
        const Op m1 = mmc(cfg, 50, 0, b1);
        const Op m2 = mmc(cfg, 0, 100, 3);
        const std::string src = w.text + m1.text + m2.text + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        const Cycle dh = w.completion(0);
        const Cycle d1 = m1.completion(1);
        const Cycle c2 = std::max({dh + 1, m1.accept(1), Cycle{2}});
        const Cycle d2 = m2.completion(c2);
        const Cycle raw = dh >= 2 ? dh - 1 : 0;  // cycles 2 .. d_h (c2 > d_h)
        const Cycle c_hlt = std::max(d1, d2) + 1;
        check_unit(log, 0, 0, dh);
        check_unit(log, 1, 1, d1);
        check_unit(log, 2, c2, d2);
        check_halt(log, 3, c_hlt);
        CHECK(d2 == c2 + 3 + 2 * n);
        check_stalls(log, {{StallCause::Raw, raw},
                           {StallCause::UnitBusy, (c2 - 2) - raw},
                           {StallCause::Drain, c_hlt - c2 - 1}});
      }
    }
  });
}

// ============================================================================
// Same unit: never a hazard, only "unit busy"
// ============================================================================

TEST_CASE("Two MMCs accumulating into the same ACC rows issue back to back at c + B", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = weight_duration(cfg);
    for (Cycle b : {Cycle{1}, Cycle{3}, n + 1}) {
      for (const auto& [flags0, flags1] : std::vector<std::pair<std::string, std::string>>{
               {".S", ""}, {".SO", ""}, {".S", ".O"}}) {
        for (Cycle acc1 : {0, 1}) {
          // MMC.S 0, 0, B then MMC B, acc1, B: the second writes rows the
          // first writes (and, accumulating, reads them).
          const std::string src = "RW 0\n" + line("MMC" + flags0, {0, 0, b}) +
                                  line("MMC" + flags1, {b, acc1, b}) + "HLT\n";
          INFO(src);
          model::Memories mem(cfg);
          std::mt19937 rng(static_cast<unsigned>(b * 7 + acc1));
          fill_int8(mem.weights, 0, 1, rng);
          fill_int8(mem.ub, 0, 2 * b, rng);
          fill_random(mem.acc, 0, b + 1, rng, -1000000, 1000000);
          auto expect = acc_snapshot(mem, b + 1);
          ref_mmc(expect, mem, 0, 0, 0, b, flags0 == ".SO", n);
          ref_mmc(expect, mem, 0, b, acc1, b, flags1 == ".O", n);

          const RunLog log = run(cfg, src, mem);
          // The MMC.S issues at 1 and starts the cycle after tile 0 is
          // loaded (at the start of D_w + 1 + N); the MMC issues once it
          // reads its last row, at s0 + B - 1.
          const Cycle s0 = dw + n + 2;
          const Cycle c1 = s0 + b - 1;
          const Cycle d1 = c1 + b + 2 * n;
          check_unit(log, 0, 0, dw);
          check_mmc(log, 1, 1, s0, s0 + b + 2 * n - 1);
          check_unit(log, 2, c1, d1);
          check_halt(log, 3, d1 + 1);
          check_stalls(log, {{StallCause::UnitBusy, c1 - 2}, {StallCause::Drain, b + 2 * n}});
          CHECK(acc_snapshot(mem, b + 1) == expect);
        }
      }
    }
  });
}

TEST_CASE("Host DMA and activation instructions on the same rows never hazard-stall", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (Cycle rows : {1, 6}) {
      CAPTURE(rows);
      {
        INFO("WHM reading the UB rows an RHM writes issues at the RHM's d");
        model::Memories mem(cfg);
        std::mt19937 rng(static_cast<unsigned>(rows));
        fill_int8(mem.host, 0, rows, rng);
        const model::Memories before = mem;
        check_same_unit_pair(cfg, rhm(cfg, 0, 10, rows), whm(cfg, 10, 100, rows), mem);
        for (Cycle r = 0; r < rows; ++r)
          CHECK(same_row(mem.host.row(100 + r), before.host.row(r), n));
      }
      {
        INFO("RHM overwriting the UB rows a WHM reads issues at the WHM's d");
        model::Memories mem(cfg);
        std::mt19937 rng(static_cast<unsigned>(rows + 1));
        fill_int8(mem.ub, 10, rows, rng);
        fill_int8(mem.host, 200, rows, rng);
        const model::Memories before = mem;
        check_same_unit_pair(cfg, whm(cfg, 10, 0, rows), rhm(cfg, 200, 10, rows), mem);
        for (Cycle r = 0; r < rows; ++r) {
          CHECK(same_row(mem.host.row(r), before.ub.row(10 + r), n));
          CHECK(same_row(mem.ub.row(10 + r), before.host.row(200 + r), n));
        }
      }
      {
        INFO("ACT overwriting the UB rows of the previous ACT issues at c + B");
        model::Memories mem(cfg);
        std::mt19937 rng(static_cast<unsigned>(rows + 2));
        fill_random(mem.acc, 20, rows, rng, -300, 300);
        fill_random(mem.acc, 40, rows, rng, -300, 300);
        check_same_unit_pair(cfg, act(cfg, 20, 10, rows), act(cfg, 40, 10, rows), mem);
        // Reset requantization (M 1, S 0, Z 0): q(a) = sat8(a); writes land in
        // order, so the second ACT's rows remain.
        for (Cycle r = 0; r < rows; ++r)
          for (Cycle j = 0; j < n; ++j)
            CHECK(mem.ub.row(10 + r)[j] == sat8(mem.acc.row(40 + r)[j]));
      }
    }
  });
}

TEST_CASE("A busy unit takes its next instruction at d (DMAs) or c + B (array, activation)",
          "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (Cycle first_rows : {Cycle{1}, Cycle{5}, 2 * n + 1}) {
      CAPTURE(first_rows);
      const std::vector<std::pair<Op, Op>> pairs = {
          {rhm(cfg, 0, 0, first_rows), rhm(cfg, 100, 500, 3)},
          {rhm(cfg, 0, 0, first_rows), whm(cfg, 600, 300, 3)},
          {whm_acc(cfg, 0, 0, first_rows), rhm(cfg, 1000, 500, 2)},
          {mmc(cfg, 0, 0, first_rows), mmc(cfg, 500, 500, 3)},
          {mmc(cfg, 0, 0, first_rows, ".O"), mmc(cfg, 500, 500, 2, ".O")},
          {act(cfg, 0, 0, first_rows), act(cfg, 500, 500, 3, ".R")},
      };
      for (const auto& [first, second] : pairs) {
        model::Memories mem(cfg);
        check_same_unit_pair(cfg, first, second, mem);
      }
    }
    {
      INFO("RW then RW (FIFO depth >= 2): the channel takes the second request at once and");
      INFO("streams its tile right after the first (docs: back-to-back RWs, d = c_0 + Lw + k*T)");
      REQUIRE(cfg.fifo_depth >= 2);
      const Cycle t = weight_tile_cycles(cfg);
      const RunLog log = run(cfg, "RW 0\nRW 1\nHLT\n");
      check_unit(log, 0, 0, cfg.weight_latency + t);
      check_unit(log, 1, 1, cfg.weight_latency + 2 * t);
      check_halt(log, 2, cfg.weight_latency + 2 * t + 1);
      check_stalls(log, {{StallCause::Drain, cfg.weight_latency + 2 * t - 1}});
    }
  });
}

// ============================================================================
// Weight FIFO
// ============================================================================

TEST_CASE("FIFO full: an RW waits while tiles in the FIFO plus the RWs in flight equal F",
          "[timing]") {
  for_each_config([](ArchConfig cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = weight_duration(cfg);
    const Cycle t = weight_tile_cycles(cfg);
    const Cycle lw = cfg.weight_latency;

    {
      INFO("F = 1: RW 0; RW 1 - the second issues once the loader has popped tile 0");
      cfg.fifo_depth = 1;
      const std::string src = "RW 0\nRW 1\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      // Cycles 1 .. D_w: RW 0 in flight (1 = F); at the start of D_w + 1
      // tile 0 is in the FIFO (1 = F) and the loader pops it in that cycle
      // (shadow free), which the controller sees from D_w + 2. The channel is
      // idle again by then: RW 1 completes D_w after its issue.
      const Cycle c1 = dw + 2;
      check_unit(log, 0, 0, dw);
      check_unit(log, 1, c1, c1 + dw);
      check_halt(log, 2, c1 + dw + 1);
      check_stalls(log, {{StallCause::FifoFull, dw + 1}, {StallCause::Drain, dw}});
    }

    for (Cycle f : {2, 3, 5}) {
      CAPTURE(f);
      cfg.fifo_depth = f;
      if (dw + 2 <= f) continue;  // the closed forms below: RW F waits for the first pop
      {
        INFO("F + 1 RWs on an idle machine: F back to back, the last once tile 0 left for the shadow");
        std::string src;
        for (Cycle k = 0; k <= f; ++k) src += line("RW", {k});
        src += "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        // RW k < F issues at k (k RWs in flight, k < F) and, back to back on
        // the channel, completes at Lw + (k+1)*T. RW F needs tile 0 popped:
        // it issues at D_w + 2 (as with F = 1).
        for (Cycle k = 0; k < f; ++k) check_unit(log, k, k, lw + (k + 1) * t);
        const Cycle c_f = dw + 2;
        const Cycle d_f = std::max(c_f + 1 + lw, lw + f * t + 1) + t - 1;
        check_unit(log, f, c_f, d_f);
        check_halt(log, f + 1, d_f + 1);
        check_stalls(log, {{StallCause::FifoFull, c_f - f}, {StallCause::Drain, d_f - c_f}});
      }
      {
        INFO("F tiles queued behind a loaded shadow: the next RW waits for the loader");
        // RW 0; MMC.S 0, 0, BA; RW 1 .. RW F+1; MMC.S BA, 0, BB; RW F+2; HLT
        //
        // MMC.S A issues at 1 and waits in the matrix unit for tile 0 (in the
        // FIFO from D_w + 1, loaded at the start of D_w + 1 + N): it starts
        // at s_A = D_w + N + 2 and frees the reset set (no row used it) then.
        // RW k (k RWs issued before it) needs tiles_popped >= k - F + 1,
        // which the controller sees the cycle after the pop: RW 1 .. F-1
        // issue at 2 .. F, RW F once tile 0 was popped (at D_w + 1), RW F+1
        // once tile 1 was (at L_1 = max(d_1 + 1, s_A)). MMC.S B issues when
        // the array reads MMC.S A's last row, c_B = s_A + BA - 1 (BA is long
        // enough for everything before it), and starts at c_B + 1 with tile
        // 1 long loaded; it frees tile 0's set at max(s_B, u + N + 1) with
        // u = s_B - 1, so tile 2 (long arrived) is popped at s_B + N and RW
        // F+2 issues the cycle after.
        const Cycle ba = (f + 1) * dw + n + 3;
        const Cycle bb = 3;
        std::string src = "RW 0\n" + line("MMC.S", {0, 0, ba});
        for (Cycle k = 1; k <= f + 1; ++k) src += line("RW", {k});
        src += line("MMC.S", {ba, 0, bb}) + line("RW", {f + 2}) + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);

        const Cycle s_a = dw + n + 2;
        check_unit(log, 0, 0, dw);
        check_mmc(log, 1, 1, s_a, s_a + ba + 2 * n - 1);
        std::vector<Cycle> c_rw(f + 2), d_rw(f + 2);
        d_rw[0] = dw;
        Cycle l1 = 0;  // tile 1's load
        for (Cycle k = 1; k <= f + 1; ++k) {
          c_rw[k] = k + 1;
          if (k == f) c_rw[k] = std::max(c_rw[k], dw + 2);
          if (k == f + 1) c_rw[k] = std::max(c_rw[k - 1] + 1, l1 + 1);
          d_rw[k] = std::max(c_rw[k] + 1 + lw, d_rw[k - 1] + 1) + t - 1;
          if (k == 1) l1 = std::max(d_rw[1] + 1, s_a);
          check_unit(log, 1 + k, c_rw[k], d_rw[k]);
        }
        const Cycle c_b = s_a + ba - 1;
        REQUIRE(c_b > c_rw[f + 1]);       // MMC.S B waits for the array, not for an RW
        REQUIRE(c_b > d_rw[f + 1]);       // every RW before it has completed
        REQUIRE(c_b >= l1 + n);           // tile 1 loaded: MMC.S B starts at c_B + 1
        const Cycle s_b = c_b + 1;
        const Cycle d_b = s_b + bb + 2 * n - 1;
        check_mmc(log, f + 3, c_b, s_b, d_b);
        const Cycle c_r = s_b + n + 1;
        const Cycle d_r = c_r + dw;  // the channel is idle by then
        check_unit(log, f + 4, c_r, d_r);
        const Cycle c_hlt = std::max(d_b, d_r) + 1;
        check_halt(log, f + 5, c_hlt);
        check_stalls(log, {{StallCause::UnitBusy, c_b - c_rw[f + 1] - 1},
                           {StallCause::FifoFull, (c_rw[f] - f - 1) + (c_rw[f + 1] - c_rw[f] - 1) +
                                                      (c_r - c_b - 1)},
                           {StallCause::Drain, c_hlt - c_r - 1}});
      }
    }
  });
}

// A deadlock fault stops the run in the first cycle the waiting instruction
// stalls on the condition that can never clear; the statistics then count the
// instructions issued before it and report the fault cycle as total cycles.
void check_deadlock(const model::Fault& f, const RunLog& log, std::uint32_t pc, Cycle cycle) {
  CHECK(f.pc == pc);
  CHECK(f.cycle == cycle);
  CHECK(f.reason.find("deadlock") != std::string::npos);
  CHECK(log.stats.instructions == pc);
  CHECK(log.stats.cycles == cycle);
}

TEST_CASE("Deadlock: an MMC.S waiting for weights that nothing will bring faults at once",
          "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = weight_duration(cfg);
    {
      INFO("MMC.S with no RW at all: the first cycle, 0");
      RunLog log;
      const model::Fault f = run_to_fault(cfg, "MMC.S 0, 0, 1\nHLT\n", log);
      check_deadlock(f, log, 0, 0);
    }
    for (Cycle b : {Cycle{1}, Cycle{5}, 2 * n}) {
      CAPTURE(b);
      {
        // RW 0; MMC.S 0, 0, B; MMC.S 0, 0, B: the first MMC.S issues at 1 and
        // starts at s_m = D_w + N + 2; the second waits for the array until
        // s_m + B - 1, when it would issue with no RW left for its tile.
        const std::string src =
            "RW 0\n" + line("MMC.S", {0, 0, b}) + line("MMC.S", {0, 0, b}) + "HLT\n";
        INFO(src);
        RunLog log;
        const model::Fault f = run_to_fault(cfg, src, log);
        const Cycle s_m = dw + n + 2;
        REQUIRE(log.retired.size() >= 2);
        check_unit(log, 0, 0, dw);
        CHECK(log.retired[1].issue == 1);
        CHECK(log.retired[1].start == s_m);
        check_deadlock(f, log, 2, s_m + b - 1);
      }
      if (cfg.fifo_depth >= 2) {
        // RW 0; RW 1; MMC.S x3: each MMC.S issues when the previous one reads
        // its last row; the third then has no RW left for its tile.
        const std::string src = "RW 0\nRW 1\n" + line("MMC.S", {0, 0, b}) +
                                line("MMC.S", {0, 0, b}) + line("MMC.S", {0, 0, b}) + "HLT\n";
        INFO(src);
        RunLog log;
        const model::Fault f = run_to_fault(cfg, src, log);
        // RW 1 issues at 1 and streams right after tile 0: it arrives at
        // D_w + T and is in the FIFO at D_w + T + 1.
        const Cycle t = weight_tile_cycles(cfg);
        // Switch 0 frees the reset set (no row used it) at its start s0.
        const Cycle s0 = dw + n + 2;
        const Cycle l1 = std::max(s0, dw + t + 1);
        const Cycle c1 = s0 + b - 1;
        const Cycle s1 = std::max(c1 + 1, l1 + n + 1);
        REQUIRE(log.retired.size() >= 4);
        check_unit(log, 0, 0, dw);
        check_unit(log, 1, 1, dw + t);
        CHECK(log.retired[2].issue == 2);
        CHECK(log.retired[2].start == s0);
        CHECK(log.retired[3].issue == c1);
        CHECK(log.retired[3].start == s1);
        check_deadlock(f, log, 4, s1 + b - 1);
      }
    }
  });
}

TEST_CASE("Deadlock: an RW waiting for FIFO room behind a tile no switch will take faults",
          "[timing]") {
  for_each_config([](ArchConfig cfg) {
    const Cycle dw = weight_duration(cfg);
    {
      INFO("F = 1: RW 0; RW 1; RW 2");
      // RW 1 issues at D_w + 2 (see the FIFO-full test) while tile 0 loads
      // into the shadow. RW 2 waits for FIFO room from D_w + 3 (RW 1 in
      // flight = F) with tile 0 in the shadow and no MMC.S to come: the
      // deadlock shows in that first cycle.
      cfg.fifo_depth = 1;
      RunLog log;
      const model::Fault f = run_to_fault(cfg, "RW 0\nRW 1\nRW 2\nHLT\n", log);
      REQUIRE(log.retired.size() >= 2);
      check_unit(log, 0, 0, dw);
      CHECK(log.retired[1].issue == dw + 2);
      check_deadlock(f, log, 2, dw + 3);
    }
    for (Cycle f_depth : {2, 3, 5}) {
      CAPTURE(f_depth);
      if (dw + 2 <= f_depth) continue;  // as in the FIFO-full test
      cfg.fifo_depth = f_depth;
      // RW 0 .. RW F+1: RW k < F issues at k, RW F at D_w + 2 (after tile 0's
      // pop); RW F+1 then finds tiles 1..F-1 queued or in flight with RW F
      // (F) and tile 0 in the shadow: the deadlock shows at D_w + 3.
      std::string src;
      for (Cycle k = 0; k <= f_depth + 1; ++k) src += line("RW", {k});
      src += "HLT\n";
      INFO(src);
      RunLog log;
      const model::Fault f = run_to_fault(cfg, src, log);
      REQUIRE(log.retired.size() >= f_depth + 1);
      for (Cycle k = 0; k < f_depth; ++k) CHECK(log.retired[k].issue == k);
      CHECK(log.retired[f_depth].issue == dw + 2);
      check_deadlock(f, log, static_cast<std::uint32_t>(f_depth + 1), dw + 3);
    }
  });
}

TEST_CASE("Back-to-back MMC.S chains follow the document's recurrence", "[timing]") {
  for_each_config([](ArchConfig cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = weight_duration(cfg);
    const Cycle t = 5;  // tiles in the chain
    cfg.fifo_depth = t + 1;
    for (Cycle b : {Cycle{1}, n - 1, n + 1, 2 * n, 2 * n + 1, 2 * n + 6, 3 * n}) {
      CAPTURE(b);
      // RW 0..T-1; SYNC; MMC.S i*B, 0, B for i < T; HLT
      std::string src;
      for (Cycle i = 0; i < t; ++i) src += line("RW", {i});
      src += "SYNC\n";
      for (Cycle i = 0; i < t; ++i) src += line("MMC.S", {i * b, 0, b});
      src += "HLT\n";
      INFO(src);

      model::Memories mem(cfg);
      std::mt19937 rng(static_cast<unsigned>(b * 13 + n));
      fill_int8(mem.weights, 0, t, rng);
      fill_int8(mem.ub, 0, t * b, rng);
      auto expect = acc_snapshot(mem, b);
      for (Cycle i = 0; i < t; ++i) ref_mmc(expect, mem, i, i * b, 0, b, false, n);
      const RunLog log = run(cfg, src, mem);

      // RW k at k (F = T + 1 never fills), streaming back to back: tile k
      // arrives at Lw + (k+1)*T_w. SYNC at Lw + T*T_w + 1; every tile is in the
      // FIFO by then. Tile 0 is loaded at the start of D_w + 1 + N.
      const Cycle tw = weight_tile_cycles(cfg);
      for (Cycle k = 0; k < t; ++k) check_unit(log, k, k, cfg.weight_latency + (k + 1) * tw);
      const Cycle c_sync = cfg.weight_latency + t * tw + 1;
      check_controller(log, t, c_sync);
      // Starts s_i by the chain's closed form; MMC.S i + 1 issues when MMC.S
      // i reads its last row (the unit-busy rule) and waits in the unit.
      std::vector<Cycle> s(t), c(t);
      s[0] = std::max(c_sync + 2, dw + n + 2);
      if (t > 1) s[1] = std::max(s[0] + b, s[0] + n + 1);
      for (Cycle i = 1; i + 1 < t; ++i)
        s[i + 1] = std::max({s[i] + b, s[i] + n + 1, s[i - 1] + b + 2 * n + 1});
      c[0] = c_sync + 1;
      for (Cycle i = 1; i < t; ++i) c[i] = std::max(c[i - 1] + 1, s[i - 1] + b - 1);
      for (Cycle i = 0; i < t; ++i) {
        CAPTURE(i);
        check_mmc(log, t + 1 + i, c[i], s[i], s[i] + b + 2 * n - 1);
      }
      const Cycle c_hlt = s[t - 1] + b + 2 * n;
      check_halt(log, 2 * t + 1, c_hlt);

      Cycle busy = 0;
      for (Cycle i = 1; i < t; ++i) busy += c[i] - c[i - 1] - 1;
      check_stalls(log, {{StallCause::UnitBusy, busy},
                         {StallCause::Drain, (c_sync - t) + (c_hlt - c[t - 1] - 1)}});
      CHECK(log.stats.array_active_cycles == t * b);
      if (b >= 2 * n + 1) {
        // s_i = s_0 + i*B: a row every cycle from the chain's first row
        // (s_0) to its last (s_{T-1} + B - 1); weight loading fully hidden.
        for (Cycle i = 0; i < t; ++i) CHECK(log.retired[t + 1 + i].start == s[0] + i * b);
        CHECK(log.retired[2 * t].start + b - s[0] == t * b);
      }
      CHECK(acc_snapshot(mem, b) == expect);
    }
  });
}

TEST_CASE("A switch frees the old weights N + 1 cycles after the last row that used them",
          "[timing]") {
  for_each_config([](ArchConfig cfg) {
    const Cycle n = cfg.array_n;
    const Cycle dw = weight_duration(cfg);
    cfg.fifo_depth = 4;
    for (Cycle b : {Cycle{1}, n}) {
      for (Cycle b2 : {Cycle{1}, n, 3 * n}) {
        CAPTURE(b, b2);
        // RW 0; RW 1; RW 2; SYNC; MMC.S 0, 0, B; MMC B, 0, B2 (still tile 0);
        // MMC.S 0, 0, B (tile 1); MMC.S 0, 0, B (tile 2); HLT
        const std::string src = "RW 0\nRW 1\nRW 2\nSYNC\n" + line("MMC.S", {0, 0, b}) +
                                line("MMC", {b, 0, b2}) + line("MMC.S", {0, 0, b}) +
                                line("MMC.S", {0, 0, b}) + "HLT\n";
        INFO(src);
        model::Memories mem(cfg);
        std::mt19937 rng(static_cast<unsigned>(b * 5 + b2));
        fill_int8(mem.weights, 0, 3, rng);
        fill_int8(mem.ub, 0, b + b2, rng);
        const Cycle acc_rows = std::max(b, b2);
        auto expect = acc_snapshot(mem, acc_rows);
        ref_mmc(expect, mem, 0, 0, 0, b, false, n);
        ref_mmc(expect, mem, 0, b, 0, b2, false, n);
        ref_mmc(expect, mem, 1, 0, 0, b, false, n);
        ref_mmc(expect, mem, 2, 0, 0, b, false, n);
        const RunLog log = run(cfg, src, mem);

        // RW k at k, streaming back to back: tile k arrives at Lw + (k+1)*T.
        const Cycle tw = weight_tile_cycles(cfg);
        const Cycle c_sync = cfg.weight_latency + 3 * tw + 1;
        // Switch 0 starts at s0 (tile 0 loaded at the start of D_w + 1 + N)
        // and frees the reset set (used by no row) then, so tile 1 is loaded
        // at s0 + N and usable from s0 + N + 1. Each MMC issues when the
        // previous reads its last row.
        const Cycle c0 = c_sync + 1;
        const Cycle s0 = std::max(c0 + 1, dw + n + 2);
        const Cycle c1 = s0 + b - 1;  // starts at once
        const Cycle u1 = c1 + b2;     // last row read with tile 0
        const Cycle c2 = u1;
        const Cycle s2 = std::max(c2 + 1, s0 + n + 1);
        // Switch 1 frees tile 0's set at max(s2, u1 + N + 1); tile 2 is
        // loaded N cycles later and used the cycle after.
        const Cycle c3 = s2 + b - 1;
        const Cycle s3 = std::max(c3 + 1, std::max(s2, u1 + n + 1) + n + 1);
        const Cycle c_hlt = s3 + b + 2 * n;
        for (Cycle k = 0; k < 3; ++k) check_unit(log, k, k, cfg.weight_latency + (k + 1) * tw);
        check_controller(log, 3, c_sync);
        check_mmc(log, 4, c0, s0, s0 + b + 2 * n - 1);
        check_unit(log, 5, c1, c1 + b2 + 2 * n);
        check_mmc(log, 6, c2, s2, s2 + b + 2 * n - 1);
        check_mmc(log, 7, c3, s3, s3 + b + 2 * n - 1);
        check_halt(log, 8, c_hlt);
        check_stalls(log, {{StallCause::UnitBusy, (c1 - c0 - 1) + (c2 - c1 - 1) + (c3 - c2 - 1)},
                           {StallCause::Drain, (c_sync - 3) + (c_hlt - c3 - 1)}});
        CHECK(log.stats.array_active_cycles == 3 * b + b2);
        CHECK(acc_snapshot(mem, acc_rows) == expect);
      }
    }
  });
}

// ============================================================================
// SYNC and HLT
// ============================================================================

TEST_CASE("SYNC issues one cycle after everything in flight has completed", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    {
      INFO("three units in flight");
      // RHM writes UB 0..R-1; MMC reads UB 100.., writes ACC 0..; ACT reads
      // ACC 200.., writes UB 300..: no hazards, three units at once.
      for (const auto& [r, b, b2] : std::vector<std::tuple<Cycle, Cycle, Cycle>>{
               {13, 1, 1}, {1, 40, 1}, {1, 1, 90}, {7, 7, 7}}) {
        CAPTURE(r, b, b2);
        const Op o0 = rhm(cfg, 0, 0, r);
        const Op o1 = mmc(cfg, 100, 0, b);
        const Op o2 = act(cfg, 200, 300, b2);
        const Op o5 = rhm(cfg, 500, 0, 2);
        const std::string src = o0.text + o1.text + o2.text + "SYNC\nNOP\n" + o5.text + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        const Cycle d0 = o0.completion(0), d1 = o1.completion(1), d2 = o2.completion(2);
        const Cycle c_sync = std::max({d0, d1, d2}) + 1;
        check_unit(log, 0, 0, d0);
        check_unit(log, 1, 1, d1);
        check_unit(log, 2, 2, d2);
        check_controller(log, 3, c_sync);
        check_controller(log, 4, c_sync + 1);
        const Cycle c5 = c_sync + 2;
        check_unit(log, 5, c5, o5.completion(c5));
        check_halt(log, 6, o5.completion(c5) + 1);
        check_stalls(log, {{StallCause::Drain, (c_sync - 3) + (o5.completion(c5) - c5)}});
      }
    }
    {
      INFO("a dependent instruction after SYNC issues without a hazard stall");
      for (Cycle r : {1, 9}) {
        const Op w = rhm(cfg, 0, 0, r);
        const Op m = mmc(cfg, 0, 100, r);
        const std::string src = w.text + "SYNC\n" + m.text + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        const Cycle d0 = w.completion(0);
        check_unit(log, 0, 0, d0);
        check_controller(log, 1, d0 + 1);
        check_unit(log, 2, d0 + 2, m.completion(d0 + 2));
        check_halt(log, 3, m.completion(d0 + 2) + 1);
        check_stalls(log, {{StallCause::Drain, d0 + r + 2 * n}});
      }
    }
  });
}

TEST_CASE("HLT issues one cycle after everything in flight, total cycles = c_HLT + 1", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    for (const auto& [r, b, b2] :
         std::vector<std::tuple<Cycle, Cycle, Cycle>>{{13, 1, 1}, {1, 40, 1}, {1, 1, 90}}) {
      CAPTURE(r, b, b2);
      const Op o0 = rhm(cfg, 0, 0, r);
      const Op o1 = mmc(cfg, 100, 0, b);
      const Op o2 = act(cfg, 200, 300, b2);
      const std::string src = o0.text + o1.text + o2.text + "HLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      const Cycle c_hlt = std::max({o0.completion(0), o1.completion(1), o2.completion(2)}) + 1;
      check_halt(log, 3, c_hlt);
      check_stalls(log, {{StallCause::Drain, c_hlt - 3}});
    }
  });
}

// ============================================================================
// Statistics
// ============================================================================

TEST_CASE("Statistics: macs, instructions, and every cycle is an issue or a stall", "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    REQUIRE(cfg.fifo_depth >= 2);
    const std::vector<std::pair<std::string, Cycle>> programs = {
        // (program, total MMC rows)
        {"RHM 0, 0, 8\nRW 0\nRW 1\nMMC.SO 0, 0, 5\nMMC 0, 0, 3\nMMC.S 8, 16, 7\nSETQ 2, 1, 0\n"
         "ACT 0, 40, 4\nNOP\nSYNC\nWHM 40, 100, 4\nWHM.A 0, 200, 2\nHLT\n",
         15},
        {"RW 0\nRW 1\nMMC.S 0, 0, 1\nMMC.S 0, 0, 2\nMMC 0, 8, 33\nACT 8, 64, 33\nHLT\n", 36},
        {"NOP\nRHM 0, 0, 3\nACT 0, 1, 2\nHLT\n", 0},
        {"HLT\n", 0},
    };
    for (const auto& [src, mmc_rows] : programs) {
      INFO(src);
      const RunLog log = run(cfg, src);
      const Cycle count = static_cast<Cycle>(std::count(src.begin(), src.end(), '\n'));
      CHECK(log.stats.instructions == count);
      CHECK(log.stats.macs == mmc_rows * n * n);
      CHECK(log.stats.array_active_cycles == mmc_rows);
      // In every cycle up to HLT the controller either issues the
      // instruction at pc or stalls it, counted under exactly one cause.
      Cycle stalled = 0;
      for (Cycle s : log.stats.stall_cycles) stalled += s;
      CHECK(log.stats.cycles == log.stats.instructions + stalled);
      CHECK(log.stats.cycles == log.retired.back().issue + 1);
      for (std::size_t i = 1; i < log.retired.size(); ++i)
        CHECK(log.retired[i].issue > log.retired[i - 1].issue);
    }
  });
}

// docs/microarchitecture.md, "Statistics": a unit is busy in the cycles
// covered by the intervals [s, d] of its instructions.
TEST_CASE("Each unit counts as busy the cycles from start to completion of its instructions",
          "[timing]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle a = cfg.act_latency;
    // Checks a unit's instruction count and busy cycles.
    auto check_busy = [](const RunLog& log, const char* unit, Cycle instructions, Cycle busy) {
      INFO("unit " << unit);
      const auto it = log.stats.units.find(unit);
      REQUIRE(it != log.stats.units.end());
      CHECK(it->second.instructions == instructions);
      CHECK(it->second.busy_cycles == busy);
    };
    {
      // Back to back: [1, d0] and [d0 + 1, d1].
      const std::string src = "RHM 0, 0, 3\nWHM.A 0, 100, 2\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      check_busy(log, "host_dma", 2, host_duration(cfg, 3, n) + host_duration(cfg, 2, 4 * n));
    }
    {
      REQUIRE(cfg.fifo_depth >= 2);
      const std::string src = "RW 0\nRW 1\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      // [1, Lw + T] and [2, Lw + 2T] (the second streams after the first).
      check_busy(log, "weight_dma", 2, cfg.weight_latency + 2 * weight_tile_cycles(cfg));
    }
    for (Cycle b : {1, 6}) {
      CAPTURE(b);
      {
        // [1, B + 2N] and [B + 1, 2B + 2N] overlap: 2B + 2N cycles.
        const std::string src = line("MMC", {0, 0, b}) + line("MMC", {0, 0, b}) + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        check_busy(log, "systolic_array", 2, 2 * b + 2 * n);
      }
      {
        const std::string src =
            line("MMC", {0, 0, b}) + "SYNC\n" + line("MMC", {0, 0, b}) + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        check_busy(log, "systolic_array", 2, 2 * (b + 2 * n));
      }
      {
        // [1, B + A] and [B + 1, 2B + A]: 2B + A cycles.
        const std::string src = line("ACT", {0, 0, b}) + line("ACT", {0, 0, b}) + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        check_busy(log, "activation_unit", 2, 2 * b + a);
      }
      {
        const std::string src =
            line("ACT", {0, 0, b}) + "SYNC\n" + line("ACT", {0, 0, b}) + "HLT\n";
        INFO(src);
        const RunLog log = run(cfg, src);
        check_busy(log, "activation_unit", 2, 2 * (b + a));
      }
    }
  });
}
