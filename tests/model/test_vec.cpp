// VEC, VSRC and VSCL (the vector unit in the activation pipeline) on the
// SystemC model, against references computed here from the specification
// alone (docs/isa.md "VEC", "VSRC, VSCL", "ACT"; docs/quantization.md
// "Vector operations"; docs/microarchitecture.md "Vector operations",
// "Closed forms"):
//
// - the lane-by-lane semantics written out with int64 arithmetic: xa = a - za,
//   xb = b - zb; ADD da*xa + db*xb, SUB da*xa - db*xb, MUL xa*xb, MAX and MIN
//   of da*xa and db*xb; then q (round to nearest, ties up, saturate) with
//   SETQ's M, S, Z and the activation (none, ReLU at Z, the sigmoid and tanh
//   tables recomputed here), for random operands, registers at their
//   extremes, with and without broadcast;
// - the timing contract: row i of B read at s + i, of A at s + i + 1,
//   written at s + i + A + 3, d = c + rows + A + 3; the next ACT at
//   c + rows + 3 (its first write after the VEC's last); a VEC issues only once every
//   earlier instruction of the activation unit has completed (unit busy);
//   VSRC and VSCL are controller-only (issue = start = completion);
// - hazards over A's rows, B's rows (one row with broadcast) and the output,
//   with the registers as they stand at issue, and the bounds fault; a VEC
//   whose output overlaps its operands against a cycle-by-cycle simulation of
//   its reads and writes.
//
// Every program runs on both paths (fast and detailed), which must agree on
// every record and every byte. Nothing here comes from the model's code
// (activation.h, isa::accesses, ...): the model is only run and observed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/tpu.h"
#include "model_test_support.h"

namespace {

using namespace tpu;
using model::Detail;
using model::RunLog;
using model::StallCause;
using testing::check_controller;
using testing::check_halt;
using testing::check_stalls;
using testing::check_unit;
using testing::Cycle;
using testing::fill_memories;
using testing::pick;
using Row = std::vector<std::int8_t>;

constexpr std::uint64_t kUbRows = 1024;

ArchConfig make_config(unsigned n, Cycle act_latency = 2) {
  ArchConfig c = preset_config("small8");
  c.array_n = n;
  c.host_rows = 1024;
  c.weight_tiles = 8;
  c.ub_rows = kUbRows;
  c.acc_rows = 256;
  c.act_latency = act_latency;
  validate(c);
  return c;
}

// ---- The registers and the semantics, written out here -----------------------------

enum Op { kAdd = 0, kSub = 1, kMul = 2, kMax = 3, kMin = 4 };
enum Fn { kNone, kRelu, kSigmoid, kTanh };

struct Regs {
  // SETQ
  std::int64_t m = 1;
  int s = 0, z = 0;
  // VSRC
  std::uint64_t b_row = 0;
  bool broadcast = false;
  int za = 0, zb = 0;
  // VSCL
  int da = 1, db = 1;
  Op op = kAdd;

