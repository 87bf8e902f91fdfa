// POOL, POOL.A (pooling in the activation unit) and CWIN on the SystemC
// model, against references computed here from the specification alone
// (docs/isa.md "POOL, POOL.A", "CWIN", "ACT", "SETQ"; docs/microarchitecture.md
// "Activation unit", "Pooling", "Closed forms"):
//
// - max and average pooling layers written with plain loops over output
//   pixels, window positions and lanes, for random geometries, global
//   average pooling and windows entirely in the padding; the row-by-row
//   definition (output pixel i = (i / out_w, i % out_w), its window at
//   (y0 + oy*stride_y + dy, x0 + ox*stride_x + dx)) for geometries no layer
//   would use, several POOLs per program;
// - q(a) = sat8(((a*M + r) >> S) + Z) written out here, with SETQ values of
//   1/K scaling and extreme ones, so that the results saturate both ways;
// - the timing contract: position p of pixel i read at s + i*K + p, pixel i
//   written at s + (i+1)*K + A, d = s + rows*K + A = c + rows*K + A + 1; a
//   POOL issues only when every earlier ACT or POOL has completed (unit
//   busy), and the unit accepts its next ACT at c + rows*K + 1; CWIN is a
//   controller-only instruction (issue = start = completion);
// - hazards and the bounds fault over the whole map [map_row, map_row +
//   in_h*in_w) and the output rows [ub_row, ub_row + rows), as the registers
//   stand when the POOL issues; a POOL whose output overlaps its own map
//   against a cycle-by-cycle simulation of its reads and writes (a read sees
//   only the writes of earlier cycles).
//
// Nothing here comes from isa::ConvGeometry, isa::accesses or any other model
// code; the model is only run (at both levels of detail) and observed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "asm/assembler.h"
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
using testing::random_pad;
using testing::Stalls;
using Row = std::vector<std::int8_t>;

// ---- Machine, programs, runs ---------------------------------------------------

constexpr unsigned kSizes[] = {4, 8, 16};
constexpr std::uint64_t kUbRows = 1024;

ArchConfig make_config(unsigned n, Cycle act_latency = 2) {
  ArchConfig c = preset_config("small8");
  c.array_n = n;
  c.host_rows = 1024;
  c.weight_tiles = 32;
  c.ub_rows = kUbRows;
  c.acc_rows = 512;
  c.act_latency = act_latency;
  validate(c);
  return c;
}

// With `check_ranges` the assembler also checks every range against `cfg`.
isa::Program assemble(const ArchConfig& cfg, const std::string& src, bool check_ranges = true) {
  return testing::assemble_for(cfg, src, check_ranges, "pool.s");
}

model::RunOptions options(Detail detail) {
  model::RunOptions o;
  o.detail = detail;
  return o;
}

const char* detail_name(Detail d) { return d == Detail::Fast ? "fast" : "detailed"; }

// Runs `prog`, which must halt without a fault and retire every instruction
// in program order.
RunLog run(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem, Detail detail) {
  return testing::run_to_halt(cfg, prog, mem, options(detail));
}

RunLog run(const ArchConfig& cfg, const std::string& src, model::Memories& mem,
           Detail detail = Detail::Detailed) {
  return run(cfg, assemble(cfg, src), mem, detail);
}

// ---- Observing runs -------------------------------------------------------------


// The activation unit's statistics: `instructions` ACTs and POOLs, busy
// `busy` cycles; a POOL does no MACs and never uses the array.
void check_act_unit(const RunLog& log, std::uint64_t instructions, std::uint64_t busy) {
  REQUIRE(log.stats.units.count("activation_unit") == 1);
  CHECK(log.stats.units.at("activation_unit").instructions == instructions);
  CHECK(log.stats.units.at("activation_unit").busy_cycles == busy);
}

void check_no_array(const RunLog& log) {
  CHECK(log.stats.macs == 0);
  CHECK(log.stats.array_active_cycles == 0);
}

bool same_ub(const model::Memories& a, const model::Memories& b) {
  return std::equal(a.ub.data().begin(), a.ub.data().end(), b.ub.data().begin());
}

bool same_memories(const model::Memories& a, const model::Memories& b) {
  return same_ub(a, b) && a.host.same_contents(b.host) && a.acc.same_contents(b.acc) &&
         a.weights.same_contents(b.weights);
}

// The first UB row in which two memories differ, for failure messages.
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

// ---- Reference data ---------------------------------------------------------------


// ---- The registers, written out here ---------------------------------------------

// SETQ's M, S, Z and the convolution registers with CWIN's window, at their
// reset values (docs/isa.md section 1).
struct Regs {
  std::int64_t m = 1;
  int s = 0, z = 0;
  std::int64_t in_h = 1, in_w = 1, out_w = 1;
  std::int64_t stride_y = 1, stride_x = 1;
  int pad = 0;
  std::int64_t y0 = 0, x0 = 0;
  std::int64_t win_h = 1, win_w = 1;

  std::uint64_t window() const { return static_cast<std::uint64_t>(win_h * win_w); }
  std::uint64_t map_rows() const { return static_cast<std::uint64_t>(in_h * in_w); }

  std::string setq() const {
    return "SETQ " + std::to_string(m) + ", " + std::to_string(s) + ", " + std::to_string(z) + "\n";
  }
  std::string cmap() const {
    return "CMAP " + std::to_string(in_h) + ", " + std::to_string(in_w) + ", " +
           std::to_string(out_w) + "\n";
  }
  std::string cstr() const {
    return "CSTR " + std::to_string(stride_y) + ", " + std::to_string(stride_x) + ", " +
           std::to_string(pad) + "\n";
  }
  std::string ctap() const {
    return "CTAP " + std::to_string(y0) + ", " + std::to_string(x0) + "\n";
  }
  std::string cwin() const {
    return "CWIN " + std::to_string(win_h) + ", " + std::to_string(win_w) + "\n";
  }
  // All five register instructions, in this order.
  std::string all() const { return setq() + cmap() + cstr() + ctap() + cwin(); }
};

std::ostream& operator<<(std::ostream& os, const Regs& g) {
  return os << "SETQ " << g.m << "," << g.s << "," << g.z << " map " << g.in_h << "x" << g.in_w
            << " out_w " << g.out_w << " stride " << g.stride_y << "," << g.stride_x << " pad "
            << g.pad << " origin " << g.y0 << "," << g.x0 << " window " << g.win_h << "x"
            << g.win_w;
}

std::string pool_text(bool average, std::uint64_t map, std::uint64_t out, std::uint64_t rows) {
  return std::string(average ? "POOL.A " : "POOL ") + std::to_string(map) + ", " +
         std::to_string(out) + ", " + std::to_string(rows) + "\n";
}

// floor(v / 2^s), i.e. an arithmetic right shift, without relying on >> of
// a negative value.
std::int64_t floor_shift(std::int64_t v, int s) { return v >= 0 ? v >> s : -((-(v + 1)) >> s) - 1; }

int sat8(std::int64_t v) { return static_cast<int>(std::clamp<std::int64_t>(v, -128, 127)); }

// q(a) = sat8(((a*M + r) >> S) + Z), r = S > 0 ? 1 << (S-1) : 0 (docs/isa.md, ACT).
int requantize(std::int64_t a, std::int64_t m, int s, int z) {
  const std::int64_t r = s > 0 ? std::int64_t{1} << (s - 1) : 0;
  return sat8(floor_shift(a * m + r, s) + z);
}

int requantize(std::int64_t a, const Regs& g) { return requantize(a, g.m, g.s, g.z); }

// SETQ for a requantization M / 2^S of about `scale` / K (with K the window,
// as an average pool with input and output scales in ratio `scale` has), or
// one of the extremes: M negative, zero, the largest of either sign; S = 0,
// or large; Z at either end.
void random_setq(Regs& g, std::mt19937& rng) {
  if (pick(rng, 0, 2) != 0) {
    static const double kScales[] = {1.0, 1.0, 0.5, 2.0, 0.25, 3.0};
    const double scale = kScales[pick(rng, 0, 5)];
    g.s = pick(rng, 6, 24);
    g.m = std::max<std::int64_t>(
        1, std::llround(std::ldexp(scale / static_cast<double>(g.window()), g.s)));
    g.z = pick(rng, 0, 3) == 0 ? pick(rng, -128, 127) : pick(rng, -10, 10);
    return;
  }
  static const std::int64_t kMs[] = {-2147483648LL, 2147483647, -1, 0, 1, -3, 1000, -77777};
  static const int kSs[] = {0, 0, 1, 2, 31, 40, 62};
  static const int kZs[] = {-128, 127, 0, -1};
  g.m = pick(rng, 0, 3) == 0 ? pick(rng, -3000000, 3000000) : kMs[pick(rng, 0, 7)];
  g.s = kSs[pick(rng, 0, 6)];
  g.z = pick(rng, 0, 1) ? kZs[pick(rng, 0, 3)] : pick(rng, -128, 127);
}

