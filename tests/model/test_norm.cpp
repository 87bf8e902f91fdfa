// SMAX, LNRM, GELU and their registers NGEO, NCON on the SystemC model: the
// timing contract of docs/microarchitecture.md ("Softmax, LayerNorm, GELU",
// "Closed forms") with exact cycles, on both paths, which must agree on every
// record and byte; hazards over the hull of a token's planes and the bounds
// fault; the registers read at issue. The values are checked bit for bit
// against the NumPy reference in tests/net/check_ibert_program.py; here,
// values only where a closed form is simple enough to write in the test.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>

#include "model/integer_norm.h"
#include "model/tpu.h"
#include "model_test_support.h"

namespace {

using namespace tpu;
using model::RunLog;
using model::StallCause;
using testing::check_controller;
using testing::check_halt;
using testing::check_stalls;
using testing::check_unit;
using testing::Cycle;

ArchConfig make_config(unsigned n, Cycle act_latency) {
  ArchConfig c = preset_config("small8");
  c.array_n = n;
  c.host_rows = 1024;
  c.weight_tiles = 8;
  c.ub_rows = 1024;
  c.acc_rows = 64;
  c.act_latency = act_latency;
  validate(c);
  return c;
}

RunLog run_both(const ArchConfig& cfg, const std::string& src, model::Memories& mem,
                bool halts = true) {
  return testing::run_both_paths(cfg, src, mem, halts, "norm.s");
}

std::string op3(const char* mnemonic, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return std::string(mnemonic) + " " + std::to_string(a) + ", " + std::to_string(b) + ", " +
         std::to_string(c) + "\n";
}

}  // namespace

TEST_CASE("SMAX and LNRM of T tokens of G rows complete at c + 3GT + A + 8, GELU at c + rows + A + 6",
          "[norm][timing]") {
  for (unsigned n : {4u, 8u, 16u})
    for (Cycle a_lat : {1u, 2u, 5u})
      for (std::uint64_t groups : {1u, 3u})
        for (std::uint64_t tokens : {1u, 5u}) {
          CAPTURE(n, a_lat, groups, tokens);
          const ArchConfig cfg = make_config(n, a_lat);
          for (const char* op : {"SMAX", "LNRM"}) {
            CAPTURE(op);
            model::Memories mem(cfg);
            std::mt19937 rng(11);
            testing::fill_memories(mem, rng);
            const RunLog log = run_both(cfg,
                                        op3("NGEO", groups, 8, 4) + "NCON 700, 1400, 500000\n" +
                                            op3(op, 0, 100, tokens) + "HLT\n",
                                        mem);
            check_controller(log, 0, 0);
            check_controller(log, 1, 1);
            const Cycle d = 2 + 3 * groups * tokens + a_lat + 8;
            check_unit(log, 2, 2, d);
            check_halt(log, 3, d + 1);
            check_stalls(log, {{StallCause::Drain, d - 2}});
            CHECK(log.stats.units.at("activation_unit").busy_cycles == d - 2);
          }
          model::Memories mem(cfg);
          const RunLog log = run_both(cfg, op3("GELU", 0, 100, tokens) + "HLT\n", mem);
          check_unit(log, 0, 0, tokens + a_lat + 6);
          check_halt(log, 1, tokens + a_lat + 6 + 1);
        }
}

TEST_CASE("SMAX, LNRM and GELU wait for the unit's earlier instructions, and an ACT follows SMAX at d - A",
          "[norm][timing]") {
  const Cycle a_lat = 3;
  const ArchConfig cfg = make_config(8, a_lat);
  model::Memories mem(cfg);
  // ACT (4 rows) at 1: d0 = 1 + 4 + A. SMAX (G = 2, 3 tokens) at d0 + 1:
  // d1 = c1 + 18 + A + 8. The ACT after it issues at c1 + 18 + 8 = d1 - A
  // (its first write the cycle after the SMAX's last); the GELU after that
  // ACT at its completion + 1 (d3 = c3 + rows + A + 6).
  const RunLog log = run_both(cfg,
                              "NGEO 2, 16, 0\nACT 0, 0, 4\nSMAX 100, 200, 3\nACT 8, 300, 2\n"
                              "GELU 400, 500, 6\nHLT\n",
                              mem);
  const Cycle d0 = 1 + 4 + a_lat;
  check_unit(log, 1, 1, d0);
  const Cycle c1 = d0 + 1, d1 = c1 + 18 + a_lat + 8;
  check_unit(log, 2, c1, d1);
  const Cycle c2 = c1 + 18 + 8, d2 = c2 + 2 + a_lat;
  check_unit(log, 3, c2, d2);
  const Cycle c3 = d2 + 1, d3 = c3 + 6 + a_lat + 6;
  check_unit(log, 4, c3, d3);
  check_halt(log, 5, d3 + 1);
}