  std::string text() const {
    std::ostringstream o;
    o << "SETQ " << m << ", " << s << ", " << z << "\n"
      << "VSRC" << (broadcast ? ".B " : " ") << b_row << ", " << za << ", " << zb << "\n"
      << "VSCL " << da << ", " << db << ", " << int{op} << "\n";
    return o.str();
  }
};

std::ostream& operator<<(std::ostream& os, const Regs& r) {
  return os << "M " << r.m << " S " << r.s << " Z " << r.z << " b_row " << r.b_row
            << (r.broadcast ? " broadcast" : "") << " za " << r.za << " zb " << r.zb << " da "
            << r.da << " db " << r.db << " op " << int{r.op};
}

std::string vec_text(Fn f, std::uint64_t a, std::uint64_t out, std::uint64_t rows) {
  static const char* kNames[] = {"VEC ", "VEC.R ", "VEC.Q ", "VEC.T "};
  return kNames[f] + std::to_string(a) + ", " + std::to_string(out) + ", " +
         std::to_string(rows) + "\n";
}

// floor(v / 2^s) without relying on >> of a negative value.
std::int64_t floor_shift(std::int64_t v, int s) { return v >= 0 ? v >> s : -((-(v + 1)) >> s) - 1; }

int sat8(std::int64_t v) { return static_cast<int>(std::clamp<std::int64_t>(v, -128, 127)); }

// round(127 * g(y / 16)), half away from zero (docs/isa.md, ACT).
int table(Fn f, int y) {
  const double x = y / 16.0;
  const double g = f == kSigmoid ? 1.0 / (1.0 + std::exp(-x)) : std::tanh(x);
  const double v = 127.0 * g;
  return static_cast<int>(v >= 0 ? std::floor(v + 0.5) : -std::floor(-v + 0.5));
}

// One lane: f(q(v)).
int lane(const Regs& r, Fn f, int a, int b) {
  const std::int64_t xa = a - r.za, xb = b - r.zb;
  const std::int64_t ya = std::int64_t{r.da} * xa, yb = std::int64_t{r.db} * xb;
  std::int64_t v = 0;
  switch (r.op) {
    case kAdd: v = ya + yb; break;
    case kSub: v = ya - yb; break;
    case kMul: v = xa * xb; break;
    case kMax: v = std::max(ya, yb); break;
    case kMin: v = std::min(ya, yb); break;
  }
  // v is exact in int32 (the ISA's claim): check it here too.
  CHECK(v >= INT32_MIN);
  CHECK(v <= INT32_MAX);
  const std::int64_t round = r.s > 0 ? std::int64_t{1} << (r.s - 1) : 0;
  const int y = sat8(floor_shift(v * r.m + round, r.s) + r.z);
  switch (f) {
    case kNone: return y;
    case kRelu: return std::max(y, r.z);
    case kSigmoid:
    case kTanh: return table(f, y);
  }
  return y;
}

// The VEC simulated cycle by cycle, in the documented order: in cycle s + k
// the unit reads row k of B (k < rows) and row k - 1 of A (1 <= k <= rows),
// then the write of row k - A - 3 lands (k >= A + 3; row i is written A + 3
// cycles after B's read): a read sees only earlier cycles' writes. Valid for
// any overlap of operands and output.
void ref_vec(model::Memories& mem, const Regs& r, Fn f, std::uint64_t a, std::uint64_t out,
             std::uint64_t rows, Cycle act_latency) {
  const std::uint64_t n = mem.ub.width(), latency = act_latency + 3;
  std::vector<Row> b_rows(rows), pending(rows);
  for (std::uint64_t k = 0; k < rows + latency; ++k) {
    if (k >= 1 && k <= rows) {
      const std::uint64_t i = k - 1;
      const std::int8_t* ra = mem.ub.row(a + i);
      pending[i].resize(n);
      for (std::uint64_t j = 0; j < n; ++j)
        pending[i][j] = static_cast<std::int8_t>(lane(r, f, ra[j], b_rows[i][j]));
    }
    if (k < rows) {
      const std::int8_t* rb = mem.ub.row(r.b_row + (r.broadcast ? 0 : k));
      b_rows[k].assign(rb, rb + n);
    }
    if (k >= latency) {
      const std::uint64_t w = k - latency;
      std::copy(pending[w].begin(), pending[w].end(), mem.ub.row(out + w));
    }
  }
}

// Random registers: factors matched to scales (about 16384 and less), small,
// or at the int16 extremes; zero points of every sign; SETQ small or extreme.
Regs random_regs(std::mt19937& rng) {
  Regs r;
  r.op = static_cast<Op>(pick(rng, 0, 4));
  r.za = pick(rng, 0, 3) == 0 ? (pick(rng, 0, 1) ? -128 : 127) : pick(rng, -128, 127);
  r.zb = pick(rng, 0, 3) == 0 ? (pick(rng, 0, 1) ? -128 : 127) : pick(rng, -128, 127);
  static const int kFactors[] = {-32768, 32767, 16384, 1, 0, -1};
  const auto factor = [&]() {
    switch (pick(rng, 0, 2)) {
      case 0: return kFactors[pick(rng, 0, 5)];
      case 1: return pick(rng, -300, 300);
      default: return pick(rng, -32768, 32767);
    }
  };
  r.da = factor();
  r.db = factor();
  if (pick(rng, 0, 2) != 0) {
    // About the scale of the combined value: 16-bit factors and 8-bit
    // products, so a shift of 8..24 lands in int8 for some rows.
    r.s = pick(rng, 8, 24);
    r.m = pick(rng, 1, 1 << 12);
    r.z = pick(rng, -20, 20);
  } else {
    static const std::int64_t kMs[] = {-2147483648LL, 2147483647, -1, 0, 1, 77777};
    static const int kSs[] = {0, 1, 31, 45, 62};
    r.m = kMs[pick(rng, 0, 5)];
    r.s = kSs[pick(rng, 0, 4)];
    r.z = pick(rng, 0, 1) ? (pick(rng, 0, 1) ? -128 : 127) : pick(rng, -128, 127);
  }
  return r;
}

// ---- Runs on both paths -----------------------------------------------------------

// Runs `src` on the detailed path into `mem` and on the fast path into a
// copy; both must give the same records, stalls, statistics and memories.
// With `halts`, the program must halt with every instruction completed (and
// the assembler checks its ranges).
RunLog run_both(const ArchConfig& cfg, const std::string& src, model::Memories& mem,
                bool halts = true) {
  return testing::run_both_paths(cfg, src, mem, halts, "vec.s");
}

std::string first_ub_difference(const model::Memories& got, const model::Memories& want) {
  const std::uint64_t n = want.ub.width();
  for (std::uint64_t r = 0; r < want.ub.rows(); ++r) {
    if (std::equal(got.ub.row(r), got.ub.row(r) + n, want.ub.row(r))) continue;
    std::ostringstream s;
    s << "UB row " << r << ": got";
    for (std::uint64_t j = 0; j < n; ++j) s << " " << int{got.ub.row(r)[j]};
    s << ", want";
    for (std::uint64_t j = 0; j < n; ++j) s << " " << int{want.ub.row(r)[j]};
    return s.str();
  }
  return "none";
}

bool same_ub(const model::Memories& a, const model::Memories& b) {
  return std::equal(a.ub.data().begin(), a.ub.data().end(), b.ub.data().begin());
}

void check_act_unit(const RunLog& log, std::uint64_t instructions, std::uint64_t busy) {
  REQUIRE(log.stats.units.count("activation_unit") == 1);
  CHECK(log.stats.units.at("activation_unit").instructions == instructions);
  CHECK(log.stats.units.at("activation_unit").busy_cycles == busy);
  CHECK(log.stats.macs == 0);
}

}  // namespace

