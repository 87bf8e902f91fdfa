// MMC.C (convolution from the unified buffer) on the SystemC model, against
// references computed here from the specification alone:
//
// - a direct convolution with plain loops over output pixels, kernel offsets
//   and channels (int64, then wrapped to int32), for the documented lowering
//   of a kh x kw convolution into kh*kw MMC.C passes (`CTAP dy - p, dx - p`,
//   weight tile W[dy][dx] zero-padded to N x N);
// - the row-by-row definition of MMC.C (row i is output pixel (i / out_w,
//   i % out_w), its input pixel (y0 + oy*stride_y, x0 + ox*stride_x) is UB
//   row ub_row + iy*in_w + ix inside the in_h x in_w map and a row of N `pad`
//   lanes outside), for geometries no convolution would use;
// - the timing contract of docs/microarchitecture.md: an MMC.C times exactly
//   like an MMC of the same rows; CMAP, CSTR and CTAP are controller-only
//   instructions (issue = start = completion);
// - hazards and the bounds fault over the whole input map [ub_row, ub_row +
//   in_h*in_w), as the registers stand when the MMC.C issues.
//
// Nothing here comes from isa::ConvGeometry or any other model code; the
// model is only run (at both levels of detail) and observed.
#include <catch2/catch.hpp>

#include <algorithm>
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
using testing::check_mmc;
using testing::check_unit;
using testing::Cycle;
using testing::fill_memories;
using testing::pick;
using testing::random_pad;
using testing::wrap32;
using testing::Stalls;
using AccRows = std::vector<std::vector<std::int32_t>>;

// ---- Machine, programs, runs ---------------------------------------------------

constexpr unsigned kSizes[] = {4, 8, 16};

ArchConfig make_config(unsigned n) {
  ArchConfig c = preset_config("small8");
  c.array_n = n;
  c.host_rows = 1024;
  c.weight_tiles = 32;
  c.ub_rows = 1024;
  c.acc_rows = 512;
  validate(c);
  return c;
}

// With `check_ranges` the assembler also checks every range against `cfg`.
isa::Program assemble(const ArchConfig& cfg, const std::string& src, bool check_ranges = true) {
  return testing::assemble_for(cfg, src, check_ranges, "conv.s");
}

model::RunOptions options(Detail detail, unsigned threads = 1) {
  model::RunOptions o;
  o.detail = detail;
  // The fast path's GEMM of the gathered rows split over `threads` threads
  // (down to one MAC a thread, so that small MMC.Cs are split too).
  o.gemm_threading = {threads, 1};
  return o;
}

// Runs `prog`, which must halt without a fault and retire every instruction
// in program order.
RunLog run(const ArchConfig& cfg, const isa::Program& prog, model::Memories& mem,
           const model::RunOptions& opts) {
  return testing::run_to_halt(cfg, prog, mem, opts);
}

RunLog run(const ArchConfig& cfg, const std::string& src, model::Memories& mem,
           Detail detail = Detail::Detailed) {
  return run(cfg, assemble(cfg, src), mem, options(detail));
}

RunLog run(const ArchConfig& cfg, const std::string& src, Detail detail = Detail::Detailed) {
  model::Memories mem(cfg);
  return run(cfg, src, mem, detail);
}

// ---- Observing runs -------------------------------------------------------------

// One weight tile: D_w = Lw + ceil(N*N/Bw) (docs/microarchitecture.md).
Cycle weight_duration(const ArchConfig& c) {
  return c.weight_latency +
         (c.array_n * c.array_n + c.weight_bytes_per_cycle - 1) / c.weight_bytes_per_cycle;
}


// Two runs retire the same instructions at the same cycles, with the same
// statistics.
void check_same_timing(const RunLog& a, const RunLog& b) {
  REQUIRE(a.retired.size() == b.retired.size());
  for (std::size_t i = 0; i < a.retired.size(); ++i) {
    CAPTURE(i);
    CHECK(a.retired[i].issue == b.retired[i].issue);
    CHECK(a.retired[i].start == b.retired[i].start);
    CHECK(a.retired[i].completion == b.retired[i].completion);
  }
  CHECK(a.stats.cycles == b.stats.cycles);
  CHECK(a.stats.instructions == b.stats.instructions);
  CHECK(a.stats.macs == b.stats.macs);
  CHECK(a.stats.array_active_cycles == b.stats.array_active_cycles);
  for (unsigned i = 0; i < model::kNumStallCauses; ++i) {
    CAPTURE(model::stall_cause_name(static_cast<StallCause>(i)));
    CHECK(a.stats.stall_cycles[i] == b.stats.stall_cycles[i]);
  }
  for (const auto& [name, u] : b.stats.units) {
    CAPTURE(name);
    REQUIRE(a.stats.units.count(name) == 1);
    CHECK(a.stats.units.at(name).instructions == u.instructions);
    CHECK(a.stats.units.at(name).busy_cycles == u.busy_cycles);
  }
}

AccRows acc_snapshot(const model::Memories& mem) {
  AccRows v(mem.acc.data().size() / mem.acc.width());
  for (std::size_t r = 0; r < v.size(); ++r)
    v[r].assign(mem.acc.row(r), mem.acc.row(r) + mem.acc.width());
  return v;
}

bool same_ub(const model::Memories& a, const model::Memories& b) {
  return std::equal(a.ub.data().begin(), a.ub.data().end(), b.ub.data().begin());
}

// ---- The row-by-row definition of MMC.C --------------------------------------------

// The convolution registers (written out here, not isa::ConvGeometry), at
// their reset values.
struct Geometry {
  std::int64_t in_h = 1, in_w = 1, out_w = 1;
  std::int64_t stride_y = 1, stride_x = 1;
  int pad = 0;
  std::int64_t y0 = 0, x0 = 0;

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
};

// The N values row i of an MMC.C at `ub` multiplies: output pixel (oy, ox) =
// (i / out_w, i % out_w), input pixel (y0 + oy*stride_y, x0 + ox*stride_x),
// UB[ub + iy*in_w + ix] inside the map, else every lane `pad`.
std::vector<std::int64_t> mmcc_input(const model::Memories& mem, const Geometry& g,
                                     std::uint64_t ub, std::uint64_t i) {
  const std::uint64_t n = mem.ub.width();
  const auto oy = static_cast<std::int64_t>(i / static_cast<std::uint64_t>(g.out_w));
  const auto ox = static_cast<std::int64_t>(i % static_cast<std::uint64_t>(g.out_w));
  const std::int64_t iy = g.y0 + oy * g.stride_y, ix = g.x0 + ox * g.stride_x;
  if (iy < 0 || iy >= g.in_h || ix < 0 || ix >= g.in_w) return std::vector<std::int64_t>(n, g.pad);
  const std::int8_t* row = mem.ub.row(ub + static_cast<std::uint64_t>(iy * g.in_w + ix));
  return std::vector<std::int64_t>(row, row + n);
}

