// HWT and RWU, attention's second operand as a weight tile, against
// docs/microarchitecture.md ("Attention's second operand") and docs/isa.md.
//
// Every expected cycle is worked out here from the document's closed forms:
// HWT d = c + Lh + Hw + ceil(N*N/Bh) (host DMA: the next host transfer issues
// at d); RWU d = s + rows = c + 1 + rows on an idle weight DMA, after every
// earlier tile push (d > the previous push), its next weight-DMA instruction
// at c + rows; RW d = c + Lw + ceil(N*N/Bw); a dependent instruction issues at
// d + 1. Every expected tile and product is computed here from the layout
// the document states. Every program runs on the detailed and the fast path,
// which must agree cycle for cycle (testing::run_both_paths).
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "asm/assembler.h"
#include "isa/program.h"
#include "model/tpu.h"
#include "model_test_support.h"

namespace {

using namespace tpu;
using model::RunLog;
using model::StallCause;
using testing::check_controller;
using testing::check_halt;
using testing::check_mmc;
using testing::check_stalls;
using testing::check_unit;
using testing::Cycle;

Cycle ceil_div(Cycle a, Cycle b) { return (a + b - 1) / b; }

// The timing knobs of the model's timing tests, with a host layout time and
// the UB weight path on.
template <typename F>
void for_each_config(F&& f) {
  testing::for_each_config([&](ArchConfig cfg) {
    for (Cycle hw : {0, 5}) {
      CAPTURE(hw);
      cfg.host_layout_cycles = hw;
      cfg.ub_weight_path = 1;
      f(static_cast<const ArchConfig&>(cfg));
    }
  });
}

Cycle hwt_duration(const ArchConfig& c) {
  return c.host_latency + c.host_layout_cycles + ceil_div(c.array_n * c.array_n, c.host_bytes_per_cycle);
}
Cycle host_duration(const ArchConfig& c, Cycle rows) {
  return c.host_latency + ceil_div(rows * c.array_n, c.host_bytes_per_cycle);
}
Cycle weight_duration(const ArchConfig& c) {
  return c.weight_latency + ceil_div(c.array_n * c.array_n, c.weight_bytes_per_cycle);
}

std::string nops(Cycle k) {
  std::string s;
  for (Cycle i = 0; i < k; ++i) s += "NOP\n";
  return s;
}

RunLog run(const ArchConfig& cfg, const std::string& src, model::Memories& mem) {
  return testing::run_both_paths(cfg, src, mem, true, "attention_operand.s");
}

// The tile docs/isa.md gives HWT and RWU: W[r][j] = row r's lane j for
// r < rows; with .T W[k][r] = row r's lane k; every other weight 0.
std::vector<std::int8_t> expected_tile(const std::int8_t* first_row, Cycle rows, Cycle n, bool transpose) {
  std::vector<std::int8_t> w(n * n, 0);
  for (Cycle r = 0; r < rows; ++r)
    for (Cycle j = 0; j < n; ++j) {
      if (transpose)
        w[j * n + r] = first_row[r * n + j];
      else
        w[r * n + j] = first_row[r * n + j];
    }
  return w;
}

// ACC row = x . W (x: one UB row), as int32: sum over k of x[k] * W[k][j].
std::vector<std::int32_t> product(const std::int8_t* x, const std::vector<std::int8_t>& w, Cycle n) {
  std::vector<std::int32_t> out(n, 0);
  for (Cycle j = 0; j < n; ++j)
    for (Cycle k = 0; k < n; ++k) out[j] += std::int32_t{x[k]} * std::int32_t{w[k * n + j]};
  return out;
}

void random_fill(model::Memories& mem, unsigned seed) {
  std::mt19937 rng(seed);
  for (auto* m : {&mem.host, &mem.weights, &mem.ub})
    for (std::int8_t& v : m->data()) v = static_cast<std::int8_t>(rng());
}

}  // namespace