// ============================================================================
// Values
// ============================================================================

TEST_CASE("VEC computes ADD, SUB, MUL, MAX and MIN lane by lane, then q and f", "[vec]") {
  // Disjoint A, B and output ranges; every operation, activation, broadcast
  // or not, registers at their extremes. Counts show that the extremes were
  // reached (saturation both ways, every operation and function).
  std::mt19937 rng(20261205);
  std::uint64_t low = 0, high = 0, middle = 0;
  unsigned ops[5] = {}, fns[4] = {}, broadcasts = 0;
  for (unsigned n : {4u, 8u, 16u}) {
    for (unsigned round = 0; round < 150; ++round) {
      const ArchConfig cfg = make_config(n, static_cast<Cycle>(pick(rng, 1, 5)));
      Regs r = random_regs(rng);
      r.broadcast = pick(rng, 0, 2) == 0;
      const auto rows = static_cast<std::uint64_t>(pick(rng, 1, 40));
      const std::uint64_t a = static_cast<std::uint64_t>(pick(rng, 0, 200));
      r.b_row = static_cast<std::uint64_t>(pick(rng, 300, 500));
      const std::uint64_t out = static_cast<std::uint64_t>(pick(rng, 600, 980));
      const Fn f = static_cast<Fn>(pick(rng, 0, 3));
      ++ops[r.op];
      ++fns[f];
      broadcasts += r.broadcast;
      CAPTURE(n, round, r, rows, a, out, int{f}, cfg.act_latency);

      model::Memories mem(cfg);
      fill_memories(mem, rng);
      // The reference reads every operand before any write (no overlap).
      model::Memories expect = mem;
      for (std::uint64_t i = 0; i < rows; ++i)
        for (std::uint64_t j = 0; j < n; ++j) {
          const int y = lane(r, f, mem.ub.row(a + i)[j], mem.ub.row(r.b_row + (r.broadcast ? 0 : i))[j]);
          expect.ub.row(out + i)[j] = static_cast<std::int8_t>(y);
          low += y == -128;
          high += y == 127;
          middle += y > -128 && y < 127;
        }
      run_both(cfg, r.text() + vec_text(f, a, out, rows) + "HLT\n", mem);
      INFO(first_ub_difference(mem, expect));
      CHECK(same_ub(mem, expect));
    }
  }
  for (unsigned k = 0; k < 5; ++k) CHECK(ops[k] >= 40);
  for (unsigned k = 0; k < 4; ++k) CHECK(fns[k] >= 40);
  CHECK(broadcasts >= 60);
  CHECK(low >= 1000);
  CHECK(high >= 1000);
  CHECK(middle >= 1000);
}