// ACC[acc + i] (+)= x_i . W for the rows x_i, with W tile `tile` (isa.md, MMC).
template <typename RowOf>
void ref_mmc_rows(AccRows& acc_rows, const model::Memories& mem, std::uint64_t tile,
                  std::uint64_t acc, std::uint64_t rows, bool overwrite, RowOf row_of) {
  const std::uint64_t n = mem.ub.width();
  const std::int8_t* w = mem.weights.row(tile);
  for (std::uint64_t i = 0; i < rows; ++i) {
    const std::vector<std::int64_t> x = row_of(i);
    for (std::uint64_t j = 0; j < n; ++j) {
      std::int64_t sum = overwrite ? 0 : acc_rows[acc + i][j];
      for (std::uint64_t k = 0; k < n; ++k) sum += x[k] * w[k * n + j];
      acc_rows[acc + i][j] = wrap32(sum);
    }
  }
}

void ref_mmcc(AccRows& acc_rows, const model::Memories& mem, const Geometry& g, std::uint64_t tile,
              std::uint64_t ub, std::uint64_t acc, std::uint64_t rows, bool overwrite) {
  ref_mmc_rows(acc_rows, mem, tile, acc, rows, overwrite,
               [&](std::uint64_t i) { return mmcc_input(mem, g, ub, i); });
}

void ref_mmc(AccRows& acc_rows, const model::Memories& mem, std::uint64_t tile, std::uint64_t ub,
             std::uint64_t acc, std::uint64_t rows, bool overwrite) {
  ref_mmc_rows(acc_rows, mem, tile, acc, rows, overwrite, [&](std::uint64_t i) {
    const std::int8_t* r = mem.ub.row(ub + i);
    return std::vector<std::int64_t>(r, r + mem.ub.width());
  });
}

// ---- A direct convolution ----------------------------------------------------------

// One NHWC image of h x w pixels and c channels at UB row `ub` (pixel (y, x)
// in row ub + y*w + x, channel k in lane k), a kh x kw kernel of c x cout
// weights, strides sy, sx and zero padding py, px whose padded pixels hold
// `pad` (the input zero point) in every channel.
struct Conv {
  unsigned h, w, c, cout, kh, kw, sy, sx, py, px;
  int pad;
  std::uint64_t ub, acc, tile0;  // tile0 + dy*kw + dx holds W[dy][dx]
  bool overwrite_first;          // .O on the first pass, else accumulate onto ACC
  bool depthwise = false;        // groups = channels: W[dy][dx][ci][co] = 0 for ci != co

  unsigned out_h() const { return (h + 2 * py - kh) / sy + 1; }
  unsigned out_w() const { return (w + 2 * px - kw) / sx + 1; }
  unsigned rows() const { return out_h() * out_w(); }
  unsigned taps() const { return kh * kw; }
};

std::ostream& operator<<(std::ostream& os, const Conv& v) {
  return os << v.h << "x" << v.w << "x" << v.c << " -> " << v.cout << " channels, kernel " << v.kh
            << "x" << v.kw << ", stride " << v.sy << "," << v.sx << ", padding " << v.py << ","
            << v.px << " of value " << v.pad << ", ub " << v.ub << ", acc " << v.acc << ", tile "
            << v.tile0 << (v.overwrite_first ? ", .O first" : ", accumulating")
            << (v.depthwise ? ", depthwise" : "");
}

// The lowering: CMAP and CSTR once, then per kernel offset (dy, dx) its tile,
// CTAP dy - py, dx - px and an MMC.SC into the same ACC rows. Each pass's RW
// just before it, or with `prefetch` the first five tiles (the FIFO of 4 and
// the shadow) before a SYNC, and each later tile after the pass five before
// the one that needs it.
constexpr unsigned kPrefetched = 5;

std::string conv_program(const Conv& v, bool prefetch) {
  std::ostringstream s;
  s << "CMAP " << v.h << ", " << v.w << ", " << v.out_w() << "\n";
  s << "CSTR " << v.sy << ", " << v.sx << ", " << v.pad << "\n";
  if (prefetch) {
    for (unsigned t = 0; t < std::min(kPrefetched, v.taps()); ++t)
      s << "RW " << v.tile0 + t << "\n";
    s << "SYNC\n";
  }
  for (unsigned dy = 0; dy < v.kh; ++dy)
    for (unsigned dx = 0; dx < v.kw; ++dx) {
      const unsigned t = dy * v.kw + dx;
      if (!prefetch) s << "RW " << v.tile0 + t << "\n";
      s << "CTAP " << static_cast<int>(dy) - static_cast<int>(v.py) << ", "
        << static_cast<int>(dx) - static_cast<int>(v.px) << "\n";
      s << (t == 0 && v.overwrite_first ? "MMC.SOC " : "MMC.SC ") << v.ub << ", " << v.acc << ", "
        << v.rows() << "\n";
      if (prefetch && t + kPrefetched < v.taps()) s << "RW " << v.tile0 + t + kPrefetched << "\n";
    }
  s << "HLT\n";
  return s.str();
}