TEST_CASE("HWT on an idle machine completes at c + Lh + Hw + ceil(N*N/Bh) and writes the laid-out tile",
          "[timing][attention]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (const bool transpose : {false, true}) {
      for (Cycle rows : {Cycle{1}, n / 2 + 1, n}) {
        for (Cycle lead : {0, 2}) {
          model::Memories mem(cfg);
          random_fill(mem, 7);
          const std::vector<std::int8_t> want = expected_tile(mem.host.row(9), rows, n, transpose);
          const std::vector<std::int8_t> other(mem.weights.row(4), mem.weights.row(4) + n * n);
          const std::string src = nops(lead) + (transpose ? "HWT.T 9, 3, " : "HWT 9, 3, ") + std::to_string(rows) +
                                  "\nHLT\n";
          const RunLog log = run(cfg, src, mem);
          const Cycle c = lead, d = c + hwt_duration(cfg);
          check_unit(log, lead, c, d);
          check_halt(log, lead + 1, d + 1);
          check_stalls(log, {{StallCause::Drain, d - c}});
          CHECK(std::vector<std::int8_t>(mem.weights.row(3), mem.weights.row(3) + n * n) == want);
          CHECK(std::vector<std::int8_t>(mem.weights.row(4), mem.weights.row(4) + n * n) == other);
          CHECK(log.stats.units.at("host_dma").instructions == 1);
          CHECK(log.stats.units.at("host_dma").busy_cycles == d - c);
        }
      }
    }
  });
}

TEST_CASE("RWU on an idle weight DMA completes at c + 1 + rows, and MMC.S multiplies by its tile",
          "[timing][attention]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    for (const bool transpose : {false, true}) {
      for (Cycle rows : {Cycle{1}, n - 1, n}) {
        model::Memories mem(cfg);
        random_fill(mem, 11);
        const std::vector<std::int8_t> want = expected_tile(mem.ub.row(20), rows, n, transpose);
        const std::vector<std::int32_t> acc = product(mem.ub.row(40), want, n);
        // RWU at 0 (d = 1 + rows); MMC.SO 40, 7, 1 issues at 1 and starts
        // once the tile, in the FIFO at d + 1, is loaded N cycles later:
        // s = d + 1 + N + 1 ("Closed forms": the first load into the
        // shadow; MMC.S start).
        const std::string src = std::string(transpose ? "RWU.T 20, " : "RWU 20, ") + std::to_string(rows) +
                                "\nMMC.SO 40, 7, 1\nHLT\n";
        const RunLog log = run(cfg, src, mem);
        const Cycle d = 0 + 1 + rows;
        const Cycle s_m = d + 1 + n + 1, d_m = s_m + 1 + 2 * n - 1;
        check_unit(log, 0, 0, d);
        check_mmc(log, 1, 1, s_m, d_m);
        check_halt(log, 2, d_m + 1);
        CHECK(std::vector<std::int32_t>(mem.acc.row(7), mem.acc.row(7) + n) == acc);
        CHECK(log.stats.units.at("weight_dma").instructions == 1);
        CHECK(log.stats.units.at("weight_dma").busy_cycles == d);
      }
    }
  });
}

TEST_CASE("The host route: WHM, HWT.T, RW, MMC.S in sequence by the host DMA's order and a RAW on the tile",
          "[timing][attention]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle rows = n / 2 + 1;
    model::Memories mem(cfg);
    random_fill(mem, 3);
    // K's rows go out to host rows 100.., come back as tile 5 transposed.
    const std::vector<std::int8_t> want = expected_tile(mem.ub.row(30), rows, n, true);
    const std::vector<std::int32_t> acc = product(mem.ub.row(60), want, n);
    const std::string src = "WHM 30, 100, " + std::to_string(rows) + "\nHWT.T 100, 5, " + std::to_string(rows) +
                            "\nRW 5\nMMC.SO 60, 0, 1\nHLT\n";
    const RunLog log = run(cfg, src, mem);
    // WHM at 0: d1 = Lh + ceil(rows*N/Bh). HWT issues when the host DMA
    // accepts again, at d1: d2 = d1 + D_hwt. RW reads tile 5: RAW, issues at
    // d2 + 1, d3 = d2 + 1 + D_w. The MMC.S (pc 3) issues at d2 + 2 and
    // starts once the tile is loaded: s = d3 + 1 + N + 1.
    const Cycle d1 = host_duration(cfg, rows);
    const Cycle d2 = d1 + hwt_duration(cfg);
    const Cycle d3 = d2 + 1 + weight_duration(cfg);
    const Cycle s_m = d3 + 1 + n + 1, d_m = s_m + 2 * n;
    check_unit(log, 0, 0, d1);
    check_unit(log, 1, d1, d2);
    check_unit(log, 2, d2 + 1, d3);
    check_mmc(log, 3, d2 + 2, s_m, d_m);
    check_halt(log, 4, d_m + 1);
    // HWT waits for the busy host DMA (1 .. d1 - 1), RW for the tile
    // (d1 + 1 .. d2), HLT drains (d2 + 3 .. d_m).
    check_stalls(log, {{StallCause::UnitBusy, d1 - 1}, {StallCause::Raw, d2 - d1}, {StallCause::Drain, d_m - d2 - 2}});
    CHECK(std::vector<std::int32_t>(mem.acc.row(0), mem.acc.row(0) + n) == acc);
  });
}