TEST_CASE("An SMAX waits for an RHM writing any row of its tokens' hull, and only those",
          "[norm][timing]") {
  // Tokens 0..3 in planes 10 rows apart, G = 3: rows 0..3, 10..13, 20..23;
  // the hull is rows 0..23 (the rows between the planes included).
  const ArchConfig cfg = make_config(8, 2);
  const Cycle dma = cfg.host_latency + (2 * 8 + cfg.host_bytes_per_cycle - 1) / cfg.host_bytes_per_cycle;
  struct Case {
    std::uint64_t rhm_row;
    bool waits;
    StallCause cause;
  };
  const Case cases[] = {
      {22, true, StallCause::Raw},    // the last plane
      {15, true, StallCause::Raw},    // between planes: in the hull
      {122, true, StallCause::Waw},   // the output's last plane (100 + 20..23)
      {24, false, StallCause::Raw},   // past the hull
      {200, false, StallCause::Raw},  // elsewhere
  };
  for (const Case& k : cases) {
    CAPTURE(k.rhm_row);
    model::Memories mem(cfg);
    const RunLog log = run_both(
        cfg, "NGEO 3, 10, 0\n" + op3("RHM", 0, k.rhm_row, 2) + "SMAX 0, 100, 4\nHLT\n", mem);
    check_unit(log, 1, 1, 1 + dma);
    const Cycle c = k.waits ? 1 + dma + 1 : 2;
    check_unit(log, 2, c, c + 36 + 2 + 8);  // d = c + 3GT + A + 8
    CHECK(log.stats.stall_cycles[static_cast<unsigned>(k.cause)] == (k.waits ? c - 2 : 0));
  }
}

TEST_CASE("An LNRM or SMAX whose hull runs past the end of the UB faults at issue", "[norm]") {
  const ArchConfig cfg = make_config(8, 2);
  // G = 4, stride 300, 5 tokens: the hull is 3 * 300 + 5 = 905 rows.
  for (const char* op : {"LNRM", "SMAX"}) {
    CAPTURE(op);
    model::Memories mem(cfg);
    const RunLog log = run_both(cfg, "NGEO 4, 300, 0\n" + op3(op, 200, 0, 5) + "HLT\n", mem, false);
    REQUIRE(log.fault);
    CHECK(log.fault->pc == 1);
    CHECK_THAT(log.fault->reason, Catch::Contains("unified buffer") && Catch::Contains("rows 200..1104"));
    model::Memories fine(cfg);
    CHECK(run_both(cfg, "NGEO 4, 300, 0\n" + op3(op, 119, 0, 5) + "HLT\n", fine).halted);
  }
  model::Memories mem(cfg);
  const RunLog log = run_both(cfg, "GELU 0, 1020, 5\nHLT\n", mem, false);
  REQUIRE(log.fault);
  CHECK_THAT(log.fault->reason, Catch::Contains("rows 1020..1024"));
}

TEST_CASE("NGEO, NCON and SETQ after an SMAX, LNRM or GELU change neither its values nor its timing",
          "[norm]") {
  const ArchConfig cfg = make_config(8, 2);
  std::mt19937 rng(5);
  model::Memories start(cfg);
  testing::fill_memories(start, rng);
  const std::string setup = "NGEO 2, 8, 11\nNCON 22713, 44335, 1030312935\nSETQ 1073741824, 52, -128\n";
  for (const char* op : {"SMAX 0, 100, 6\n", "LNRM 0, 100, 6\n", "GELU 0, 100, 6\n"}) {
    CAPTURE(op);
    model::Memories plain = start, changed = start;
    const RunLog a = run_both(cfg, setup + op + "HLT\n", plain);
    const RunLog b = run_both(cfg, setup + op + "NGEO 1, 0, 0\nNCON 1, 2, 3\nSETQ 5, 1, 9\nHLT\n", changed);
    CHECK(a.retired[3].completion == b.retired[3].completion);
    CHECK(std::equal(plain.ub.data().begin(), plain.ub.data().end(), changed.ub.data().begin()));
  }
}

TEST_CASE("SMAX of a token of equal values is 1/D, and GELU of the zero point is the output zero",
          "[norm]") {
  // Closed forms: all lanes equal give p = 0, the same e in every lane, and
  // v = (e * (2^62 // (D e))) >> 32, which is 2^30 / D for D a power of two
  // dividing 2^30 when e is too; with M = 1, S = 22: q(v) = 2^8 / D. GELU
  // of x = k2 is qx = 0, v = 0, q(0) = Z.
  const ArchConfig cfg = make_config(8, 2);
  model::Memories mem(cfg);
  for (std::uint64_t r = 0; r < 4; ++r)
    for (std::uint64_t j = 0; j < 8; ++j) mem.ub.row(r)[j] = -9;
  // i-exp at p = 0 with k1 = 2^10, k2 = 0: L = 2^20, e = 2^20.
  run_both(cfg,
           "NGEO 4, 1, 0\nNCON 100, 1024, 0\nSETQ 1, 22, 0\nSMAX 0, 100, 1\n"
           "NCON 500, 1000, -9\nSETQ 1, 0, 37\nGELU 0, 200, 4\nHLT\n",
           mem);
  for (std::uint64_t g = 0; g < 4; ++g)
    for (std::uint64_t j = 0; j < 8; ++j) {
      CHECK(int{mem.ub.row(100 + g)[j]} == 256 / 32);
      CHECK(int{mem.ub.row(200 + g)[j]} == 37);
    }
}