// Checks the lowering of `v` on an N x N array against the direct
// convolution, at both levels of detail; returns the detailed run's log and
// the program.
std::pair<RunLog, isa::Program> check_conv(unsigned n, const Conv& v, std::mt19937& rng,
                                           bool prefetch = false) {
  CAPTURE(n, v);
  const ArchConfig cfg = make_config(n);
  REQUIRE(v.c <= n);
  REQUIRE(v.cout <= n);
  REQUIRE(v.h + 2 * v.py >= v.kh);
  REQUIRE(v.w + 2 * v.px >= v.kw);
  REQUIRE(v.ub + v.h * v.w <= cfg.ub_rows);
  REQUIRE(v.acc + v.rows() <= cfg.acc_rows);
  REQUIRE(v.tile0 + v.taps() <= cfg.weight_tiles);

  // The image and the kernel; the memories random around them (the UB lanes
  // c..N-1 of the image's rows too, which only zero weights may meet).
  std::vector<int> image(v.h * v.w * v.c), kernel(v.taps() * v.c * v.cout);
  for (int& x : image) x = pick(rng, -128, 127);
  for (int& x : kernel) x = pick(rng, -128, 127);
  if (v.depthwise)  // each output channel sees only its own input channel
    for (unsigned t = 0; t < v.taps(); ++t)
      for (unsigned ci = 0; ci < v.c; ++ci)
        for (unsigned co = 0; co < v.cout; ++co)
          if (ci != co) kernel[(t * v.c + ci) * v.cout + co] = 0;
  model::Memories mem(cfg);
  fill_memories(mem, rng);
  for (unsigned y = 0; y < v.h; ++y)
    for (unsigned x = 0; x < v.w; ++x)
      for (unsigned k = 0; k < v.c; ++k)
        mem.ub.row(v.ub + y * v.w + x)[k] =
            static_cast<std::int8_t>(image[(y * v.w + x) * v.c + k]);
  for (unsigned t = 0; t < v.taps(); ++t) {
    std::int8_t* tile = mem.weights.row(v.tile0 + t);
    for (unsigned k = 0; k < n; ++k)
      for (unsigned j = 0; j < n; ++j)
        tile[k * n + j] = k < v.c && j < v.cout
                              ? static_cast<std::int8_t>(kernel[(t * v.c + k) * v.cout + j])
                              : 0;
  }

  // out[oy][ox][co] = sum over dy, dx, ci of in_padded[oy*sy + dy - py][ox*sx + dx - px][ci]
  //                   * K[dy][dx][ci][co]; channels co >= cout have no weights.
  AccRows expect = acc_snapshot(mem);
  const unsigned ow = v.out_w();
  for (unsigned oy = 0; oy < v.out_h(); ++oy)
    for (unsigned ox = 0; ox < ow; ++ox)
      for (unsigned co = 0; co < n; ++co) {
        std::int64_t sum = 0;
        for (unsigned dy = 0; dy < v.kh; ++dy)
          for (unsigned dx = 0; dx < v.kw; ++dx)
            for (unsigned ci = 0; ci < v.c && co < v.cout; ++ci) {
              const int y = static_cast<int>(oy * v.sy + dy) - static_cast<int>(v.py);
              const int x = static_cast<int>(ox * v.sx + dx) - static_cast<int>(v.px);
              const bool inside = y >= 0 && y < static_cast<int>(v.h) && x >= 0 &&
                                  x < static_cast<int>(v.w);
              const std::int64_t in = inside ? image[(y * v.w + x) * v.c + ci] : v.pad;
              sum += in * kernel[((dy * v.kw + dx) * v.c + ci) * v.cout + co];
            }
        std::int32_t& a = expect[v.acc + oy * ow + ox][co];
        a = wrap32((v.overwrite_first ? 0 : std::int64_t{a}) + sum);
      }

  const isa::Program prog = assemble(cfg, conv_program(v, prefetch));
  unsigned k = 0;
  RunLog detailed;
  for (Detail detail : {Detail::Detailed, Detail::Fast}) {
    CAPTURE(detail == Detail::Fast ? "fast" : "detailed");
    model::Memories out = mem;
    const RunLog log = run(cfg, prog, out, options(detail, 1 + (k++ + v.h) % 4));
    if (detail == Detail::Detailed) detailed = log;
    CHECK(acc_snapshot(out) == expect);  // every ACC row: the others unchanged
    CHECK(same_ub(out, mem));
    // Statistics as for MMC: rows*N*N MACs and one array cycle per row,
    // padding rows included.
    CHECK(log.stats.macs == std::uint64_t{v.taps()} * v.rows() * n * n);
    CHECK(log.stats.array_active_cycles == std::uint64_t{v.taps()} * v.rows());
    CHECK(log.stats.units.at("systolic_array").instructions == v.taps());
  }
  return {detailed, prog};
}

}  // namespace

// ============================================================================
// Values
// ============================================================================

TEST_CASE("MMC.C passes compute a direct convolution: hand-picked geometries", "[conv]") {
  std::mt19937 rng(1);
  for (unsigned n : kSizes) {
    const unsigned c = n;
    const std::vector<Conv> cases = {
        // 1x1 kernel, padding 3: the first and last three output rows and
        // columns are padding rows only.
        {3, 4, c, n, 1, 1, 1, 1, 3, 3, -128, 0, 0, 0, true},
        {1, 1, c, n - 1, 3, 3, 1, 1, 3, 3, 127, 5, 7, 3, true},
        // "same" 5x5 convolution of a 9x9 map, accumulating onto the ACC.
        {9, 9, c - 1, n, 5, 5, 1, 1, 2, 2, -3, 40, 100, 2, false},
        // Strided 3x3 with padding 1 on a non-square map.
        {7, 5, 2, 3, 3, 3, 2, 2, 1, 1, 0, 13, 0, 10, true},
        // Non-square kernel, different strides and paddings in y and x.
        {9, 2, 1, n, 5, 2, 3, 1, 0, 3, 9, 100, 200, 0, true},
        // Padding larger than the kernel's reach in one direction only.
        {2, 6, c, 1, 2, 1, 1, 3, 3, 0, -77, 1000 - 12, 311, 30, false},
    };
    for (const Conv& v : cases) check_conv(n, v, rng);
  }
}

TEST_CASE("MMC.C passes compute a direct convolution: random geometries", "[conv]") {
  std::mt19937 rng(20261210);
  for (unsigned n : kSizes) {
    for (unsigned round = 0; round < 120; ++round) {
      Conv v{};
      v.h = pick(rng, 1, 9);
      v.w = pick(rng, 1, 9);
      v.c = pick(rng, 0, 2) == 0 ? n : pick(rng, 1, static_cast<int>(n));
      v.cout = pick(rng, 0, 2) == 0 ? n : pick(rng, 1, static_cast<int>(n));
      v.kh = pick(rng, 1, 5);
      v.kw = pick(rng, 1, 5);
      v.sy = pick(rng, 1, 3);
      v.sx = pick(rng, 1, 3);
      v.py = pick(rng, 0, 3);
      v.px = pick(rng, 0, 3);
      v.kh = std::min(v.kh, v.h + 2 * v.py);  // the kernel fits the padded map
      v.kw = std::min(v.kw, v.w + 2 * v.px);
      v.pad = random_pad(rng);
      v.ub = pick(rng, 0, 1024 - static_cast<int>(v.h * v.w));
      v.acc = pick(rng, 0, 512 - static_cast<int>(v.rows()));
      v.tile0 = pick(rng, 0, 32 - static_cast<int>(v.taps()));
      v.overwrite_first = pick(rng, 0, 1) == 1;
      check_conv(n, v, rng);
    }
  }
}