// ---- References --------------------------------------------------------------------

// Output pixel i's window position p = (dy, dx) = (p / win_w, p % win_w), in
// row-major order: the map row (counted from the map's pixel (0, 0)) of input
// pixel (y0 + oy*stride_y + dy, x0 + ox*stride_x + dx), or none outside the
// in_h x in_w map.
std::optional<std::uint64_t> position_row(const Regs& g, std::uint64_t i, std::uint64_t p) {
  const auto oy = static_cast<std::int64_t>(i / static_cast<std::uint64_t>(g.out_w));
  const auto ox = static_cast<std::int64_t>(i % static_cast<std::uint64_t>(g.out_w));
  const auto dy = static_cast<std::int64_t>(p / static_cast<std::uint64_t>(g.win_w));
  const auto dx = static_cast<std::int64_t>(p % static_cast<std::uint64_t>(g.win_w));
  const std::int64_t iy = g.y0 + oy * g.stride_y + dy, ix = g.x0 + ox * g.stride_x + dx;
  if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) return std::nullopt;
  return static_cast<std::uint64_t>(iy * g.in_w + ix);
}

// One output pixel in the making: per lane the running maximum of the pixels
// inside the map (and whether there was one), or the running sum of x - pad.
struct Pixel {
  std::vector<std::int64_t> value;
  bool any = false;

  explicit Pixel(std::uint64_t n) : value(n, 0) {}
  void add(const std::int8_t* row, const Regs& g, bool average) {
    for (std::size_t j = 0; j < value.size(); ++j) {
      if (average)
        value[j] += std::int64_t{row[j]} - g.pad;
      else
        value[j] = any ? std::max<std::int64_t>(value[j], row[j]) : row[j];
    }
    any = true;
  }
  // A position outside the map: adds 0 to a sum, never wins a maximum.
  Row result(const Regs& g, bool average) const {
    Row out(value.size());
    for (std::size_t j = 0; j < value.size(); ++j)
      out[j] = static_cast<std::int8_t>(average ? requantize(value[j], g) : any ? value[j] : g.pad);
    return out;
  }
};

// POOL[.A] map, out, rows with plain loops over pixels, window rows and
// columns, and lanes, every read from the UB as it is before the POOL (valid
// when the output rows do not overlap the map), then the writes.
void ref_pool(model::Memories& mem, const Regs& g, bool average, std::uint64_t map,
              std::uint64_t out, std::uint64_t rows) {
  const std::uint64_t n = mem.ub.width();
  std::vector<Row> results;
  for (std::uint64_t i = 0; i < rows; ++i) {
    const std::int64_t oy = static_cast<std::int64_t>(i) / g.out_w;
    const std::int64_t ox = static_cast<std::int64_t>(i) % g.out_w;
    Row r(n);
    for (std::uint64_t j = 0; j < n; ++j) {
      std::int64_t sum = 0, best = 0;
      bool any = false;
      for (std::int64_t dy = 0; dy < g.win_h; ++dy)
        for (std::int64_t dx = 0; dx < g.win_w; ++dx) {
          const std::int64_t iy = g.y0 + oy * g.stride_y + dy;
          const std::int64_t ix = g.x0 + ox * g.stride_x + dx;
          if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) continue;  // adds 0
          const std::int64_t x = mem.ub.row(map + static_cast<std::uint64_t>(iy * g.in_w + ix))[j];
          sum += x - g.pad;
          best = any ? std::max(best, x) : x;
          any = true;
        }
      r[j] = static_cast<std::int8_t>(average ? requantize(sum, g) : any ? best : g.pad);
    }
    results.push_back(r);
  }
  for (std::uint64_t i = 0; i < rows; ++i)
    std::copy(results[i].begin(), results[i].end(), mem.ub.row(out + i));
}

// The same POOL simulated cycle by cycle, in the documented order: in cycle
// s + k (k = 0 .. rows*K + A) the unit reads window position k % K of pixel
// k / K (for k < rows*K; nothing for a position outside the map), and writes
// pixel i at k = (i + 1)*K + A (A + 1 cycles after its last read), the read
// seeing only the writes of earlier cycles. Valid whatever the overlap of map
// and output.
void ref_pool_cycles(model::Memories& mem, const Regs& g, bool average, std::uint64_t map,
                     std::uint64_t out, std::uint64_t rows, std::uint64_t a) {
  const std::uint64_t n = mem.ub.width(), k_win = g.window();
  Pixel pixel(n);
  struct Pending {
    std::uint64_t due, pixel;
    Row row;
  };
  std::deque<Pending> pending;
  for (std::uint64_t k = 0; k <= rows * k_win + a; ++k) {
    if (k > 0 && k % k_win == 0 && k <= rows * k_win) {
      pending.push_back({k + a, k / k_win - 1, pixel.result(g, average)});
      pixel = Pixel(n);
    }
    if (k < rows * k_win)
      if (const auto r = position_row(g, k / k_win, k % k_win))
        pixel.add(mem.ub.row(map + *r), g, average);
    for (; !pending.empty() && pending.front().due == k; pending.pop_front())
      std::copy(pending.front().row.begin(), pending.front().row.end(), mem.ub.row(out + pending.front().pixel));
  }
}

// ACT[.R] acc, ub, rows with the requantization m, s, z (docs/isa.md, ACT):
// UB[ub+i][j] = f(q(ACC[acc+i][j])), f = identity or max(y, Z).
void ref_act(model::Memories& mem, std::int64_t m, int s, int z, bool relu, std::uint64_t acc,
             std::uint64_t ub, std::uint64_t rows) {
  const std::uint64_t n = mem.ub.width();
  for (std::uint64_t i = 0; i < rows; ++i)
    for (std::uint64_t j = 0; j < n; ++j) {
      const int y = requantize(mem.acc.row(acc + i)[j], m, s, z);
      mem.ub.row(ub + i)[j] = static_cast<std::int8_t>(relu ? std::max(y, z) : y);
    }
}

// Host DMA: D_h = Lh + ceil(rows * N / Bh), d = c + D_h.
Cycle dma_duration(const ArchConfig& c, Cycle rows) {
  return c.host_latency + (rows * c.array_n + c.host_bytes_per_cycle - 1) / c.host_bytes_per_cycle;
}

// Counts of saturated average-pooling results across a test, to show that
// SETQ's extremes were reached.
struct Saturation {
  std::uint64_t low = 0, high = 0;
  void count(const model::Memories& mem, std::uint64_t out, std::uint64_t rows) {
    for (std::uint64_t i = 0; i < rows; ++i)
      for (std::uint64_t j = 0; j < mem.ub.width(); ++j) {
        low += mem.ub.row(out + i)[j] == -128;
        high += mem.ub.row(out + i)[j] == 127;
      }
  }
};

}  // namespace

// ============================================================================
// Values
// ============================================================================