TEST_CASE("VEC's worked examples: a residual add, a per-channel multiply, max and min",
          "[vec]") {
  // Values worked out by hand from docs/isa.md and docs/quantization.md.
  const ArchConfig cfg = make_config(4);
  model::Memories mem(cfg);
  const auto put = [&](std::uint64_t row, std::vector<int> v) {
    for (std::size_t j = 0; j < v.size(); ++j) mem.ub.row(row)[j] = static_cast<std::int8_t>(v[j]);
  };
  const auto got = [&](std::uint64_t row) {
    return std::vector<int>(mem.ub.row(row), mem.ub.row(row) + 4);
  };
  put(0, {10, -3, 127, -128});
  put(1, {0, 1, 2, 3});
  put(100, {5, 5, -128, 127});
  put(101, {7, -7, 0, 100});
  put(500, {2, -1, 0, 3});
  // ADD, za = -3, zb = 5, da = 2, db = 3, SETQ 1, 1, 0 (halve, ties up):
  //   row 0: 2*13 + 3*0 = 26 -> 13; 2*0 + 0 = 0 -> 0; 2*130 + 3*(-133) = -139 -> -69.5 -> -69;
  //          2*(-125) + 3*122 = 116 -> 58.
  //   row 1: 2*3 + 3*2 = 12 -> 6; 2*4 + 3*(-12) = -28 -> -14; 2*5 + 3*(-5) = -5 -> -2.5 -> -2;
  //          2*6 + 3*95 = 297 -> 148.5 -> 149 -> 127 (saturated).
  run_both(cfg,
           "SETQ 1, 1, 0\nVSRC 100, -3, 5\nVSCL 2, 3, 0\nVEC 0, 200, 2\n"
           // MUL by the broadcast row 500 (za = zb = 0), Z = -1, ReLU at Z.
           "SETQ 1, 0, -1\nVSRC.B 500, 0, 0\nVSCL 0, 0, 2\nVEC.R 0, 210, 2\n"
           // MAX and MIN of 1*(a - 0) and 1*(b - 0) (VSRC 100, 0, 0), S = 0, Z = 0.
           "SETQ 1, 0, 0\nVSRC 100, 0, 0\nVSCL 1, 1, 3\nVEC 0, 220, 2\nVSCL 1, 1, 4\n"
           "VEC 0, 230, 2\n"
           // SUB with a negative factor: 1*a - (-1)*b = a + b.
           "VSCL 1, -1, 1\nVEC 0, 240, 1\nHLT\n",
           mem);
  CHECK(got(200) == std::vector<int>{13, 0, -69, 58});
  CHECK(got(201) == std::vector<int>{6, -14, -2, 127});
  // MUL row 0: (10*2, -3*-1, 127*0, -128*3) = (20, 3, 0, -384); q with
  // M 1, S 0, Z -1: 19, 2, -1, -128 (saturated); ReLU at -1: 19, 2, -1, -1.
  CHECK(got(210) == std::vector<int>{19, 2, -1, -1});
  // row 1: (0, -1, 0, 9) -> -1, -2, -1, 8 -> ReLU: -1, -1, -1, 8.
  CHECK(got(211) == std::vector<int>{-1, -1, -1, 8});
  CHECK(got(220) == std::vector<int>{10, 5, 127, 127});
  CHECK(got(221) == std::vector<int>{7, 1, 2, 100});
  CHECK(got(230) == std::vector<int>{5, -3, -128, -128});
  CHECK(got(231) == std::vector<int>{0, -7, 0, 3});
  CHECK(got(240) == std::vector<int>{15, 2, -1, -1});  // a + b: 127 - 128, -128 + 127
}