TEST_CASE("A depthwise convolution runs as MMC.C passes with diagonal weight tiles", "[conv]") {
  // MobileNet's groups = channels: tile W[dy][dx] holds the kernel's (dy, dx)
  // weight of channel k at (k, k) and zeros elsewhere, so the array does N
  // times the useful work (utilization 1/N of the MACs it reports), but the
  // result is exact. The reference is the direct convolution with the
  // off-diagonal weights zero, i.e. out[co] = sum over dy, dx of
  // in[..][co] * K[dy][dx][co].
  std::mt19937 rng(3);
  for (unsigned n : kSizes) {
    for (const Conv& base : {Conv{8, 8, n, n, 3, 3, 1, 1, 1, 1, -4, 0, 0, 0, true},
                             Conv{9, 7, n - 1, n - 1, 3, 3, 2, 2, 1, 1, 17, 100, 64, 9, true},
                             Conv{5, 6, n, n, 5, 5, 1, 1, 2, 2, -128, 300, 8, 1, false}}) {
      Conv v = base;
      v.depthwise = true;
      check_conv(n, v, rng);
    }
  }
}

TEST_CASE("A convolution with prefetched tiles streams its passes back to back", "[conv][timing]") {
  // docs/microarchitecture.md, "A k x k convolution on chip": with every tile
  // prefetched and P >= 2N + 1 output pixels, the passes form a back-to-back
  // MMC.S chain, c_i = c_0 + i*P, and the last completes at c_0 + T*P + 2N.
  std::mt19937 rng(3);
  for (unsigned n : kSizes) {
    // Output maps of P = 2N + 1 or more pixels (3 x 3 at N = 4, 5 x 4 at
    // N = 8, 6 x 6 at N = 16) and of 9 x 9; 3 x 3 kernels, "same" padding,
    // and a 2 x 3 kernel without padding (T = 6, fewer than the five
    // prefetched plus one).
    const unsigned side = n == 4 ? 3 : n == 8 ? 5 : 6;
    const unsigned c = n / 2;
    const std::vector<Conv> cases = {
        {side, n == 8 ? 4 : side, c, n, 3, 3, 1, 1, 1, 1, -5, 0, 0, 0, true},
        {9, 9, n, n, 3, 3, 1, 1, 1, 1, 17, 100, 50, 20, false},
        {10, 11, n, 3, 2, 3, 1, 1, 0, 0, -128, 300, 400, 1, true},
    };
    for (const Conv& v : cases) {
      CAPTURE(n, v);
      const Cycle p = v.rows(), t_passes = v.taps();
      REQUIRE(p >= 2 * n + 1);
      const auto [log, prog] = check_conv(n, v, rng, /*prefetch=*/true);
      std::vector<model::RetireRecord> passes;
      for (const model::RetireRecord& r : log.retired)
        if (prog.code[r.pc].opcode == isa::Opcode::MMC) passes.push_back(r);
      REQUIRE(passes.size() == t_passes);
      const Cycle c0 = passes[0].issue;
      for (std::size_t i = 0; i < passes.size(); ++i) {
        CAPTURE(i);
        CHECK(passes[i].issue == c0 + i * p);
        CHECK(passes[i].completion == c0 + (i + 1) * p + 2 * n);
      }
      CHECK(passes.back().completion == c0 + t_passes * p + 2 * n);
      check_halt(log, prog.code.size() - 1, c0 + t_passes * p + 2 * n + 1);
      CHECK(log.stats.array_active_cycles == t_passes * p);
    }
  }
}

TEST_CASE("MMC.C rows follow the definition for any geometry, among MMCs", "[conv]") {
  // Programs of one to four MMC.C or MMC, each after random CMAP, CSTR and
  // CTAP (or none: the registers keep their values), all with one tile; the
  // reference applies each in program order (one unit: in order).
  std::mt19937 rng(77);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (unsigned round = 0; round < 80; ++round) {
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      const auto tile = static_cast<std::uint64_t>(pick(rng, 0, 31));
      std::string src = "RW " + std::to_string(tile) + "\n";
      Geometry g;  // the reset values
      struct Step {
        Geometry g;
        bool conv, overwrite;
        std::uint64_t ub, acc, rows;
      };
      std::vector<Step> steps;
      const int count = pick(rng, 1, 4);
      for (int s = 0; s < count; ++s) {
        if (pick(rng, 0, 2) != 0) {
          g.in_h = pick(rng, 1, 9);
          g.in_w = pick(rng, 1, 9);
          g.out_w = pick(rng, 0, 5) == 0 ? 65535 : pick(rng, 1, 12);
          src += g.cmap();
        }
        if (pick(rng, 0, 2) != 0) {
          g.stride_y = pick(rng, 0, 5) == 0 ? 255 : pick(rng, 1, 3);
          g.stride_x = pick(rng, 0, 5) == 0 ? 255 : pick(rng, 1, 3);
          g.pad = random_pad(rng);
          src += g.cstr();
        }
        if (pick(rng, 0, 2) != 0) {
          g.y0 = pick(rng, 0, 7) == 0 ? (pick(rng, 0, 1) ? -32768 : 32767) : pick(rng, -12, 12);
          g.x0 = pick(rng, 0, 7) == 0 ? (pick(rng, 0, 1) ? -32768 : 32767) : pick(rng, -12, 12);
          src += g.ctap();
        }
        Step st{g, pick(rng, 0, 3) != 0, pick(rng, 0, 1) == 1, 0, 0,
                static_cast<std::uint64_t>(pick(rng, 1, 60))};
        st.ub = static_cast<std::uint64_t>(pick(rng, 0, 200));
        st.acc = static_cast<std::uint64_t>(pick(rng, 0, 512 - static_cast<int>(st.rows)));
        std::string mn = "MMC";
        if (s == 0) mn += ".S";
        if (st.overwrite) mn += s == 0 ? "O" : ".O";
        if (st.conv) mn += mn.size() > 3 ? "C" : ".C";
        src += mn + " " + std::to_string(st.ub) + ", " + std::to_string(st.acc) + ", " +
               std::to_string(st.rows) + "\n";
        steps.push_back(st);
      }
      src += "HLT\n";
      INFO("program:\n" << src);

      AccRows expect = acc_snapshot(mem);
      std::uint64_t macs = 0;
      for (const Step& st : steps) {
        if (st.conv)
          ref_mmcc(expect, mem, st.g, tile, st.ub, st.acc, st.rows, st.overwrite);
        else
          ref_mmc(expect, mem, tile, st.ub, st.acc, st.rows, st.overwrite);
        macs += st.rows * n * n;
      }
      const isa::Program prog = assemble(cfg, src);
      unsigned k = 0;
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(detail == Detail::Fast ? "fast" : "detailed");
        model::Memories out = mem;
        const RunLog log = run(cfg, prog, out, options(detail, 1 + (round + k++) % 3));
        CHECK(acc_snapshot(out) == expect);
        CHECK(same_ub(out, mem));
        CHECK(log.stats.macs == macs);
        CHECK(log.stats.array_active_cycles == macs / (n * n));
      }
    }
  }
}