TEST_CASE("POOL and POOL.A compute max and average pooling layers: random geometries", "[pool]") {
  // A pooling layer: an h x w map of N channels, a kh x kw window, strides
  // (sy, sx), padding (py, px) (CTAP -py, -px), out_h x out_w output pixels.
  // Max pooling over the pixels inside the map; average pooling of x - z_in
  // over all kh*kw positions (count_include_pad), requantized. Both POOLs of
  // the same map in one program: the second issues when the first has
  // completed, d1 + 1.
  std::mt19937 rng(20261215);
  Saturation sat;
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (unsigned round = 0; round < 200; ++round) {
      Regs g;
      g.in_h = pick(rng, 1, 9);
      g.in_w = pick(rng, 1, 9);
      const int py = pick(rng, 0, 3), px = pick(rng, 0, 3);
      g.win_h = std::min<std::int64_t>(pick(rng, 1, 4), g.in_h + 2 * py);
      g.win_w = std::min<std::int64_t>(pick(rng, 1, 4), g.in_w + 2 * px);
      g.stride_y = pick(rng, 1, 3);
      g.stride_x = pick(rng, 1, 3);
      g.y0 = -py;
      g.x0 = -px;
      g.pad = random_pad(rng);
      random_setq(g, rng);
      const std::int64_t out_h = (g.in_h + 2 * py - g.win_h) / g.stride_y + 1;
      g.out_w = (g.in_w + 2 * px - g.win_w) / g.stride_x + 1;
      const auto rows = static_cast<std::uint64_t>(out_h * g.out_w);
      const auto k = g.window();
      // Map, max output and average output in disjoint UB ranges.
      // (Maps of at most 81 rows, at most 15 x 15 = 225 output pixels.)
      const auto map = static_cast<std::uint64_t>(pick(rng, 0, 80));
      const auto out_max = static_cast<std::uint64_t>(pick(rng, 170, 400));
      const auto out_avg =
          static_cast<std::uint64_t>(pick(rng, 630, 1024 - static_cast<int>(rows)));
      const bool avg_first = pick(rng, 0, 1) == 1;
      CAPTURE(n, round, g, py, px, out_h, rows, map, out_max, out_avg, avg_first);

      model::Memories mem(cfg);
      fill_memories(mem, rng);
      // The layer: out[oy][ox][j] from the padded image, position by position.
      model::Memories expect = mem;
      for (std::int64_t oy = 0; oy < out_h; ++oy)
        for (std::int64_t ox = 0; ox < g.out_w; ++ox)
          for (unsigned j = 0; j < n; ++j) {
            std::int64_t best = std::numeric_limits<std::int64_t>::min(), sum = 0;
            for (std::int64_t dy = 0; dy < g.win_h; ++dy)
              for (std::int64_t dx = 0; dx < g.win_w; ++dx) {
                const std::int64_t y = oy * g.stride_y + dy - py, x = ox * g.stride_x + dx - px;
                if (y < 0 || y >= g.in_h || x < 0 || x >= g.in_w) continue;
                const std::int64_t v =
                    mem.ub.row(map + static_cast<std::uint64_t>(y * g.in_w + x))[j];
                best = std::max(best, v);
                sum += v - g.pad;
              }
            const std::uint64_t i = static_cast<std::uint64_t>(oy * g.out_w + ox);
            expect.ub.row(out_max + i)[j] = static_cast<std::int8_t>(
                best == std::numeric_limits<std::int64_t>::min() ? g.pad : best);
            expect.ub.row(out_avg + i)[j] = static_cast<std::int8_t>(requantize(sum, g));
          }
      sat.count(expect, out_avg, rows);

      const std::string first =
          avg_first ? pool_text(true, map, out_avg, rows) : pool_text(false, map, out_max, rows);
      const std::string second =
          avg_first ? pool_text(false, map, out_max, rows) : pool_text(true, map, out_avg, rows);
      const std::string src = g.all() + first + second + "HLT\n";
      INFO(src);
      // SETQ, CMAP, CSTR, CTAP, CWIN at 0..4; the POOLs at 5 and d1 + 1
      // (d = c + rows*K + A + 1).
      const Cycle a = cfg.act_latency;
      const Cycle c1 = 5, d1 = c1 + rows * k + a + 1, c2 = d1 + 1, d2 = c2 + rows * k + a + 1;
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail_name(detail));
        model::Memories got = mem;
        const RunLog log = run(cfg, src, got, detail);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
        for (std::size_t pc = 0; pc < 5; ++pc) check_controller(log, pc, pc);
        check_unit(log, 5, c1, d1);
        check_unit(log, 6, c2, d2);
        check_halt(log, 7, d2 + 1);
        check_stalls(log, {{StallCause::UnitBusy, c2 - 6}, {StallCause::Drain, d2 - c2}});
        check_act_unit(log, 2, 2 * (rows * k + a + 1));
        check_no_array(log);
        CHECK(log.stats.instructions == 8);
      }
    }
  }
  // SETQ's extremes saturated some averages at each end.
  CHECK(sat.low > 0);
  CHECK(sat.high > 0);
}

TEST_CASE("POOL and POOL.A follow the row-by-row definition for any geometry", "[pool]") {
  // Programs of one to four POOLs, each after random register instructions
  // (or none: the registers keep their values), out_w unrelated to the map
  // (wider or narrower), origins anywhere (far outside too), strides up to
  // 255; outputs disjoint from their own map but a later POOL's map often on
  // an earlier one's output (the unit runs them in order). The reference
  // applies each in program order; the timing is that of a straight-line
  // program: controller instructions one per cycle, each POOL at the earliest
  // after the previous POOL's completion, HLT after the last completion.
  std::mt19937 rng(77);
  Saturation sat;
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (unsigned round = 0; round < 150; ++round) {
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      model::Memories expect = mem;
      Regs g;  // the reset values
      std::string src;
      Cycle next = 0;  // the cycle the next instruction can issue, if nothing stalls it
      std::optional<Cycle> d_prev;  // the previous POOL's completion
      Cycle unit_busy = 0, busy = 0;
      std::vector<std::pair<std::size_t, std::pair<Cycle, Cycle>>> pools;  // pc, (c, d)
      std::size_t pc = 0;
      std::optional<std::pair<std::uint64_t, std::uint64_t>> last_out;
      const int count = pick(rng, 1, 4);
      for (int p = 0; p < count; ++p) {
        std::string regs;
        if (pick(rng, 0, 2) != 0) {
          g.in_h = pick(rng, 1, 9);
          g.in_w = pick(rng, 1, 9);
          g.out_w = pick(rng, 0, 5) == 0 ? 65535 : pick(rng, 1, 12);
          regs += g.cmap();
        }
        if (pick(rng, 0, 2) != 0) {
          g.stride_y = pick(rng, 0, 5) == 0 ? 255 : pick(rng, 1, 3);
          g.stride_x = pick(rng, 0, 5) == 0 ? 255 : pick(rng, 1, 3);
          g.pad = random_pad(rng);
          regs += g.cstr();
        }
        if (pick(rng, 0, 2) != 0) {
          g.y0 = pick(rng, 0, 7) == 0 ? (pick(rng, 0, 1) ? -32768 : 32767) : pick(rng, -6, 6);
          g.x0 = pick(rng, 0, 7) == 0 ? (pick(rng, 0, 1) ? -32768 : 32767) : pick(rng, -6, 6);
          regs += g.ctap();
        }
        if (pick(rng, 0, 2) != 0) {
          g.win_h = pick(rng, 1, 4);
          g.win_w = pick(rng, 1, 4);
          regs += g.cwin();
        }
        if (pick(rng, 0, 2) != 0) {
          random_setq(g, rng);
          regs += g.setq();
        }
        const bool average = pick(rng, 0, 1) == 1;
        const auto rows = static_cast<std::uint64_t>(pick(rng, 1, 40));
        const std::uint64_t mr = g.map_rows();
        std::uint64_t map =
            static_cast<std::uint64_t>(pick(rng, 0, static_cast<int>(kUbRows - mr)));
        if (last_out && pick(rng, 0, 2) == 0 && last_out->first + mr <= kUbRows)
          map = last_out->first;  // pool what the previous POOL wrote
        std::uint64_t out;
        do {
          out = static_cast<std::uint64_t>(pick(rng, 0, static_cast<int>(kUbRows - rows)));
        } while (out < map + mr && map < out + rows);
        last_out = std::make_pair(out, rows);
        src += regs + pool_text(average, map, out, rows);
        ref_pool(expect, g, average, map, out, rows);
        if (average) sat.count(expect, out, rows);

        // Timing: the register instructions, then the POOL.
        const std::size_t n_regs =
            static_cast<std::size_t>(std::count(regs.begin(), regs.end(), '\n'));
        pc += n_regs;
        next += n_regs;
        Cycle c = next;
        if (d_prev) c = std::max(c, *d_prev + 1);
        unit_busy += c - next;
        const Cycle d = c + rows * g.window() + cfg.act_latency + 1;
        pools.push_back({pc, {c, d}});
        busy += rows * g.window() + cfg.act_latency + 1;
        d_prev = d;
        next = c + 1;
        ++pc;
      }
      src += "HLT\n";
      const Cycle c_hlt = std::max(next, *d_prev + 1);
      INFO("program:\n" << src);
      const isa::Program prog = assemble(cfg, src);
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(n, round, detail_name(detail));
        model::Memories got = mem;
        const RunLog log = run(cfg, prog, got, detail);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
        for (const auto& [ppc, cd] : pools) check_unit(log, ppc, cd.first, cd.second);
        check_halt(log, pc, c_hlt);
        check_stalls(log, {{StallCause::UnitBusy, unit_busy}, {StallCause::Drain, c_hlt - next}});
        check_act_unit(log, pools.size(), busy);
        check_no_array(log);
      }
    }
  }
  CHECK(sat.low > 0);
  CHECK(sat.high > 0);
}