TEST_CASE("A VEC whose output overlaps its operands reads before its writes land", "[vec]") {
  // In place (output = A or = B), and shifted by a few rows either way, for
  // pipeline depths around the shift: B's row k, read at s + k, or A's row
  // k, read at s + k + 1, sees the write of output row k' only if
  // s + k' + A + 3 is an earlier cycle.
  std::mt19937 rng(20261206);
  for (unsigned round = 0; round < 300; ++round) {
    const unsigned n = round % 2 ? 8 : 4;
    const ArchConfig cfg = make_config(n, static_cast<Cycle>(pick(rng, 1, 4)));
    Regs r = random_regs(rng);
    r.broadcast = pick(rng, 0, 3) == 0;
    const auto rows = static_cast<std::uint64_t>(pick(rng, 1, 12));
    const std::uint64_t a = static_cast<std::uint64_t>(pick(rng, 20, 40));
    r.b_row = pick(rng, 0, 1) ? a + static_cast<std::uint64_t>(pick(rng, 0, 6))
                              : static_cast<std::uint64_t>(pick(rng, 20, 40));
    const std::uint64_t base = pick(rng, 0, 1) ? a : r.b_row;
    const std::uint64_t out = static_cast<std::uint64_t>(static_cast<int>(base) + pick(rng, -6, 6));
    const Fn f = static_cast<Fn>(pick(rng, 0, 3));
    CAPTURE(round, n, r, rows, a, out, cfg.act_latency);
    model::Memories mem(cfg);
    fill_memories(mem, rng);
    model::Memories expect = mem;
    ref_vec(expect, r, f, a, out, rows, cfg.act_latency);
    run_both(cfg, r.text() + vec_text(f, a, out, rows) + "HLT\n", mem);
    INFO(first_ub_difference(mem, expect));
    CHECK(same_ub(mem, expect));
  }
}

TEST_CASE("VSRC, VSCL and SETQ after a VEC change neither its values nor its timing", "[vec]") {
  // The registers are read at issue: a VEC already issued keeps them.
  std::mt19937 rng(20261207);
  for (unsigned round = 0; round < 40; ++round) {
    const ArchConfig cfg = make_config(8, 3);
    Regs r = random_regs(rng);
    r.b_row = 300;
    const Regs later = random_regs(rng);
    model::Memories mem(cfg);
    fill_memories(mem, rng);
    model::Memories expect = mem;
    ref_vec(expect, r, kNone, 0, 600, 20, cfg.act_latency);
    Regs other = later;
    other.b_row = 400;
    const std::string src = r.text() + vec_text(kNone, 0, 600, 20) + other.text() + "HLT\n";
    const RunLog log = run_both(cfg, src, mem);
    CHECK(same_ub(mem, expect));
    // SETQ, VSRC, VSCL issue at 0, 1, 2; the VEC at 3 completes at
    // 3 + 20 + A + 3 = 29 (A = 3); the three after it at 4, 5, 6; HLT when
    // the VEC has completed.
    for (std::size_t pc = 0; pc < 3; ++pc) check_controller(log, pc, pc);
    check_unit(log, 3, 3, 29);
    for (std::size_t pc = 4; pc < 7; ++pc) check_controller(log, pc, pc);
    check_halt(log, 7, 30);
  }
}

// ============================================================================
// Timing
// ============================================================================