TEST_CASE("WAR: an HWT into a tile whose RW is in flight waits for the RW's completion",
          "[timing][attention]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    model::Memories mem(cfg);
    random_fill(mem, 5);
    const std::vector<std::int8_t> old_tile(mem.weights.row(2), mem.weights.row(2) + n * n);
    const std::vector<std::int8_t> new_tile = expected_tile(mem.host.row(50), n, n, false);
    const std::vector<std::int32_t> acc_old = product(mem.ub.row(8), old_tile, n);
    const std::vector<std::int32_t> acc_new = product(mem.ub.row(8), new_tile, n);
    const std::string src = "RW 2\nHWT 50, 2, " + std::to_string(n) + "\nMMC.SO 8, 0, 1\nRW 2\nMMC.SO 8, 1, 1\nHLT\n";
    const RunLog log = run(cfg, src, mem);
    // RW at 0: d = D_w. HWT writes tile 2: WAR, issues at D_w + 1 and
    // completes D_hwt later. The second RW reads it: RAW, at its
    // completion + 1.
    const Cycle dw = weight_duration(cfg);
    const Cycle c_hwt = dw + 1, d_hwt = c_hwt + hwt_duration(cfg);
    check_unit(log, 0, 0, dw);
    check_unit(log, 1, c_hwt, d_hwt);
    CHECK(log.retired[2].issue == c_hwt + 1);
    check_unit(log, 3, d_hwt + 1, d_hwt + 1 + dw);
    CHECK(log.stats.stall_cycles[static_cast<unsigned>(StallCause::War)] == dw);
    // The first MMC.S used the tile as the first RW read it, the second the HWT's.
    CHECK(std::vector<std::int32_t>(mem.acc.row(0), mem.acc.row(0) + n) == acc_old);
    CHECK(std::vector<std::int32_t>(mem.acc.row(1), mem.acc.row(1) + n) == acc_new);
  });
}

TEST_CASE("RWU: RAW after the RHM that writes its rows, WAR before an ACT that overwrites them",
          "[timing][attention]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    const Cycle rows = n;
    model::Memories mem(cfg);
    random_fill(mem, 9);
    const std::vector<std::int8_t> want = expected_tile(mem.host.row(200), rows, n, false);
    const std::vector<std::int32_t> acc = product(mem.ub.row(500), want, n);
    const std::string src = "RHM 200, 16, " + std::to_string(rows) + "\nRWU 16, " + std::to_string(rows) +
                            "\nACT 0, 16, 1\nMMC.SO 500, 9, 1\nHLT\n";
    const RunLog log = run(cfg, src, mem);
    // RHM at 0: d1 = Lh + ceil(rows*N/Bh). RWU reads its rows: issues at
    // d1 + 1, d2 = d1 + 2 + rows. ACT writes UB row 16: WAR, issues at
    // d2 + 1.
    const Cycle d1 = host_duration(cfg, rows);
    const Cycle d2 = d1 + 1 + 1 + rows;
    check_unit(log, 0, 0, d1);
    check_unit(log, 1, d1 + 1, d2);
    check_unit(log, 2, d2 + 1, d2 + 1 + 1 + cfg.act_latency);
    CHECK(log.stats.stall_cycles[static_cast<unsigned>(StallCause::Raw)] == d1);
    CHECK(log.stats.stall_cycles[static_cast<unsigned>(StallCause::War)] == d2 - d1 - 1);
    CHECK(std::vector<std::int32_t>(mem.acc.row(9), mem.acc.row(9) + n) == acc);
  });
}