TEST_CASE("An origin far outside the map makes every row a padding row", "[conv]") {
  // Every row reads N lanes of `pad`: ACC[i][j] = pad * sum over k of W[k][j],
  // whatever the UB holds.
  std::mt19937 rng(5);
  struct Origin {
    std::int64_t y0, x0, stride_y, stride_x;
  };
  const std::vector<Origin> origins = {
      {-32768, -32768, 1, 1}, {32767, 32767, 255, 255}, {-32768, 0, 255, 1},
      {0, 32767, 1, 1},       {-1000, 3, 2, 2},         {4, 0, 1, 1},  // y0 = in_h
      {0, -6, 1, 1},  // ox * 1 - 6 < 0 for out_w = 5
  };
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Origin& o : origins) {
      for (int pad : {-128, -1, 0, 1, 127, 42}) {
        CAPTURE(n, o.y0, o.x0, o.stride_y, o.stride_x, pad);
        const std::uint64_t rows = 23;
        const std::string src = "RW 3\nCMAP 4, 6, 5\nCSTR " + std::to_string(o.stride_y) + ", " +
                                std::to_string(o.stride_x) + ", " + std::to_string(pad) +
                                "\nCTAP " + std::to_string(o.y0) + ", " + std::to_string(o.x0) +
                                "\nMMC.SOC 10, 50, " + std::to_string(rows) + "\nHLT\n";
        INFO(src);
        model::Memories mem(cfg);
        fill_memories(mem, rng);
        const std::int8_t* w = mem.weights.row(3);
        std::vector<std::int32_t> want(n);
        for (unsigned j = 0; j < n; ++j) {
          std::int64_t colsum = 0;
          for (unsigned k = 0; k < n; ++k) colsum += w[k * n + j];
          want[j] = wrap32(pad * colsum);
        }
        for (Detail detail : {Detail::Detailed, Detail::Fast}) {
          model::Memories out = mem;
          const RunLog log = run(cfg, src, out, detail);
          for (std::uint64_t i = 0; i < rows; ++i) {
            CAPTURE(i);
            CHECK(std::vector<std::int32_t>(out.acc.row(50 + i), out.acc.row(50 + i) + n) == want);
          }
          CHECK(std::equal(out.acc.row(50 + rows), out.acc.row(512), mem.acc.row(50 + rows)));
          CHECK(std::equal(out.acc.row(0), out.acc.row(50), mem.acc.row(0)));
          CHECK(log.stats.array_active_cycles == rows);
          CHECK(log.stats.macs == rows * n * n);
        }
      }
    }
  }
}

TEST_CASE("An output row wider than the map reads padding past the map's right edge", "[conv]") {
  // CMAP 3, 4, 7 with stride 1 and origin (0, 0): row i is pixel (i / 7, i % 7),
  // UB[ub + (i / 7) * 4 + i % 7] for i % 7 < 4 and i / 7 < 3, else padding.
  // And a map one pixel wide: CMAP 5, 1, 3 with origin (0, -1): only the
  // middle column (ox = 1) reads the map.
  std::mt19937 rng(6);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    model::Memories mem(cfg);
    fill_memories(mem, rng);
    const std::string src =
        "RW 0\nCMAP 3, 4, 7\nCSTR 1, 1, -9\nMMC.SOC 20, 0, 28\n"
        "CMAP 5, 1, 3\nCTAP 0, -1\nMMC.OC 40, 100, 17\nHLT\n";
    INFO(src);
    AccRows expect = acc_snapshot(mem);
    ref_mmc_rows(expect, mem, 0, 0, 28, true, [&](std::uint64_t i) {
      const std::uint64_t oy = i / 7, ox = i % 7;
      if (oy < 3 && ox < 4) {
        const std::int8_t* r = mem.ub.row(20 + oy * 4 + ox);
        return std::vector<std::int64_t>(r, r + n);
      }
      return std::vector<std::int64_t>(n, -9);
    });
    ref_mmc_rows(expect, mem, 0, 100, 17, true, [&](std::uint64_t i) {
      const std::uint64_t oy = i / 3, ox = i % 3;
      if (oy < 5 && ox == 1) {
        const std::int8_t* r = mem.ub.row(40 + oy);
        return std::vector<std::int64_t>(r, r + n);
      }
      return std::vector<std::int64_t>(n, -9);
    });
    for (Detail detail : {Detail::Detailed, Detail::Fast}) {
      model::Memories out = mem;
      run(cfg, src, out, detail);
      CHECK(acc_snapshot(out) == expect);
    }
  }
}

TEST_CASE("A map row at the far end of a 65535-wide output row", "[conv]") {
  // CMAP 1, 1000, 65535 at UB row 0 (the map ends at UB row 999, of 1024):
  // with x0 = 990, row i reads pixel 990 + i, inside the map for i < 10.
  std::mt19937 rng(8);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    model::Memories mem(cfg);
    fill_memories(mem, rng);
    const std::string src = "RW 1\nCMAP 1, 1000, 65535\nCSTR 7, 1, 100\nCTAP 0, 990\n"
                            "MMC.SC 0, 30, 16\nHLT\n";
    INFO(src);
    AccRows expect = acc_snapshot(mem);
    ref_mmc_rows(expect, mem, 1, 30, 16, false, [&](std::uint64_t i) {
      if (i < 10) {
        const std::int8_t* r = mem.ub.row(990 + i);
        return std::vector<std::int64_t>(r, r + n);
      }
      return std::vector<std::int64_t>(n, 100);
    });
    for (Detail detail : {Detail::Detailed, Detail::Fast}) {
      model::Memories out = mem;
      run(cfg, src, out, detail);
      CHECK(acc_snapshot(out) == expect);
    }
  }
}

// ============================================================================
// Timing
// ============================================================================