TEST_CASE("Global average and max pooling: one output pixel whose window is the whole map",
          "[pool]") {
  // CMAP h, w, 1; CTAP 0, 0; CWIN h, w; POOL.A m, u, 1 with M / 2^S ~ 1/(h*w):
  // the mean of x - pad over the map, requantized, for maps up to 16 x 16.
  std::mt19937 rng(4);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    std::vector<std::pair<int, int>> maps = {{1, 1}, {16, 16}, {7, 7}, {1, 16}, {16, 1}, {3, 5}};
    for (int extra = 0; extra < 10; ++extra) maps.push_back({pick(rng, 1, 16), pick(rng, 1, 16)});
    for (const auto& [h, w] : maps) {
      Regs g;
      g.in_h = g.win_h = h;
      g.in_w = g.win_w = w;
      g.out_w = 1;
      g.pad = random_pad(rng);
      const std::uint64_t k = g.window();
      // Exactly 1/K when K is a power of two, else rounded.
      g.s = 20;
      g.m = std::llround(std::ldexp(1.0 / static_cast<double>(k), g.s));
      g.z = pick(rng, -20, 20);
      const auto map = static_cast<std::uint64_t>(pick(rng, 0, static_cast<int>(kUbRows - k) - 2));
      const std::uint64_t out_avg = map < 2 ? kUbRows - 2 : 0, out_max = out_avg + 1;
      CAPTURE(n, h, w, g, map, out_avg);
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      model::Memories expect = mem;
      for (unsigned j = 0; j < n; ++j) {
        std::int64_t sum = 0, best = -128;
        for (std::uint64_t r = 0; r < k; ++r) {
          sum += mem.ub.row(map + r)[j] - g.pad;
          best = std::max<std::int64_t>(best, mem.ub.row(map + r)[j]);
        }
        expect.ub.row(out_avg)[j] = static_cast<std::int8_t>(requantize(sum, g));
        expect.ub.row(out_max)[j] = static_cast<std::int8_t>(best);
        if (k <= 64) {
          // The rounded mean, within one of the exact one: M / 2^S is 1/K
          // up to 2^-21, and the sum at most 255 K in magnitude.
          const double mean = static_cast<double>(sum) / static_cast<double>(k) + g.z;
          CHECK(std::abs(expect.ub.row(out_avg)[j] - std::clamp(mean, -128.0, 127.0)) <= 1.0);
        }
      }
      const std::string src =
          g.all() + pool_text(true, map, out_avg, 1) + pool_text(false, map, out_max, 1) + "HLT\n";
      INFO(src);
      const Cycle a = cfg.act_latency;  // d = c + K + A + 1 for one pixel
      const Cycle c1 = 5, d1 = c1 + k + a + 1, c2 = d1 + 1, d2 = c2 + k + a + 1;
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail_name(detail));
        model::Memories got = mem;
        const RunLog log = run(cfg, src, got, detail);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
        check_unit(log, 5, c1, d1);
        check_unit(log, 6, c2, d2);
        check_halt(log, 7, d2 + 1);
      }
    }
  }
}

TEST_CASE("A window entirely in the padding gives pad (max) or q(0) (average)", "[pool]") {
  // No position of any window inside the map: max pooling gives `pad` in
  // every lane, average pooling q(0) = sat8(((0*M + r) >> S) + Z) = Z,
  // whatever the UB holds.
  std::mt19937 rng(5);
  struct Origin {
    std::int64_t y0, x0, stride_y, stride_x;
  };
  // A 4 x 6 map, output rows of 5 pixels, 3 x 2 windows.
  const std::vector<Origin> origins = {
      {-32768, -32768, 1, 1}, {32767, 32767, 255, 255}, {-32768, 0, 255, 1},
      {0, 32767, 1, 1},       {-1000, 3, 2, 2},         {4, 0, 1, 1},  // y0 = in_h
      {-3, 0, 255, 1},  // dy < 3 stays above row 0; the next output row is far below
      {0, -7, 1, 1},    // ox - 7 + dx < 0 for ox < 5, dx < 2
  };
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Origin& o : origins) {
      for (int pad : {-128, -1, 0, 1, 127, 42}) {
        Regs g;
        g.in_h = 4;
        g.in_w = 6;
        g.out_w = 5;
        g.stride_y = o.stride_y;
        g.stride_x = o.stride_x;
        g.pad = pad;
        g.y0 = o.y0;
        g.x0 = o.x0;
        g.win_h = 3;
        g.win_w = 2;
        random_setq(g, rng);
        // {-3, 0} with stride 255: only output row 0 (i < 5) lies in the padding.
        const std::uint64_t rows = o.y0 == -3 ? 5 : 23;
        CAPTURE(n, g);
        model::Memories mem(cfg);
        fill_memories(mem, rng);
        const std::string src =
            g.all() + pool_text(false, 10, 50, rows) + pool_text(true, 10, 100, rows) + "HLT\n";
        INFO(src);
        const int q0 = sat8(g.z);  // floor(r / 2^S) = 0 for r = 2^(S-1) or 0
        CHECK(q0 == requantize(0, g));
        model::Memories expect = mem;
        for (std::uint64_t i = 0; i < rows; ++i)
          for (unsigned j = 0; j < n; ++j) {
            expect.ub.row(50 + i)[j] = static_cast<std::int8_t>(pad);
            expect.ub.row(100 + i)[j] = static_cast<std::int8_t>(q0);
          }
        for (Detail detail : {Detail::Detailed, Detail::Fast}) {
          CAPTURE(detail_name(detail));
          model::Memories got = mem;
          const RunLog log = run(cfg, src, got, detail);
          INFO(first_ub_difference(got, expect));
          CHECK(same_memories(got, expect));
          // Positions outside the map take their cycle too.
          const Cycle a = cfg.act_latency;  // d = c + rows*K + A + 1
          const Cycle d1 = 5 + rows * 6 + a + 1, d2 = d1 + 1 + rows * 6 + a + 1;
          check_unit(log, 5, 5, d1);
          check_unit(log, 6, d1 + 1, d2);
        }
      }
    }
  }
}

TEST_CASE("Pixels outside the map never win the maximum, and add 0 to the average", "[pool]") {
  // A 3 x 3 map of all -128 (or all 127) with pad 127 (or -128), 3 x 3
  // windows at stride 1 with padding 1: every window has 4, 6 or 9 pixels
  // inside. Max: -128 (the map) everywhere, never the pad 127. Average with
  // M = 1, S = 0, Z = 0: the count inside times (x - pad), saturated.
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const auto& [x, pad] :
         std::vector<std::pair<int, int>>{{-128, 127}, {127, -128}, {5, 7}, {-3, -1}}) {
      CAPTURE(n, x, pad);
      model::Memories mem(cfg);
      std::mt19937 rng(static_cast<unsigned>(x + 1000 * pad + n));
      fill_memories(mem, rng);
      for (std::uint64_t r = 0; r < 9; ++r) std::fill(mem.ub.row(r), mem.ub.row(r) + n, x);
      const std::string src = "CMAP 3, 3, 3\nCSTR 1, 1, " + std::to_string(pad) +
                              "\nCTAP -1, -1\nCWIN 3, 3\nPOOL 0, 20, 9\nPOOL.A 0, 40, 9\nHLT\n";
      INFO(src);
      model::Memories expect = mem;
      // Pixels inside each window: corners 4, edges 6, the centre 9.
      const int inside[9] = {4, 6, 4, 6, 9, 6, 4, 6, 4};
      for (std::uint64_t i = 0; i < 9; ++i)
        for (unsigned j = 0; j < n; ++j) {
          expect.ub.row(20 + i)[j] = static_cast<std::int8_t>(x);
          expect.ub.row(40 + i)[j] = static_cast<std::int8_t>(sat8(inside[i] * (x - pad)));
        }
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail_name(detail));
        model::Memories got = mem;
        run(cfg, src, got, detail);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
      }
    }
  }
}

// ============================================================================
// Timing
// ============================================================================

TEST_CASE("CWIN issues, starts and completes in one cycle", "[pool][timing]") {
  for (unsigned n : kSizes) {
    CAPTURE(n);
    const ArchConfig cfg = make_config(n);
    {
      // The whole range of both fields; no POOL reads the window.
      const std::string src =
          "CWIN 1, 1\nCWIN 255, 255\nCWIN 1, 255\nCWIN 255, 1\nCWIN 2, 3\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      const RunLog log = run(cfg, src, mem);
      for (std::size_t pc = 0; pc < 5; ++pc) check_controller(log, pc, pc);
      check_halt(log, 5, 5);
      check_stalls(log, {});
      CHECK(log.stats.instructions == 6);
      check_no_array(log);
      for (const auto& [name, u] : log.stats.units) {
        CAPTURE(name);
        CHECK(u.instructions == 0);
        CHECK(u.busy_cycles == 0);
      }
    }
    {
      // Behind a POOL in flight (and an MMC): they wait for nothing.
      const std::string src = "MMC 500, 0, 5\nPOOL 0, 100, 7\nCWIN 3, 3\nCWIN 2, 1\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      const RunLog log = run(cfg, src, mem);
      const Cycle d_m = 0 + 5 + 2 * n, d_p = 1 + 7 + cfg.act_latency + 1;
      check_unit(log, 0, 0, d_m);
      check_unit(log, 1, 1, d_p);
      check_controller(log, 2, 2);
      check_controller(log, 3, 3);
      check_halt(log, 4, std::max(d_m, d_p) + 1);
    }
  }
}