TEST_CASE("A VEC on an idle machine completes at c + rows + A + 3", "[vec][timing]") {
  for (unsigned n : {4u, 8u, 16u})
    for (Cycle a_lat : {1u, 2u, 5u})
      for (std::uint64_t rows : {1u, 2u, 17u}) {
        CAPTURE(n, a_lat, rows);
        const ArchConfig cfg = make_config(n, a_lat);
        model::Memories mem(cfg);
        const RunLog log = run_both(
            cfg, "VSRC.B 100, 1, 2\nVSCL 3, 4, 0\nVEC.T 0, 200, " + std::to_string(rows) + "\nHLT\n",
            mem);
        check_controller(log, 0, 0);
        check_controller(log, 1, 1);
        check_unit(log, 2, 2, 2 + rows + a_lat + 3);
        check_halt(log, 3, 2 + rows + a_lat + 3 + 1);
        check_stalls(log, {{StallCause::Drain, rows + a_lat + 3}});
        // Busy from s = 3 to d = 2 + rows + A + 3.
        check_act_unit(log, 1, rows + a_lat + 3);
      }
}

TEST_CASE("A VEC waits until every earlier ACT or VEC has completed, and an ACT follows at c + rows + 3",
          "[vec][timing]") {
  // ACT (R1 rows) at 0: d = R1 + A; the VEC issues at d + 1 (unit busy from
  // 1 to R1 + A); an ACT after the VEC (R2 rows, issued at c, d = c + R2 +
  // A + 3) at c + R2 + 3, its first write (A after its start) the cycle after
  // the VEC's last; a second VEC after that ACT at its completion + 1.
  for (Cycle a_lat : {1u, 3u}) {
    for (std::uint64_t r1 : {1u, 6u}) {
      const std::uint64_t r2 = 5, r3 = 4;
      CAPTURE(a_lat, r1);
      const ArchConfig cfg = make_config(8, a_lat);
      model::Memories mem(cfg);
      const std::string src = "ACT 0, 0, " + std::to_string(r1) + "\n" +
                              "VEC 100, 200, " + std::to_string(r2) + "\n" +
                              "ACT 10, 300, " + std::to_string(r3) + "\n" +
                              "VEC 400, 500, 2\nHLT\n";
      const RunLog log = run_both(cfg, src, mem);
      const Cycle d0 = r1 + a_lat;
      check_unit(log, 0, 0, d0);
      const Cycle c1 = d0 + 1, d1 = c1 + r2 + a_lat + 3;
      check_unit(log, 1, c1, d1);
      const Cycle c2 = c1 + r2 + 3, d2 = c2 + r3 + a_lat;
      check_unit(log, 2, c2, d2);
      const Cycle c3 = d2 + 1, d3 = c3 + 2 + a_lat + 3;
      check_unit(log, 3, c3, d3);
      check_halt(log, 4, d3 + 1);
      check_stalls(log, {{StallCause::UnitBusy, (c1 - 1) + (c2 - c1 - 1) + (c3 - c2 - 1)},
                         {StallCause::Drain, d3 - c3}});
      // Busy from 1 to d3 but in the cycles between a completion and the
      // waiting VEC's start: d0 + 1 = c1 and d2 + 1 = c3.
      check_act_unit(log, 4, d3 - 2);
    }
  }
}