TEST_CASE("CMAP, CSTR and CTAP issue, start and complete in one cycle each", "[conv][timing]") {
  for (unsigned n : kSizes) {
    CAPTURE(n);
    const ArchConfig cfg = make_config(n);
    {
      // The whole range of every field; no MMC.C reads the registers, so the
      // 65535 x 65535 map is no fault.
      const std::string src =
          "CMAP 1, 1, 1\nCSTR 1, 1, 0\nCTAP 0, 0\nCMAP 65535, 65535, 65535\n"
          "CSTR 255, 255, -128\nCTAP -32768, 32767\nCSTR 3, 2, 127\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      for (std::size_t pc = 0; pc < 7; ++pc) check_controller(log, pc, pc);
      check_halt(log, 7, 7);
      check_stalls(log, {});
      CHECK(log.stats.instructions == 8);
      CHECK(log.stats.macs == 0);
      for (const auto& [name, u] : log.stats.units) {
        CAPTURE(name);
        CHECK(u.instructions == 0);
        CHECK(u.busy_cycles == 0);
      }
    }
    {
      // Behind an MMC in flight: they wait for nothing.
      const std::string src = "MMC 0, 0, 5\nCTAP 1, 1\nCMAP 2, 2, 2\nCSTR 2, 2, 2\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      const Cycle d = 5 + 2 * n;
      check_unit(log, 0, 0, d);
      for (std::size_t pc = 1; pc < 4; ++pc) check_controller(log, pc, pc);
      check_halt(log, 4, d + 1);
      check_stalls(log, {{StallCause::Drain, d + 1 - 4}});
    }
  }
}

TEST_CASE("An MMC.C times exactly like an MMC of the same rows", "[conv][timing]") {
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    const Cycle dw = weight_duration(cfg);
    for (Cycle rows : {Cycle{1}, Cycle{5}, Cycle{2 * n + 3}, Cycle{70}}) {
      for (const std::string flags : {"", "O", "S", "SO"}) {
        CAPTURE(n, rows, flags);
        const bool s = flags.find('S') != std::string::npos;
        const std::string head = s ? "RW 2\n" : "";
        const std::string tail = " 10, 20, " + std::to_string(rows) + "\nHLT\n";
        // A map with padding rows and UB rows; the MMC reads the same number
        // of rows straight.
        const std::string conv = head + "CMAP 4, 5, 3\nCSTR 2, 1, -7\nCTAP -1, 2\nMMC." +
                                 flags + "C" + tail;
        const std::string plain =
            head + "NOP\nNOP\nNOP\nMMC" + (flags.empty() ? "" : "." + flags) + tail;
        INFO(conv << "against\n" << plain);
        const RunLog c_log = run(cfg, conv);
        const RunLog m_log = run(cfg, plain);
        check_same_timing(c_log, m_log);
        check_same_timing(run(cfg, conv, Detail::Fast), m_log);
        // And the closed forms: an MMC started at s_m completes at
        // s_m + rows + 2N - 1; an MMC.S issued at 4 starts when tile 0 has
        // been loaded for a cycle, D_w + N + 2.
        const std::size_t pc = s ? 4 : 3;
        const Cycle s_m = s ? dw + n + 2 : 4;
        check_mmc(c_log, pc, pc, s_m, s_m + rows + 2 * n - 1);
        check_halt(c_log, pc + 1, s_m + rows + 2 * n);
        CHECK(c_log.stats.macs == rows * n * n);
        CHECK(c_log.stats.array_active_cycles == rows);
        CHECK(c_log.stats.units.at("systolic_array").busy_cycles == rows + 2 * n);
      }
    }
  }
}

TEST_CASE("Back-to-back MMC.Cs stream one row per cycle", "[conv][timing]") {
  std::mt19937 rng(9);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    const Cycle dw = weight_duration(cfg);
    for (Cycle r : {Cycle{2}, Cycle{3}, Cycle{7}, Cycle{2 * n + 1}}) {
      for (bool ctap_between : {false, true}) {
        CAPTURE(n, r, ctap_between);
        // RW 0 (pc 0), CMAP, CSTR, then three MMC.Cs of r, r + 1 and r rows
        // into overlapping ACC rows, the first switching to tile 0 (it issues
        // at 3 and starts when the tile has been loaded for a cycle, at
        // D_w + 2 + N). With a CTAP between them (a new kernel offset, as a
        // convolution has), the CTAP issues in the cycle after each MMC.C.
        const Cycle r1 = r, r2 = r + 1, r3 = r;
        const std::string src = "RW 0\nCMAP 5, 5, 5\nCSTR 1, 1, 3\nMMC.SC 0, 0, " +
                                std::to_string(r1) + "\n" + (ctap_between ? "CTAP 0, 1\n" : "") +
                                "MMC.C 0, 2, " + std::to_string(r2) + "\n" +
                                (ctap_between ? "CTAP 1, -1\n" : "") + "MMC.OC 7, 1, " +
                                std::to_string(r3) + "\nHLT\n";
        INFO(src);
        model::Memories mem(cfg);
        fill_memories(mem, rng);
        Geometry g;
        g.in_h = g.in_w = g.out_w = 5;
        g.pad = 3;
        AccRows expect = acc_snapshot(mem);
        ref_mmcc(expect, mem, g, 0, 0, 0, r1, false);
        if (ctap_between) g.x0 = 1;
        ref_mmcc(expect, mem, g, 0, 0, 2, r2, false);
        if (ctap_between) g = Geometry{5, 5, 5, 1, 1, 3, 1, -1};
        ref_mmcc(expect, mem, g, 0, 7, 1, r3, true);
        for (Detail detail : {Detail::Detailed, Detail::Fast}) {
          model::Memories out = mem;
          const RunLog log = run(cfg, src, out, detail);
          const std::size_t step = ctap_between ? 2 : 1;
          const std::size_t pc1 = 3, pc2 = pc1 + step, pc3 = pc2 + step;
          const Cycle s1 = dw + 2 + n, c2 = s1 + r1 - 1, c3 = c2 + r2;
          check_unit(log, 0, 0, dw);
          check_mmc(log, pc1, 3, s1, s1 + r1 + 2 * n - 1);
          check_unit(log, pc2, c2, c2 + r2 + 2 * n);
          check_unit(log, pc3, c3, c3 + r3 + 2 * n);
          if (ctap_between) {
            check_controller(log, pc1 + 1, 4);
            check_controller(log, pc2 + 1, c2 + 1);
          }
          const Cycle c_hlt = c3 + r3 + 2 * n + 1;
          check_halt(log, pc3 + 1, c_hlt);
          // Each MMC.C's first row is read right after the previous one's last.
          CHECK(log.retired[pc2].start == log.retired[pc1].start + r1);
          CHECK(log.retired[pc3].start == log.retired[pc2].start + r2);
          CHECK(log.stats.array_active_cycles == r1 + r2 + r3);
          // The second MMC.C waits for the first one's last row, the third
          // for the second one's.
          const Cycle waits = ctap_between ? (c2 - 5) + (r2 - 2) : (c2 - 4) + (r2 - 1);
          check_stalls(log, {{StallCause::UnitBusy, waits},
                             {StallCause::Drain, c_hlt - c3 - 1}});
          CHECK(acc_snapshot(out) == expect);
        }
      }
    }
  }
}