TEST_CASE("A POOL on an idle machine completes at c + rows*K + A + 1", "[pool][timing]") {
  // CMAP at 0, CWIN at 1, the POOL at c = 2, completion c + rows*K + A + 1, HLT the
  // cycle after; the activation unit busy from start to completion.
  std::mt19937 rng(12);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const auto& [wh, ww] : std::vector<std::pair<Cycle, Cycle>>{
             {1, 1}, {2, 3}, {3, 2}, {4, 4}, {1, 7}, {255, 1}, {16, 16}}) {
      for (Cycle rows : {Cycle{1}, Cycle{5}, Cycle{17}}) {
        for (bool average : {false, true}) {
          CAPTURE(n, wh, ww, rows, average);
          const Cycle k = wh * ww;
          const std::string src = "CMAP 9, 9, 9\nCWIN " + std::to_string(wh) + ", " +
                                  std::to_string(ww) + "\n" + pool_text(average, 0, 200, rows) +
                                  "HLT\n";
          INFO(src);
          model::Memories mem(cfg);
          fill_memories(mem, rng);
          Regs g;
          g.in_h = g.in_w = g.out_w = 9;
          g.win_h = static_cast<std::int64_t>(wh);
          g.win_w = static_cast<std::int64_t>(ww);
          model::Memories expect = mem;
          ref_pool(expect, g, average, 0, 200, rows);
          for (Detail detail : {Detail::Detailed, Detail::Fast}) {
            CAPTURE(detail_name(detail));
            model::Memories got = mem;
            const RunLog log = run(cfg, src, got, detail);
            const Cycle c = 2, d = c + rows * k + cfg.act_latency + 1;
            check_controller(log, 0, 0);
            check_controller(log, 1, 1);
            check_unit(log, 2, c, d);
            check_halt(log, 3, d + 1);
            check_stalls(log, {{StallCause::Drain, d - c}});
            check_act_unit(log, 1, rows * k + cfg.act_latency + 1);
            check_no_array(log);
            CHECK(log.stats.instructions == 4);
            CHECK(same_memories(got, expect));
          }
        }
      }
    }
  }
}

TEST_CASE("A POOL waits until an earlier ACT has completed", "[pool][timing]") {
  // ACT acc, u, ra issued at c_a completes at d_a = c_a + ra + A (its last
  // row written at s + ra - 1 + A); a POOL after it issues at d_a + 1 (unit
  // busy from c_a + 1 on), though another ACT could issue at c_a + ra.
  for (unsigned n : kSizes) {
    for (Cycle a : {Cycle{1}, Cycle{2}, Cycle{5}}) {
      const ArchConfig cfg = make_config(n, a);
      for (Cycle ra : {Cycle{1}, Cycle{3}, Cycle{10}}) {
        for (Cycle rp : {Cycle{1}, Cycle{4}}) {
          CAPTURE(n, a, ra, rp);
          // CMAP 0, CWIN 1, ACT 2, POOL (a 2 x 2 window) at d_a + 1.
          const std::string src = "CMAP 3, 3, 2\nCWIN 2, 2\nACT 0, 300, " + std::to_string(ra) +
                                  "\nPOOL 0, 100, " + std::to_string(rp) + "\nHLT\n";
          INFO(src);
          model::Memories mem(cfg);
          std::mt19937 rng(static_cast<unsigned>(n * 100 + a * 10 + ra + rp));
          fill_memories(mem, rng);
          Regs g;
          g.in_h = g.in_w = 3;
          g.out_w = 2;
          g.win_h = g.win_w = 2;
          model::Memories expect = mem;
          ref_act(expect, 1, 0, 0, false, 0, 300, ra);
          ref_pool(expect, g, false, 0, 100, rp);
          const Cycle c_a = 2, d_a = c_a + ra + a;
          const Cycle c_p = d_a + 1, d_p = c_p + rp * 4 + a + 1;
          for (Detail detail : {Detail::Detailed, Detail::Fast}) {
            CAPTURE(detail_name(detail));
            model::Memories got = mem;
            const RunLog log = run(cfg, src, got, detail);
            check_unit(log, 2, c_a, d_a);
            check_unit(log, 3, c_p, d_p);
            check_halt(log, 4, d_p + 1);
            check_stalls(log, {{StallCause::UnitBusy, c_p - 3}, {StallCause::Drain, d_p - c_p}});
            // Busy [c_a + 1, d_a] and [c_p + 1, d_p]: idle in cycle c_p = d_a + 1.
            check_act_unit(log, 2, (ra + a) + (rp * 4 + a + 1));
            CHECK(same_memories(got, expect));
          }
        }
      }
    }
  }
}

TEST_CASE("Two ACTs then a POOL: the POOL waits for the second ACT's completion",
          "[pool][timing]") {
  for (unsigned n : kSizes) {
    for (Cycle a : {Cycle{1}, Cycle{4}}) {
      const ArchConfig cfg = make_config(n, a);
      CAPTURE(n, a);
      // ACT at 0 (7 rows), ACT at 7 (2 rows, d = 7 + 2 + A), POOL after it.
      const std::string src = "ACT 0, 300, 7\nACT 10, 310, 2\nPOOL 0, 100, 3\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      const RunLog log = run(cfg, src, mem);
      const Cycle d1 = 7 + a, c2 = 7, d2 = c2 + 2 + a, c_p = d2 + 1, d_p = c_p + 3 + a + 1;
      check_unit(log, 0, 0, d1);
      check_unit(log, 1, c2, d2);
      check_unit(log, 2, c_p, d_p);
      check_halt(log, 3, d_p + 1);
      check_stalls(log, {{StallCause::UnitBusy, (c2 - 1) + (c_p - (c2 + 1))},
                         {StallCause::Drain, d_p - c_p}});
    }
  }
}

TEST_CASE("An ACT after a POOL issues at the POOL's c + rows*K + 1", "[pool][timing]") {
  // The unit writes in order: an ACT (which reads the ACC) issues at
  // c + rows*K + 1, its first write A cycles after its start following the
  // POOL's last at d_p = c + rows*K + A + 1; a POOL after a POOL issues at
  // d_p + 1 (every earlier instruction completed); a POOL after that ACT
  // waits for the ACT's completion.
  for (unsigned n : kSizes) {
    for (Cycle a : {Cycle{1}, Cycle{3}}) {
      const ArchConfig cfg = make_config(n, a);
      for (const auto& [wh, ww] : std::vector<std::pair<Cycle, Cycle>>{{1, 1}, {2, 3}, {4, 4}}) {
        for (Cycle rp : {Cycle{1}, Cycle{6}}) {
          const Cycle k = wh * ww;
          CAPTURE(n, a, wh, ww, rp);
          // CWIN 0; POOL 1; ACT at d_p1; POOL.A at d_act + 1; POOL at d_p2 + 1.
          const std::string src = "CMAP 8, 8, 8\nCWIN " + std::to_string(wh) + ", " +
                                  std::to_string(ww) + "\n" + pool_text(false, 0, 100, rp) +
                                  "ACT 7, 300, 5\n" + pool_text(true, 0, 150, rp) +
                                  pool_text(false, 64, 200, rp) + "HLT\n";
          INFO(src);
          model::Memories mem(cfg);
          std::mt19937 rng(static_cast<unsigned>(n + a + k + rp));
          fill_memories(mem, rng);
          Regs g;
          g.in_h = g.in_w = g.out_w = 8;
          g.win_h = static_cast<std::int64_t>(wh);
          g.win_w = static_cast<std::int64_t>(ww);
          model::Memories expect = mem;
          ref_pool(expect, g, false, 0, 100, rp);
          ref_act(expect, 1, 0, 0, false, 7, 300, 5);
          ref_pool(expect, g, true, 0, 150, rp);
          ref_pool(expect, g, false, 64, 200, rp);
          const Cycle c1 = 2, d1 = c1 + rp * k + a + 1;
          const Cycle c_a = c1 + rp * k + 1, d_a = c_a + 5 + a;
          const Cycle c2 = d_a + 1, d2 = c2 + rp * k + a + 1;
          const Cycle c3 = d2 + 1, d3 = c3 + rp * k + a + 1;
          for (Detail detail : {Detail::Detailed, Detail::Fast}) {
            CAPTURE(detail_name(detail));
            model::Memories got = mem;
            const RunLog log = run(cfg, src, got, detail);
            check_unit(log, 2, c1, d1);
            check_unit(log, 3, c_a, d_a);
            check_unit(log, 4, c2, d2);
            check_unit(log, 5, c3, d3);
            check_halt(log, 6, d3 + 1);
            check_stalls(log,
                         {{StallCause::UnitBusy, (c_a - c1 - 1) + (c2 - c_a - 1) + (c3 - c2 - 1)},
                          {StallCause::Drain, d3 - c3}});
            // [c1+1, d1] and [c_a+1, d_a] overlap (c_a < d1): busy
            // [c1+1, d_a]; then [c2+1, d2], [c3+1, d3] after one idle cycle each.
            check_act_unit(log, 4, (d_a - c1) + 2 * (rp * k + a + 1));
            CHECK(same_memories(got, expect));
          }
        }
      }
    }
  }
}