TEST_CASE("A VEC waits for an RHM writing A's rows, B's rows or its output rows", "[vec][timing]") {
  // RHM h, u, R at 0 completes at D = Lh + ceil(R*N/Bh); a dependent VEC
  // issues at D + 1. B's range is rows b_row .. b_row + rows - 1, or the one
  // row b_row with broadcast: an RHM writing b_row + 1 does not hold a
  // broadcast VEC.
  const ArchConfig cfg = make_config(8, 2);
  const Cycle dma = cfg.host_latency + (4 * 8 + cfg.host_bytes_per_cycle - 1) / cfg.host_bytes_per_cycle;
  struct Case {
    const char* vsrc;
    std::uint64_t rhm_row;
    bool waits;
    StallCause cause;
  };
  const Case cases[] = {
      {"VSRC 100, 0, 0", 3, true, StallCause::Raw},       // A's rows 0..5
      {"VSRC 100, 0, 0", 104, true, StallCause::Raw},     // B's rows 100..105
      {"VSRC 100, 0, 0", 198, true, StallCause::Waw},     // output 200..205
      {"VSRC.B 100, 0, 0", 97, true, StallCause::Raw},    // B's one row 100 in 97..100
      {"VSRC.B 100, 0, 0", 101, false, StallCause::Raw},  // 101..104: not B's row
      {"VSRC 100, 0, 0", 106, false, StallCause::Raw},    // past B
      {"VSRC 100, 0, 0", 50, false, StallCause::Raw},     // elsewhere
  };
  for (const Case& k : cases) {
    CAPTURE(k.vsrc, k.rhm_row);
    model::Memories mem(cfg);
    const std::string src = std::string(k.vsrc) + "\nRHM 0, " + std::to_string(k.rhm_row) +
                            ", 4\nVEC 0, 200, 6\nHLT\n";
    const RunLog log = run_both(cfg, src, mem);
    check_unit(log, 1, 1, 1 + dma);
    const Cycle c = k.waits ? 1 + dma + 1 : 2;
    check_unit(log, 2, c, c + 6 + 2 + 3);  // d = c + rows + A + 3
    if (k.waits)
      CHECK(log.stats.stall_cycles[static_cast<unsigned>(k.cause)] == c - 2);
    else
      CHECK(log.stats.stall_cycles[static_cast<unsigned>(StallCause::Raw)] +
                log.stats.stall_cycles[static_cast<unsigned>(StallCause::Waw)] ==
            0);
  }
}

TEST_CASE("Instructions of other units wait for a VEC's output rows, and WHM reads its result",
          "[vec][timing]") {
  // WHM of the output (RAW) issues at the VEC's d + 1; an RHM overwriting
  // B's rows (WAR) too; an MMC reading rows elsewhere does not wait.
  const ArchConfig cfg = make_config(4, 2);
  model::Memories mem(cfg);
  std::mt19937 rng(7);
  fill_memories(mem, rng);
  model::Memories expect = mem;
  Regs r;
  r.b_row = 100;
  ref_vec(expect, r, kNone, 0, 200, 3, 2);
  const RunLog log = run_both(cfg,
                              "VSRC 100, 0, 0\nVEC 0, 200, 3\nWHM 200, 40, 3\nRHM 0, 101, 1\n"
                              "MMC 300, 0, 2\nHLT\n",
                              mem);
  check_unit(log, 1, 1, 1 + 3 + 2 + 3);  // d = c + rows + A + 3
  const Cycle d = 9;
  CHECK(log.retired[2].issue == d + 1);
  // The RHM waits behind the WHM (host DMA busy) in any case; its WAR with
  // the VEC is over by then. The MMC issues in the cycle after the RHM.
  CHECK(log.retired[4].issue == log.retired[3].issue + 1);
  for (std::uint64_t i = 0; i < 3; ++i)
    CHECK(std::equal(mem.host.row(40 + i), mem.host.row(40 + i) + 4, expect.ub.row(200 + i)));
}

TEST_CASE("A VEC whose operand B or output runs past the end of the UB faults at issue",
          "[vec][timing]") {
  const ArchConfig cfg = make_config(8, 2);
  struct Case {
    std::string src;
    const char* range;
  };
  const Case cases[] = {
      {"VSRC 1020, 0, 0\nVEC 0, 0, 5\nHLT\n", "rows 1020..1024"},
      {"VSRC.B 1023, 0, 0\nVEC 0, 1020, 5\nHLT\n", "rows 1020..1024"},
      {"VSRC 0, 0, 0\nVEC 1022, 0, 3\nHLT\n", "rows 1022..1024"},
  };
  for (const Case& k : cases) {
    CAPTURE(k.src);
    model::Memories mem(cfg);
    const RunLog log = run_both(cfg, k.src, mem, /*halts=*/false);
    REQUIRE(log.fault);
    CHECK(log.fault->pc == 1);
    CHECK(log.fault->cycle == 1);
    CHECK_THAT(log.fault->reason, Catch::Contains("unified buffer") && Catch::Contains(k.range));
  }
  // With broadcast, B is one row: b_row 1023 is in range.
  model::Memories mem(cfg);
  const RunLog log = run_both(cfg, "VSRC.B 1023, 0, 0\nVEC 0, 0, 5\nHLT\n", mem);
  CHECK(log.halted);
}