// ============================================================================
// Hazards: the whole map, as the registers stand at the MMC.C's issue
// ============================================================================

namespace {

// D_h = Lh + ceil(rows * N / Bh).
Cycle rhm_duration(const ArchConfig& c, Cycle rows) {
  return c.host_latency + (rows * c.array_n + c.host_bytes_per_cycle - 1) / c.host_bytes_per_cycle;
}

// The map of these tests: 4 x 4 pixels at UB rows 0..15, output width 2,
// strides 2: from origin (0, 0) the MMC.C's 4 rows read pixels (0, 0),
// (0, 2), (2, 0) and (2, 2), UB rows 0, 2, 8 and 10; from (-1, -1) only
// pixel (1, 1), UB row 5.
const char* const kMap = "CMAP 4, 4, 2\nCSTR 2, 2, 5\n";

}  // namespace

TEST_CASE("RAW: an MMC.C waits for an RHM writing any row of its map", "[conv][timing]") {
  struct Case {
    const char* ctap;
    Cycle u, rows;  // RHM 0, u, rows
    bool hazard;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"CTAP 0, 0", 0, 1, true, "a row the MMC.C reads"},
      {"CTAP 0, 0", 15, 1, true, "the last row of the map, which no row reads"},
      {"CTAP 0, 0", 5, 1, true, "a row only the kernel offset (1, 1) reads"},
      {"CTAP 0, 0", 11, 2, true, "rows 11..12, which no row reads"},
      {"CTAP 0, 0", 12, 9, true, "rows 12..20, from inside the map to past it"},
      {"CTAP -1, -1", 0, 1, true, "row 0, which only padding-free offsets read"},
      {"CTAP 0, 0", 16, 1, false, "the row just past the map"},
      {"CTAP 0, 0", 16, 8, false, "rows 16..23, past the map"},
      {"CTAP -1, -1", 16, 3, false, "rows 16..18, past the map"},
  };
  std::mt19937 rng(10);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Case& k : cases) {
      CAPTURE(n, k.ctap, k.u, k.rows, k.why);
      const std::string src = std::string(kMap) + k.ctap + "\nRHM 0, " + std::to_string(k.u) +
                              ", " + std::to_string(k.rows) + "\nMMC.C 0, 100, 4\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      // CMAP 0, CSTR 1, CTAP 2, RHM 3 (completes at d0), MMC.C at d0 + 1 after
      // a RAW stall in cycles 4..d0, or at 4.
      const Cycle d0 = 3 + rhm_duration(cfg, k.rows);
      const Cycle c_m = k.hazard ? d0 + 1 : 4;
      const Cycle d_m = c_m + 4 + 2 * n;
      const Cycle c_hlt = std::max(d0, d_m) + 1;
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        model::Memories out = mem;
        const RunLog log = run(cfg, src, out, detail);
        check_controller(log, 2, 2);
        check_unit(log, 3, 3, d0);
        check_unit(log, 4, c_m, d_m);
        check_halt(log, 5, c_hlt);
        Stalls stalls{{StallCause::Drain, c_hlt - c_m - 1}};
        if (k.hazard) stalls[StallCause::Raw] = d0 - 3;
        check_stalls(log, stalls);
        // The RHM wrote its rows (the MMC.C multiplies by the reset tile, zero).
        model::Memories after = mem;
        for (Cycle r = 0; r < k.rows; ++r)
          std::copy(mem.host.row(r), mem.host.row(r) + n, after.ub.row(k.u + r));
        CHECK(same_ub(out, after));
      }
    }
  }
}

TEST_CASE("WAR: an RHM writing any row of an in-flight MMC.C's map waits", "[conv][timing]") {
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const auto& [u, hazard] : std::vector<std::pair<Cycle, bool>>{
             {15, true}, {5, true}, {10, true}, {16, false}, {17, false}}) {
      CAPTURE(n, u, hazard);
      // CMAP 0, CSTR 1, CTAP 2, MMC.C 3 (in flight until d_m), RHM at d_m + 1 or 4.
      const std::string src = std::string(kMap) + "CTAP 0, 0\nMMC.C 0, 100, 4\nRHM 0, " +
                              std::to_string(u) + ", 1\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      const Cycle d_m = 3 + 4 + 2 * n;
      const Cycle c_r = hazard ? d_m + 1 : 4;
      const Cycle d_r = c_r + rhm_duration(cfg, 1);
      const Cycle c_hlt = std::max(d_m, d_r) + 1;
      check_unit(log, 3, 3, d_m);
      check_unit(log, 4, c_r, d_r);
      check_halt(log, 5, c_hlt);
      Stalls stalls{{StallCause::Drain, c_hlt - c_r - 1}};
      if (hazard) stalls[StallCause::War] = d_m - 3;
      check_stalls(log, stalls);
    }
  }
}

TEST_CASE("RAW through the ACC: an ACT of an MMC.C's output rows waits for it", "[conv][timing]") {
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    // MMC.C 0, 100, 4 writes ACC rows 100..103 (and reads UB rows 0..15; the
    // ACTs write UB rows 200..).
    for (const auto& [acc, hazard] :
         std::vector<std::pair<Cycle, bool>>{{103, true}, {97, true}, {104, false}, {96, false}}) {
      CAPTURE(n, acc, hazard);
      const std::string src = std::string(kMap) + "MMC.C 0, 100, 4\nACT " + std::to_string(acc) +
                              ", 200, 4\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      const Cycle d_m = 2 + 4 + 2 * n;
      const Cycle c_a = hazard ? d_m + 1 : 3;
      const Cycle d_a = c_a + 4 + cfg.act_latency;
      const Cycle c_hlt = std::max(d_m, d_a) + 1;
      check_unit(log, 2, 2, d_m);
      check_unit(log, 3, c_a, d_a);
      check_halt(log, 4, c_hlt);
      Stalls stalls{{StallCause::Drain, c_hlt - c_a - 1}};
      if (hazard) stalls[StallCause::Raw] = d_m - 2;
      check_stalls(log, stalls);
    }
  }
}