TEST_CASE("CWIN, CMAP, CSTR, CTAP and SETQ after a POOL change neither its values nor its timing",
          "[pool][timing]") {
  // The registers are read at issue: the POOL.A (pc 5) keeps its 3 x 2
  // window, map, origin and requantization while the instructions after it
  // change them all; the next POOL uses the new ones.
  std::mt19937 rng(13);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    Regs a;
    a.m = 3;
    a.s = 4;
    a.z = -5;
    a.in_h = 5;
    a.in_w = 4;
    a.out_w = 2;
    a.stride_y = 2;
    a.stride_x = 2;
    a.pad = -7;
    a.y0 = -1;
    a.x0 = 0;
    a.win_h = 3;
    a.win_w = 2;
    Regs b;
    b.m = -9;
    b.s = 1;
    b.z = 100;
    b.in_h = 2;
    b.in_w = 2;
    b.out_w = 1;
    b.stride_y = 1;
    b.stride_x = 1;
    b.pad = 3;
    b.y0 = 0;
    b.x0 = 0;
    b.win_h = 1;
    b.win_w = 2;
    const std::string src = a.all() + "POOL.A 40, 200, 6\n" + b.all() + "POOL.A 40, 300, 2\nHLT\n";
    INFO(src);
    model::Memories mem(cfg);
    fill_memories(mem, rng);
    model::Memories expect = mem;
    ref_pool(expect, a, true, 40, 200, 6);
    ref_pool(expect, b, true, 40, 300, 2);
    const Cycle c1 = 5, d1 = c1 + 6 * 6 + cfg.act_latency + 1, c2 = d1 + 1,
                d2 = c2 + 2 * 2 + cfg.act_latency + 1;
    for (Detail detail : {Detail::Detailed, Detail::Fast}) {
      CAPTURE(n, detail_name(detail));
      model::Memories got = mem;
      const RunLog log = run(cfg, src, got, detail);
      check_unit(log, 5, c1, d1);
      for (std::size_t pc = 6; pc < 11; ++pc) check_controller(log, pc, pc);
      check_unit(log, 11, c2, d2);
      check_halt(log, 12, d2 + 1);
      INFO(first_ub_difference(got, expect));
      CHECK(same_memories(got, expect));
    }
  }
}

// ============================================================================
// Chained: an ACT writes a map, a POOL pools it
// ============================================================================

TEST_CASE("A POOL after an ACT pools the ACT's output", "[pool][timing]") {
  // SETQ for the ACT, the map registers, ACT[.R] of in_h*in_w ACC rows into
  // the map, another SETQ, POOL[.A] of the map. The POOL issues after the
  // ACT's completion, so it sees every row the ACT wrote: the reference is
  // the ACT (docs/isa.md, ACT) and then the POOL. The first geometry has
  // pixel 0 read the map's last row (the ACT's last write) first.
  std::mt19937 rng(14);
  for (unsigned n : kSizes) {
    for (Cycle a : {Cycle{1}, Cycle{2}, Cycle{6}}) {
      const ArchConfig cfg = make_config(n, a);
      for (unsigned round = 0; round < 8; ++round) {
        Regs act, g;
        random_setq(act, rng);
        if (round == 0) {
          g.in_h = 4;
          g.in_w = 3;
          g.out_w = 1;
          g.y0 = 3;
          g.x0 = 2;
          g.stride_y = 1;
        } else {
          g.in_h = pick(rng, 1, 6);
          g.in_w = pick(rng, 1, 6);
          g.out_w = pick(rng, 1, 4);
          g.stride_y = pick(rng, 1, 2);
          g.stride_x = pick(rng, 1, 2);
          g.y0 = pick(rng, -2, 1);
          g.x0 = pick(rng, -2, 1);
          g.win_h = pick(rng, 1, 3);
          g.win_w = pick(rng, 1, 3);
        }
        g.pad = random_pad(rng);
        random_setq(g, rng);
        const bool relu = pick(rng, 0, 1) == 1, average = pick(rng, 0, 1) == 1;
        const std::uint64_t mr = g.map_rows(), rows = round == 0 ? 1 : pick(rng, 1, 12);
        const auto acc = static_cast<std::uint64_t>(pick(rng, 0, 400));
        const auto map = static_cast<std::uint64_t>(pick(rng, 0, 500));
        const std::uint64_t out = 600;
        CAPTURE(n, a, round, act, g, relu, average, rows);
        const std::string src = act.setq() + g.cmap() + g.cstr() + g.ctap() + g.cwin() +
                                (relu ? "ACT.R " : "ACT ") + std::to_string(acc) + ", " +
                                std::to_string(map) + ", " + std::to_string(mr) + "\n" + g.setq() +
                                pool_text(average, map, out, rows) + "HLT\n";
        INFO(src);
        model::Memories mem(cfg);
        fill_memories(mem, rng);
        model::Memories expect = mem;
        ref_act(expect, act.m, act.s, act.z, relu, acc, map, mr);
        ref_pool(expect, g, average, map, out, rows);
        const Cycle c_a = 5, d_a = c_a + mr + a, c_p = d_a + 1, d_p = c_p + rows * g.window() + a + 1;
        for (Detail detail : {Detail::Detailed, Detail::Fast}) {
          CAPTURE(detail_name(detail));
          model::Memories got = mem;
          const RunLog log = run(cfg, src, got, detail);
          INFO(first_ub_difference(got, expect));
          CHECK(same_memories(got, expect));
          check_unit(log, 5, c_a, d_a);
          check_controller(log, 6, 6);
          check_unit(log, 7, c_p, d_p);
          check_halt(log, 8, d_p + 1);
          // Same unit: no hazard, a unit-busy stall.
          check_stalls(log, {{StallCause::UnitBusy, c_p - 7}, {StallCause::Drain, d_p - c_p}});
        }
      }
    }
  }
}

// ============================================================================
// Hazards
// ============================================================================

namespace {

// The map of these tests: 4 x 4 pixels at UB rows 0..15, output width 2,
// strides 2, pad 5; the POOLs write UB rows 100..103.
const char* const kMap = "CMAP 4, 4, 2\nCSTR 2, 2, 5\n";

Regs map_regs(std::int64_t y0, std::int64_t x0, std::int64_t wh, std::int64_t ww) {
  Regs g;
  g.in_h = g.in_w = 4;
  g.out_w = 2;
  g.stride_y = g.stride_x = 2;
  g.pad = 5;
  g.y0 = y0;
  g.x0 = x0;
  g.win_h = wh;
  g.win_w = ww;
  return g;
}

}  // namespace