TEST_CASE("SMAX and LNRM take a token's first D values (NGEO's width) and write q(0) past them",
          "[norm]") {
  // Tokens of G = 2 rows at N = 8 (16 lanes), one token, rows 0 and 1. The
  // lanes past D hold 100, which would be the maximum (SMAX) and move the
  // mean (LNRM) if they were taken. Closed forms (docs/quantization.md):
  // SMAX of D equal values is v = (e * (2^62 // (D e))) >> 32 with e = 2^20
  // (k1 = 2^10, k2 = 0 at p = 0), q(v) = ((v + 2^23) >> 24) + 5; LNRM of
  // two values a and b at D = 4 (2 of each, k0 = 0) is v = +-2^15, q(v) =
  // +-8 + 3 with M = 1, S = 12, Z = 3. Past D every lane is q(0) = Z.
  const ArchConfig cfg = make_config(8, 2);
  for (std::uint64_t d : {1u, 4u, 12u, 16u}) {
    CAPTURE(d);
    model::Memories mem(cfg);
    for (std::uint64_t k = 0; k < 16; ++k) mem.ub.row(k / 8)[k % 8] = k < d ? -9 : 100;
    const RunLog log = run_both(cfg,
                                "NGEO 2, 1, 0, " + std::to_string(d) +
                                    "\nNCON 100, 1024, 0\nSETQ 1, 24, 5\nSMAX 0, 100, 1\nHLT\n",
                                mem);
    check_unit(log, 3, 3, 3 + 6 + 2 + 8);  // c + 3GT + A + 8, whatever D
    const std::int64_t e = std::int64_t{1} << 20;
    const std::int64_t v = (e * ((std::int64_t{1} << 62) / (static_cast<std::int64_t>(d) * e))) >> 32;
    const int want = static_cast<int>(std::min<std::int64_t>(((v + (1 << 23)) >> 24) + 5, 127));
    for (std::uint64_t k = 0; k < 16; ++k) {
      CAPTURE(k);
      CHECK(int{mem.ub.row(100 + k / 8)[k % 8]} == (k < d ? want : 5));
    }
  }
  model::Memories mem(cfg);
  const std::int8_t lanes[8] = {-9, -9, 7, 7, 100, 100, 100, 100};
  std::copy(lanes, lanes + 8, mem.ub.row(0));
  std::fill(mem.ub.row(1), mem.ub.row(1) + 8, std::int8_t{100});
  run_both(cfg, "NGEO 2, 1, 0, 4\nNCON 0, 0, 0\nSETQ 1, 12, 3\nLNRM 0, 100, 1\nHLT\n", mem);
  const int want[8] = {-5, -5, 11, 11, 3, 3, 3, 3};
  for (std::uint64_t j = 0; j < 8; ++j) {
    CAPTURE(j);
    CHECK(int{mem.ub.row(100)[j]} == want[j]);
    CHECK(int{mem.ub.row(101)[j]} == 3);
  }
}

TEST_CASE("The lane arithmetic stays defined when an SMAX changes its own input between passes",
          "[norm]") {
  // Pass 3 may read a value above pass 1's maximum (p > 0: taken as 0) or an
  // exponential above pass 2's sum (v saturates at 2^31 - 1): the closed
  // forms of docs/quantization.md with those minima.
  isa::NormRegs r;
  r.k0 = 1000;
  r.k1 = 3000;
  r.k2 = 7;
  CHECK(model::norm_exp(0, r) == 3000 * 3000 + 7);
  CHECK(model::norm_exp(12345, r) == 3000 * 3000 + 7);
  CHECK(model::norm_exp(-2500, r) == ((2500 * 2500 + 7) >> 2));  // z = 2, r + k1 = -500 + 3000
  const std::int64_t e_max = (std::int64_t{1} << 39) - 1;
  CHECK(model::softmax_value(e_max, std::int64_t{1} << 62) == INT32_MAX);
  CHECK(model::softmax_value(1, model::softmax_recip(1)) == (std::int64_t{1} << 30));
  // The requantization of GELU's 64-bit v keeps the whole product: v * M =
  // 3 * 2^63 here, past int64; (3 * 2^63 + 2^61) >> 62 = 6, and -6 for -v.
  model::Requant q;
  q.multiplier = 1 << 30;
  q.shift = 62;
  CHECK(int{model::requantize_wide(std::int64_t{3} << 33, q)} == 6);
  CHECK(int{model::requantize_wide(-(std::int64_t{3} << 33), q)} == -6);
}