TEST_CASE("CMAP, CSTR and CTAP after an MMC.C change neither its rows nor its hazards",
          "[conv][timing]") {
  std::mt19937 rng(11);
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    CAPTURE(n);
    {
      // The MMC.SC (pc 4) reads the 16-row map with tile 0; the CMAP after it
      // shrinks the map to one row, and CSTR and CTAP would make every row
      // padding, but its rows are those of the registers at its issue, and
      // the RHM of UB row 15 still waits for it (WAR).
      const std::string src = "RW 0\n" + std::string(kMap) +
                              "CTAP 0, 0\nMMC.SC 0, 100, 4\nCMAP 1, 1, 1\nCSTR 1, 1, -100\n"
                              "CTAP 1, 1\nRHM 0, 15, 1\nHLT\n";
      INFO(src);
      model::Memories mem(cfg);
      fill_memories(mem, rng);
      AccRows expect = acc_snapshot(mem);
      ref_mmcc(expect, mem, Geometry{4, 4, 2, 2, 2, 5, 0, 0}, 0, 0, 100, 4, false);
      const Cycle dw = weight_duration(cfg);
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        model::Memories out = mem;
        const RunLog log = run(cfg, src, out, detail);
        // The MMC.SC issues at 4 and waits in the matrix unit for tile 0.
        const Cycle s_m = dw + 2 + n, d_m = s_m + 4 + 2 * n - 1;
        const Cycle d_r = d_m + 1 + rhm_duration(cfg, 1);
        check_unit(log, 0, 0, dw);
        check_mmc(log, 4, 4, s_m, d_m);
        for (std::size_t pc = 5; pc < 8; ++pc) check_controller(log, pc, pc);
        check_unit(log, 8, d_m + 1, d_r);
        check_halt(log, 9, d_r + 1);
        check_stalls(log, {{StallCause::War, d_m - 8 + 1},
                           {StallCause::Drain, d_r - (d_m + 1)}});
        // Rows 0, 2, 8 and 10 (no padding row); the RHM wrote row 15 after.
        CHECK(acc_snapshot(out) == expect);
      }
    }
    {
      // The same CMAP before the MMC.C: a one-row map, and the RHM of row 15
      // issues at once.
      const std::string src =
          std::string(kMap) + "CTAP 0, 0\nCMAP 1, 1, 1\nMMC.C 0, 100, 4\nRHM 0, 15, 1\nHLT\n";
      INFO(src);
      const RunLog log = run(cfg, src);
      check_unit(log, 4, 4, 4 + 4 + 2 * n);
      check_unit(log, 5, 5, 5 + rhm_duration(cfg, 1));
    }
  }
}

// ============================================================================
// Faults
// ============================================================================

namespace {

// Runs `src` (assembled without range checks), which must fault.
model::Fault run_to_fault(const ArchConfig& cfg, const std::string& src, Detail detail,
                          RunLog& log) {
  const isa::Program prog = assemble(cfg, src, /*check_ranges=*/false);
  model::Memories mem(cfg);
  log = model::run_program(cfg, prog, mem, options(detail));
  REQUIRE(log.fault);
  CHECK_FALSE(log.halted);
  return *log.fault;
}

}  // namespace

TEST_CASE("An MMC.C whose map runs past the end of the UB faults at issue", "[conv][fault]") {
  struct Case {
    std::string src;
    std::uint32_t pc;
    Cycle cycle;
    std::string instruction, reason;
    Cycle rows_before = 0;  // rows of the MMC.Cs issued before the fault
  };
  // UB of 1024 rows.
  const std::vector<Case> cases = {
      {"CMAP 10, 10, 1\nMMC.C 1000, 0, 1\nHLT\n", 1, 1, "MMC.C 1000, 0, 1",
       "unified buffer rows 1000..1099 past the end (1024 rows)"},
      // The one row this MMC.C reads (UB row 1000, pixel (0, 0)) is inside.
      {"CMAP 10, 10, 1\nCTAP 0, 0\nMMC.OC 1000, 0, 1\nHLT\n", 2, 2, "MMC.OC 1000, 0, 1",
       "unified buffer rows 1000..1099 past the end (1024 rows)"},
      // A map that ends at the last row is fine; one more row is not.
      {"CMAP 10, 10, 1\nMMC.C 924, 0, 1\nCMAP 11, 10, 1\nMMC.OC 924, 0, 1\nHLT\n", 3, 3,
       "MMC.OC 924, 0, 1", "unified buffer rows 924..1033 past the end (1024 rows)", 1},
      // The reset map is one pixel: UB row ub_row.
      {"MMC.C 1024, 0, 5\nHLT\n", 0, 0, "MMC.C 1024, 0, 5",
       "unified buffer row 1024 past the end (1024 rows)"},
      // Every row a padding row, and still the map must fit.
      {"CMAP 2, 40, 1\nCTAP -5000, -5000\nNOP\nMMC.C 1000, 0, 3\nHLT\n", 3, 3,
       "MMC.C 1000, 0, 3", "unified buffer rows 1000..1079 past the end (1024 rows)"},
      {"CMAP 65535, 65535, 1\nMMC.C 0, 0, 1\nHLT\n", 1, 1, "MMC.C 0, 0, 1",
       "unified buffer rows 0..4294836224 past the end (1024 rows)"},
      // The ACC range is rows, as for MMC (512 accumulator rows).
      {"CMAP 2, 2, 2\nMMC.C 0, 510, 3\nHLT\n", 1, 1, "MMC.C 0, 510, 3",
       "accumulators rows 510..512 past the end (512 rows)"},
  };
  for (unsigned n : kSizes) {
    const ArchConfig cfg = make_config(n);
    for (const Case& k : cases) {
      for (Detail detail : {Detail::Detailed, Detail::Fast}) {
        CAPTURE(n, k.src, detail == Detail::Fast ? "fast" : "detailed");
        RunLog log;
        const model::Fault f = run_to_fault(cfg, k.src, detail, log);
        CHECK(f.pc == k.pc);
        CHECK(f.cycle == k.cycle);
        CHECK(f.instruction == k.instruction);
        CHECK(f.reason == k.reason);
        CHECK(f.message() == "fault at pc " + std::to_string(k.pc) + " (" + k.instruction +
                                 "), cycle " + std::to_string(k.cycle) + ": " + k.reason);
        CHECK(log.stats.instructions == k.pc);  // it did not issue
        CHECK(log.stats.macs == k.rows_before * n * n);
      }
    }
  }
}