TEST_CASE("A POOL waits for an RHM writing any row of its map (RAW) or of its output (WAW)",
          "[pool][timing]") {
  enum class Hazard { None, Raw, Waw };
  struct Case {
    std::int64_t y0, x0, wh, ww;
    Cycle u, rows;  // RHM 0, u, rows
    Hazard hazard;
    const char* why;
  };
  // With a 1 x 1 window from (0, 0) the POOL reads pixels (0, 0), (0, 2),
  // (2, 0) and (2, 2): UB rows 0, 2, 8 and 10.
  const std::vector<Case> cases = {
      {0, 0, 1, 1, 0, 1, Hazard::Raw, "a row a window reads"},
      {0, 0, 1, 1, 15, 1, Hazard::Raw, "the map's last row, which no window reads"},
      {0, 0, 1, 1, 5, 1, Hazard::Raw, "row 5, which no window reads"},
      {-9, -9, 2, 2, 0, 1, Hazard::Raw, "row 0, with every window in the padding"},
      {0, 0, 2, 2, 12, 9, Hazard::Raw, "rows 12..20, from inside the map to past it"},
      {0, 0, 2, 2, 16, 1, Hazard::None, "the row just past the map"},
      {0, 0, 3, 3, 16, 84, Hazard::None, "rows 16..99, between the map and the output"},
      {0, 0, 2, 2, 103, 1, Hazard::Waw, "the last output row"},
      {0, 0, 2, 2, 90, 11, Hazard::Waw, "rows 90..100"},
      {0, 0, 2, 2, 104, 5, Hazard::None, "rows just past the output"},
      {0, 0, 2, 2, 10, 95, Hazard::Raw, "rows 10..104, the map and the output: RAW counts"},
  };
  std::mt19937 rng(10);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Case& k : cases) {
      CAPTURE(n, k.y0, k.x0, k.wh, k.ww, k.u, k.rows, k.why);
      const Regs g = map_regs(k.y0, k.x0, k.wh, k.ww);
      const std::string src = std::string(kMap) + g.ctap() + g.cwin() + "RHM 0, " +
                              std::to_string(k.u) + ", " + std::to_string(k.rows) +
                              "\nPOOL 0, 100, 4\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      // The RHM's rows, then the POOL (in order where they overlap).
      model::Memories expect = mem;
      for (Cycle r = 0; r < k.rows; ++r)
        std::copy(mem.host.row(r), mem.host.row(r) + n, expect.ub.row(k.u + r));
      ref_pool(expect, g, false, 0, 100, 4);
      // CMAP 0, CSTR 1, CTAP 2, CWIN 3, RHM 4 (completes at d0), the POOL at
      // d0 + 1 after a stall in cycles 5..d0, or at 5.
      const Cycle d0 = 4 + dma_duration(cfg, k.rows);
      const Cycle c_p = k.hazard != Hazard::None ? d0 + 1 : 5;
      const Cycle d_p = c_p + 4 * g.window() + cfg.act_latency + 1;
      const Cycle c_hlt = std::max(d0, d_p) + 1;
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail_name(detail));
        model::Memories got = mem;
        const RunLog log = run(cfg, src, got, detail);
        check_unit(log, 4, 4, d0);
        check_unit(log, 5, c_p, d_p);
        check_halt(log, 6, c_hlt);
        Stalls stalls{{StallCause::Drain, c_hlt - c_p - 1}};
        if (k.hazard == Hazard::Raw) stalls[StallCause::Raw] = d0 - 4;
        if (k.hazard == Hazard::Waw) stalls[StallCause::Waw] = d0 - 4;
        check_stalls(log, stalls);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
      }
    }
  }
}

TEST_CASE("Instructions of other units wait for a POOL's output rows and its map",
          "[pool][timing]") {
  // POOL 0, 100, 4 with a 2 x 2 window (pc 4, issued at 4, d_p = 4 + 16 + A
  // + 1) reads the map (UB rows 0..15) and writes UB rows 100..103. A WHM or
  // MMC reading an output row waits for RAW, an RHM writing a map row for WAR
  // and one writing an output row for WAW, until d_p + 1; reading the map is
  // no hazard. An ACT writing an output row is the same unit: it issues at
  // 4 + 16 + 1 = d_p - A and writes after the POOL.
  enum class Kind { Whm, Mmc, Rhm, Act };
  struct Case {
    Kind kind;
    std::string text;
    Cycle rows;
    std::optional<StallCause> hazard;
  };
  const std::vector<Case> cases = {
      {Kind::Whm, "WHM 103, 0, 1", 1, StallCause::Raw},
      {Kind::Whm, "WHM 98, 0, 3", 3, StallCause::Raw},
      {Kind::Whm, "WHM 15, 0, 1", 1, std::nullopt},
      {Kind::Whm, "WHM 104, 0, 3", 3, std::nullopt},
      {Kind::Mmc, "MMC 100, 0, 1", 1, StallCause::Raw},
      {Kind::Mmc, "MMC 97, 0, 5", 5, StallCause::Raw},
      {Kind::Mmc, "MMC 95, 0, 5", 5, std::nullopt},
      {Kind::Mmc, "MMC 0, 0, 16", 16, std::nullopt},
      {Kind::Rhm, "RHM 0, 15, 1", 1, StallCause::War},
      {Kind::Rhm, "RHM 0, 101, 1", 1, StallCause::Waw},
      {Kind::Rhm, "RHM 0, 16, 84", 84, std::nullopt},
      {Kind::Act, "ACT 0, 101, 1", 1, std::nullopt},
  };
  std::mt19937 rng(15);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Case& k : cases) {
      CAPTURE(n, k.text);
      const Regs g = map_regs(0, 0, 2, 2);
      const std::string src =
          std::string(kMap) + g.ctap() + g.cwin() + "POOL 0, 100, 4\n" + k.text + "\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      model::Memories expect = mem;
      ref_pool(expect, g, false, 0, 100, 4);
      // The other instruction after the POOL (where it matters). An MMC
      // without S multiplies by the reset tile, zero, and adds nothing.
      std::istringstream ops(k.text.substr(4));
      std::uint64_t a = 0, b = 0;
      char comma = 0;
      ops >> a >> comma >> b;
      if (k.kind == Kind::Whm)
        for (Cycle r = 0; r < k.rows; ++r)
          std::copy(expect.ub.row(a + r), expect.ub.row(a + r) + n, expect.host.row(b + r));
      if (k.kind == Kind::Rhm)
        for (Cycle r = 0; r < k.rows; ++r)
          std::copy(mem.host.row(a + r), mem.host.row(a + r) + n, expect.ub.row(b + r));
      if (k.kind == Kind::Act) ref_act(expect, 1, 0, 0, false, a, b, k.rows);
      const Cycle c_p = 4, d_p = c_p + 4 * 4 + cfg.act_latency + 1;
      const Cycle c_x = k.hazard ? d_p + 1 : k.kind == Kind::Act ? c_p + 4 * 4 + 1 : 5;
      Cycle d_x = 0;
      switch (k.kind) {
        case Kind::Whm:
        case Kind::Rhm: d_x = c_x + dma_duration(cfg, k.rows); break;
        case Kind::Mmc: d_x = c_x + k.rows + 2 * n; break;
        case Kind::Act: d_x = c_x + k.rows + cfg.act_latency; break;
      }
      const Cycle c_hlt = std::max(d_p, d_x) + 1;
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail_name(detail));
        model::Memories got = mem;
        const RunLog log = run(cfg, src, got, detail);
        check_unit(log, 4, c_p, d_p);
        check_unit(log, 5, c_x, d_x);
        check_halt(log, 6, c_hlt);
        Stalls stalls{{StallCause::Drain, c_hlt - c_x - 1}};
        if (k.hazard) stalls[*k.hazard] = d_p - 4;
        if (k.kind == Kind::Act) stalls[StallCause::UnitBusy] = c_x - 5;
        check_stalls(log, stalls);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
      }
    }
  }
}

TEST_CASE("A POOL writing rows an in-flight MMC reads waits for it (WAR)", "[pool][timing]") {
  // The reset registers: a one-pixel map at map_row, a 1 x 1 window.
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const auto& [pool, hazard] : std::vector<std::pair<std::string, bool>>{
             {"POOL 0, 104, 2", true},   // writes 104..105, the MMC reads 100..107
             {"POOL 0, 99, 1", false},   // writes 99
             {"POOL 100, 0, 1", false},  // reads 100 (both read), writes 0
             {"POOL 0, 108, 3", false}}) {
      CAPTURE(n, pool);
      const std::string src = "MMC 100, 0, 8\n" + pool + "\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      const RunLog log = run(cfg, src, mem);
      const Cycle d_m = 8 + 2 * n;
      const Cycle rows = static_cast<Cycle>(std::stoul(pool.substr(pool.rfind(' ') + 1)));
      const Cycle c_p = hazard ? d_m + 1 : 1, d_p = c_p + rows + cfg.act_latency + 1;
      check_unit(log, 0, 0, d_m);
      check_unit(log, 1, c_p, d_p);
      check_halt(log, 2, std::max(d_m, d_p) + 1);
      Stalls stalls{{StallCause::Drain, std::max(d_m, d_p) - c_p}};
      if (hazard) stalls[StallCause::War] = d_m;
      check_stalls(log, stalls);
    }
  }
}