TEST_CASE("RWU in the weight DMA's order: after an RW's tile, and the next RWU at c + rows",
          "[timing][attention]") {
  for_each_config([](const ArchConfig& cfg) {
    const Cycle n = cfg.array_n;
    {
      model::Memories mem(cfg);
      const RunLog log = run(cfg, "RW 0\nRWU 0, 2\nHLT\n", mem);
      // RW at 0, d = D_w; the weight DMA accepts at 1. RWU at 1:
      // d = max(1 + 1 + 2, D_w + 1).
      const Cycle dw = weight_duration(cfg);
      const Cycle d1 = std::max<Cycle>(4, dw + 1);
      check_unit(log, 0, 0, dw);
      check_unit(log, 1, 1, d1);
      check_halt(log, 2, d1 + 1);
      check_stalls(log, {{StallCause::Drain, d1 - 1}});
    }
    {
      model::Memories mem(cfg);
      const RunLog log = run(cfg, "RWU 0, 2\nRWU 8, " + std::to_string(n) + "\nHLT\n", mem);
      // RWU at 0: d = 3; the weight DMA reads its 2 rows in 1 and 2 and
      // takes the next RWU at 0 + 2: d = max(2 + 1 + N, 3 + 1).
      const Cycle d2 = std::max<Cycle>(2 + 1 + n, 4);
      check_unit(log, 0, 0, 3);
      check_unit(log, 1, 2, d2);
      check_halt(log, 2, d2 + 1);
      check_stalls(log, {{StallCause::UnitBusy, 1}, {StallCause::Drain, d2 - 2}});
    }
  });
}

TEST_CASE("RWU faults without ub_weight_path, and HWT and RWU of more than N rows are refused",
          "[attention]") {
  ArchConfig cfg = preset_config("small8");
  {
    isa::Program prog;
    prog.array_n = 8;
    prog.code = {isa::Instruction{isa::Opcode::RWU, 0, {0, 4, 0, 0}}, isa::Instruction{isa::Opcode::HLT, 0, {}}};
    for (const model::Detail detail : {model::Detail::Detailed, model::Detail::Fast}) {
      model::Memories mem(cfg);
      const RunLog log = testing::run_path(cfg, prog, mem, detail);
      REQUIRE(log.fault);
      CHECK(log.fault->pc == 0);
      CHECK(log.fault->cycle == 0);
      CHECK_THAT(log.fault->reason, Catch::Contains("ub_weight_path"));
    }
    // The assembler refuses it against this configuration.
    assembler::Options o;
    o.config = &cfg;
    const assembler::Result r = assembler::assemble("RWU 0, 4\nHLT\n", o);
    REQUIRE(r.diagnostics.size() == 1);
    CHECK_THAT(r.diagnostics[0].message, Catch::Contains("ub_weight_path"));
  }
  {
    cfg.ub_weight_path = 1;
    assembler::Options o;
    o.config = &cfg;
    for (const char* src : {"HWT 0, 0, 9\n", "HWT.T 0, 0, 9\n", "RWU 0, 9\n", "RWU.T 0, 9\n"}) {
      INFO(src);
      const assembler::Result r = assembler::assemble(src, o);
      REQUIRE(r.diagnostics.size() == 1);
      CHECK_THAT(r.diagnostics[0].message, Catch::Contains("more than a weight tile's N = 8 rows"));
    }
    // A program made in memory: the controller faults.
    isa::Program prog;
    prog.array_n = 8;
    prog.code = {isa::Instruction{isa::Opcode::HWT, 0, {0, 0, 9, 0}}, isa::Instruction{isa::Opcode::HLT, 0, {}}};
    model::Memories mem(cfg);
    const RunLog log = model::run_program(cfg, prog, mem);
    REQUIRE(log.fault);
    CHECK_THAT(log.fault->reason, Catch::Contains("more than a weight tile's N = 8 rows"));
    // The program file's loader refuses it.
    std::vector<std::uint8_t> bytes = isa::serialize([] {
      isa::Program p;
      p.array_n = 8;
      p.code = {isa::Instruction{isa::Opcode::RWU, 0, {0, 8, 0, 0}}};
      return p;
    }());
    bytes[isa::kHeaderBytes + isa::slot_lsb(1) / 8] = 9;  // RWU's rows: slot 1's low byte
    CHECK_THROWS_WITH(isa::parse_program(bytes), Catch::Contains("pc 0: RWU of 9 rows is more than"));
  }
  {
    // An HWT into a tile past the end of weight memory faults at its issue.
    cfg.weight_tiles = 4;
    isa::Program prog;
    prog.array_n = 8;
    prog.code = {isa::Instruction{isa::Opcode::HWT, 0, {0, 4, 8, 0}}, isa::Instruction{isa::Opcode::HLT, 0, {}}};
    model::Memories mem(cfg);
    const RunLog log = model::run_program(cfg, prog, mem);
    REQUIRE(log.fault);
    CHECK_THAT(log.fault->reason, Catch::Contains("weight memory"));
  }
}