TEST_CASE("A POOL whose output overlaps its own map reads before its writes land",
          "[pool][timing]") {
  // A 1 x 10 map at UB rows 50..59 holding k in every lane of pixel k, a
  // 1 x 2 window at stride 1, nine output pixels, POOL.A with M = 1, S = 0,
  // Z = 0 and pad 0: out[i] is the sum of the two rows pixel i reads, at
  // s + 2i and s + 2i + 1; out[i] is written at s + 2i + 2 + A, here with
  // A = 2 at s + 2i + 4.
  // - ub = 50 (in place) and 51: every row is read before out[] overwrites
  //   it (row 50 + j, read at s + 2j, is written at s + 2j + 4 or s + 2j + 2;
  //   row 51 + j, read at s + 2j + 1, at s + 2j + 6 or s + 2j + 4):
  //   out[i] = 2i + 1.
  // - ub = 53: row 50 + j holds out[j - 3] from s + 2j - 2 on, before pixel
  //   j's first read at s + 2j, and row 51 + j out[j - 2] from s + 2j on,
  //   before its second read at s + 2j + 1: out[j] = out[j-3] + out[j-2]
  //   from j = 3 on; out[0] = 0 + 1, out[1] = 1 + 2, out[2] = 2 + out[0]:
  //   1, 3, 3, 4, 6, 7, 10, 13, 17 at rows 53..61.
  // - ub = 45: the writes land below the map: out[i] = 2i + 1 at rows 45..53.
  struct Case {
    std::uint64_t ub;
    std::vector<int> rows50;  // UB rows 50.. afterwards, per lane
  };
  const std::vector<Case> cases = {
      {50, {1, 3, 5, 7, 9, 11, 13, 15, 17, 9}},
      {51, {0, 1, 3, 5, 7, 9, 11, 13, 15, 17}},
      {53, {0, 1, 2, 1, 3, 3, 4, 6, 7, 10, 13, 17}},
      {45, {11, 13, 15, 17, 4, 5, 6, 7, 8, 9}},
  };
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Case& k : cases) {
      CAPTURE(n, k.ub);
      model::Memories mem(cfg);
      for (std::uint64_t p = 0; p < 10; ++p)
        std::fill(mem.ub.row(50 + p), mem.ub.row(50 + p) + n, static_cast<std::int8_t>(p));
      const std::string src =
          "CMAP 1, 10, 9\nCWIN 1, 2\nPOOL.A 50, " + std::to_string(k.ub) + ", 9\nHLT\n";
      INFO(src);
      model::Memories expect = mem;
      for (std::size_t r = 0; r < k.rows50.size(); ++r)
        std::fill(expect.ub.row(50 + r), expect.ub.row(50 + r) + n,
                  static_cast<std::int8_t>(k.rows50[r]));
      if (k.ub == 45)
        for (std::uint64_t i = 0; i < 5; ++i)
          std::fill(expect.ub.row(45 + i), expect.ub.row(45 + i) + n,
                    static_cast<std::int8_t>(2 * i + 1));
      // The cycle-by-cycle reference agrees with the hand-worked values.
      model::Memories sim = mem;
      Regs g;
      g.in_w = 10;
      g.out_w = 9;
      g.win_w = 2;
      ref_pool_cycles(sim, g, true, 50, k.ub, 9, cfg.act_latency);
      CHECK(same_ub(sim, expect));
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail_name(detail));
        model::Memories got = mem;
        const RunLog log = run(cfg, src, got, detail);
        check_unit(log, 2, 2, 2 + 9 * 2 + cfg.act_latency + 1);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
      }
    }
  }
}

TEST_CASE(
    "A POOL overlapping its own map: random geometries against the cycle-by-cycle "
    "reference",
    "[pool][timing]") {
  std::mt19937 rng(16);
  unsigned differ = 0;  // cases in which reading the map before any write would be wrong
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (unsigned round = 0; round < 120; ++round) {
      Regs g;
      g.in_h = pick(rng, 1, 6);
      g.in_w = pick(rng, 1, 6);
      g.out_w = pick(rng, 1, 7);
      g.stride_y = pick(rng, 1, 2);
      g.stride_x = pick(rng, 1, 2);
      g.y0 = pick(rng, -2, 2);
      g.x0 = pick(rng, -2, 2);
      g.win_h = pick(rng, 1, 3);
      g.win_w = pick(rng, 1, 3);
      g.pad = random_pad(rng);
      random_setq(g, rng);
      const bool average = pick(rng, 0, 1) == 1;
      const auto rows = static_cast<std::uint64_t>(pick(rng, 1, 20));
      const std::uint64_t map = 200, mr = g.map_rows();
      // An output range overlapping the map: from rows - 1 below it to its last row.
      const std::uint64_t out = static_cast<std::uint64_t>(
          pick(rng, static_cast<int>(map - rows + 1), static_cast<int>(map + mr - 1)));
      CAPTURE(n, round, g, average, rows, out);
      const std::string src = g.all() + pool_text(average, map, out, rows) + "HLT\n";
      INFO(src);
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      model::Memories expect = mem, naive = mem;
      ref_pool_cycles(expect, g, average, map, out, rows, cfg.act_latency);
      ref_pool(naive, g, average, map, out, rows);
      differ += !same_ub(expect, naive);
      const Cycle d = 5 + rows * g.window() + cfg.act_latency + 1;
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail_name(detail));
        model::Memories got = mem;
        const RunLog log = run(cfg, src, got, detail);
        check_unit(log, 5, 5, d);
        check_halt(log, 6, d + 1);
        INFO(first_ub_difference(got, expect));
        CHECK(same_memories(got, expect));
      }
    }
  }
  CHECK(differ >= 40);
}

// ============================================================================
// Faults
// ============================================================================

TEST_CASE("A POOL whose map or output runs past the end of the UB faults at issue",
          "[pool][fault]") {
  struct Case {
    std::string src;
    std::uint32_t pc;
    Cycle cycle;
    std::string instruction, reason;
    std::uint64_t pools_before = 0;  // POOLs issued before the fault
  };
  // UB of 1024 rows.
  const std::vector<Case> cases = {
      {"CMAP 10, 10, 1\nPOOL 1000, 0, 1\nHLT\n", 1, 1, "POOL 1000, 0, 1",
       "unified buffer rows 1000..1099 past the end (1024 rows)"},
      // The one row this POOL reads (UB row 1000, pixel (0, 0)) is inside.
      {"CMAP 10, 10, 1\nCTAP 0, 0\nCWIN 1, 1\nPOOL.A 1000, 0, 1\nHLT\n", 3, 3, "POOL.A 1000, 0, 1",
       "unified buffer rows 1000..1099 past the end (1024 rows)"},
      // A map that ends at the last row is fine; one more row is not (the
      // first POOL completes at 3, the second is due at 4).
      {"CMAP 10, 10, 1\nPOOL 924, 0, 1\nCMAP 11, 10, 1\nNOP\nPOOL.A 924, 0, 1\nHLT\n", 4, 4,
       "POOL.A 924, 0, 1", "unified buffer rows 924..1033 past the end (1024 rows)", 1},
      // The reset map is one pixel: UB row map_row.
      {"POOL 1024, 0, 5\nHLT\n", 0, 0, "POOL 1024, 0, 5",
       "unified buffer row 1024 past the end (1024 rows)"},
      // Every window in the padding, and still the map must fit.
      {"CMAP 2, 40, 1\nCTAP -5000, -5000\nCWIN 3, 3\nPOOL 1000, 0, 3\nHLT\n", 3, 3,
       "POOL 1000, 0, 3", "unified buffer rows 1000..1079 past the end (1024 rows)"},
      {"CMAP 65535, 65535, 1\nPOOL.A 0, 0, 1\nHLT\n", 1, 1, "POOL.A 0, 0, 1",
       "unified buffer rows 0..4294836224 past the end (1024 rows)"},
      // The output rows.
      {"POOL 0, 1020, 5\nHLT\n", 0, 0, "POOL 0, 1020, 5",
       "unified buffer rows 1020..1024 past the end (1024 rows)"},
      {"CMAP 3, 3, 3\nPOOL 0, 1024, 1\nHLT\n", 1, 1, "POOL 0, 1024, 1",
       "unified buffer row 1024 past the end (1024 rows)"},
      {"CWIN 255, 255\nPOOL.A 5, 1023, 2\nHLT\n", 1, 1, "POOL.A 5, 1023, 2",
       "unified buffer rows 1023..1024 past the end (1024 rows)"},
      {"POOL 0, 0, 16777215\nHLT\n", 0, 0, "POOL 0, 0, 16777215",
       "unified buffer rows 0..16777214 past the end (1024 rows)"},
  };
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Case& k : cases) {
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(n, k.src, detail_name(detail));
        const isa::Program prog = assemble(cfg, k.src, /*check_ranges=*/false);
        model::Memories mem(cfg);
        const RunLog log = model::run_program(cfg, prog, mem, options(detail));
        REQUIRE(log.fault);
        CHECK_FALSE(log.halted);
        const model::Fault& f = *log.fault;
        CHECK(f.pc == k.pc);
        CHECK(f.cycle == k.cycle);
        CHECK(f.instruction == k.instruction);
        CHECK(f.reason == k.reason);
        CHECK(f.message() == "fault at pc " + std::to_string(k.pc) + " (" + k.instruction +
                                 "), cycle " + std::to_string(k.cycle) + ": " + k.reason);
        CHECK(log.stats.instructions == k.pc);  // it did not issue
        CHECK(log.stats.units.at("activation_unit").instructions == k.pools_before);
        check_no_array(log);
      }
    }
  }
}
