// random_program's mix (random_program.h): programs for a given machine,
// every range inside fixed windows of its memories, from a 64-bit random
// stream of the program's own seed.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <utility>

#include "random_program/program_draw.h"
#include "random_program/random_program.h"

namespace tpu::testing {
namespace {

class WindowMix : ProgramDraw {
 public:
  WindowMix(const ArchConfig& cfg, std::uint64_t seed, const Windows& w) : cfg_(cfg), w_(w), rng_(seed) {}

  isa::Program run() {
    isa::Program p;
    start(p, cfg_.array_n);
    const unsigned length = pick(1, 40);
    for (unsigned i = 0; i < length; ++i) append(p, next());
    finish(p);
    return p;
  }

 private:
  std::uint64_t pick(std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng_);
  }
  std::uint64_t rows() { return pick(1, w_.max_rows); }
  std::uint64_t base(std::uint64_t window, std::uint64_t count) { return pick(0, window - count); }
  std::int64_t pick_signed(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }

  // CMAP in_h, in_w, out_w: mostly a map inside the UB window; one in eight
  // reaches past it (inside the UB: MMC.Cs then read zero rows beyond the
  // window) and one in sixteen past the UB itself.
  isa::Instruction cmap() {
    std::uint64_t h = 0, w = 0;
    switch (pick(0, 15)) {
      case 0:  // in_h * in_w > ub_rows, both at most 65535
        h = pick(cfg_.ub_rows / 65535 + 1, 65535);
        w = std::max<std::uint64_t>(cfg_.ub_rows / h + 1, pick(1, 65535));
        break;
      case 1:
      case 2:
        h = pick(1, 4);
        w = pick(w_.ub_rows, std::max(w_.ub_rows, std::min<std::uint64_t>(1024, cfg_.ub_rows / h)));
        break;
      default:
        h = pick(1, std::min<std::uint64_t>(8, w_.ub_rows));
        w = pick(1, std::min<std::uint64_t>(8, w_.ub_rows / h));
        break;
    }
    // Output lines shorter than, as long as and longer than the input's,
    // rarely one line for every row.
    const std::uint64_t out_w = pick(0, 7) == 0 ? pick(w_.max_rows, 65535) : pick(1, w + 2);
    return make(isa::Opcode::CMAP, 0, static_cast<std::int64_t>(h), static_cast<std::int64_t>(w),
                static_cast<std::int64_t>(out_w));
  }

  // CSTR stride_y, stride_x, pad; one stride in sixteen above 3.
  isa::Instruction cstr() {
    const auto stride = [this]() -> std::int64_t {
      return pick(0, 15) == 0 ? static_cast<std::int64_t>(pick(4, 255))
                             : static_cast<std::int64_t>(pick(1, 3));
    };
    const std::int64_t sy = stride(), sx = stride();
    static constexpr std::int64_t kPads[] = {0, -1, 1, -128, 127};
    const std::int64_t pad = pick(0, 1) ? kPads[pick(0, 4)] : pick_signed(-128, 127);
    return make(isa::Opcode::CSTR, 0, sy, sx, pad);
  }

  // CTAP y0, x0: mostly inside the current map, else before or past it;
  // one in eight anywhere in int16, half of those at an extreme.
  isa::Instruction ctap() {
    const auto origin = [this](std::uint32_t size) -> std::int64_t {
      const auto s = static_cast<std::int64_t>(std::min<std::uint32_t>(size, 16));
      switch (pick(0, 15)) {
        case 0: return pick(0, 1) ? -32768 : 32767;
        case 1: return pick_signed(-32768, 32767);
        case 2:
        case 3:
        case 4:
        case 5: return pick_signed(-3, s + 2);
        default: return pick_signed(0, s - 1);
      }
    };
    return make(isa::Opcode::CTAP, 0, origin(registers().in_h), origin(registers().in_w));
  }

  // CWIN win_h, win_w: mostly 1..4 each way; one in eight with one side up to
  // 16, one in thirty-two with either side anywhere up to 255 (then the
  // POOLs that follow have few rows: see pool()).
  isa::Instruction cwin() {
    const auto side = [this](unsigned kind) -> std::int64_t {
      switch (kind) {
        case 0: return static_cast<std::int64_t>(pick(1, 255));
        case 1: return static_cast<std::int64_t>(pick(5, 16));
        default: return static_cast<std::int64_t>(pick(1, 4));
      }
    };
    const std::uint64_t k = pick(0, 31);
    const unsigned kind_h = k == 0 ? 0 : k < 3 ? 1 : 2;
    const unsigned kind_w = k == 0 ? (pick(0, 1) ? 0 : 2) : k >= 3 && k < 5 ? 1 : 2;
    return make(isa::Opcode::CWIN, 0, side(kind_h), side(kind_w));
  }

  // POOL[.A] map_row, ub_row, rows, with the registers as they stand: only
  // while the whole map, from map_row, fits the unified buffer (inside the
  // window when it fits the window, so its read range overlaps the other
  // units' rows and its own output rows). With `over` an ACT's output rows,
  // the map covers at least one of them. Output pixels times window positions
  // stay within a budget, so that a large window takes few rows.
  using RowRange = std::pair<std::uint64_t, std::uint64_t>;  // first, count
  std::optional<isa::Instruction> pool(const std::optional<RowRange>& over) {
    const std::uint64_t map = registers().map_rows();
    if (map > cfg_.ub_rows) return std::nullopt;
    std::uint64_t m = 0;
    if (map <= w_.ub_rows) {
      // ACT rows [a, a + n) lie in the window: a map from a, or one ending at
      // the window's end (then past a + n - 1), covers row a + n - 1 or a.
      m = over ? std::min(over->first, w_.ub_rows - map) : base(w_.ub_rows, map);
    } else {
      m = pick(0, std::min(w_.ub_rows, cfg_.ub_rows - map));
    }
    constexpr std::uint64_t kBudget = 1024;  // rows * win_h * win_w, at least one row
    const std::uint64_t r =
        pick(1, std::max<std::uint64_t>(1, std::min(w_.max_rows, kBudget / registers().window())));
    return make(isa::Opcode::POOL, pick(0, 1) ? isa::kFlagPoolAverage : 0,
                static_cast<std::int64_t>(m), static_cast<std::int64_t>(base(w_.ub_rows, r)),
                static_cast<std::int64_t>(r));
  }

  // VSRC[.B] b_row, za, zb: B anywhere in the UB window (one row in three
  // broadcast); zero points of every sign, now and then at an extreme.
  isa::Instruction vsrc() {
    const bool broadcast = pick(0, 2) == 0;
    const auto zero = [this]() -> std::int64_t {
      static constexpr std::int64_t kZeros[] = {0, -128, 127};
      return pick(0, 3) == 0 ? kZeros[pick(0, 2)] : pick_signed(-128, 127);
    };
    const std::int64_t za = zero();
    return make(isa::Opcode::VSRC, broadcast ? isa::kFlagVsrcBroadcast : 0,
                static_cast<std::int64_t>(pick(0, w_.ub_rows - 1)), za, zero());
  }

  // VSCL da, db, op: factors small, matched to a scale (about 2^14), or at
  // the int16 extremes; every operation.
  isa::Instruction vscl() {
    const auto factor = [this]() -> std::int64_t {
      switch (pick(0, 3)) {
        case 0: return pick(0, 1) ? -32768 : 32767;
        case 1: return pick_signed(8192, 16384);
        case 2: return pick_signed(-32768, 32767);
        default: return pick_signed(-300, 300);
      }
    };
    const std::int64_t da = factor();
    return make(isa::Opcode::VSCL, 0, da, factor(), static_cast<std::int64_t>(pick(0, 4)));
  }

  // NGEO groups, stride, sh, width: tokens of 1 to 4 rows whose hull fits
  // the UB window, every shift, a width of every value up to groups * N in
  // half of them (0, all groups * N values, in the others).
  isa::Instruction ngeo() {
    const std::uint64_t groups = pick(1, 4);
    const std::uint64_t stride = groups == 1 && pick(0, 1) ? 0 : pick(0, (w_.ub_rows - 1) / groups);
    const std::uint64_t all = groups * cfg_.array_n;
    const std::uint64_t width = pick(0, 1) ? pick(1, std::min<std::uint64_t>(all, 65535)) : 0;
    return make(isa::Opcode::NGEO, 0, static_cast<std::int64_t>(groups), static_cast<std::int64_t>(stride),
                static_cast<std::int64_t>(pick(0, 15)), static_cast<std::int64_t>(width));
  }

  // NCON k0, k1, k2: constants of the size the compiler chooses for GELU
  // (a clip of 10^2 to 10^5, an erf scale up to 2^30, a zero point) or for
  // SMAX (k0 = ln 2 / S, k1 = b / S, k2 = c / (a S^2): 10^2 to 10^5, 10^2 to
  // 10^5, up to 2^31), small ones, or anywhere in int32, the extremes among them.
  isa::Instruction ncon() {
    const auto any = [this]() -> std::int64_t {
      switch (pick(0, 3)) {
        case 0: return pick(0, 1) ? INT32_MIN : INT32_MAX;
        case 1: return pick_signed(-2000, 2000);
        default: return pick_signed(INT32_MIN, INT32_MAX);
      }
    };
    std::int64_t k0 = 0, k1 = 0, k2 = 0;
    switch (pick(0, 3)) {
      case 0:  // GELU's
        k0 = pick_signed(100, 100000);
        k1 = pick_signed(1000, std::int64_t{1} << 30);
        k2 = pick_signed(-128, 127);
        break;
      case 1:  // SMAX's
        k0 = pick_signed(100, 100000);
        k1 = pick_signed(100, 100000);
        k2 = pick_signed(0, INT32_MAX);
        break;
      default:
        k0 = any();
        k1 = any();
        k2 = any();
        break;
    }
    return make(isa::Opcode::NCON, 0, k0, k1, k2);
  }

  isa::Instruction next() {
    using isa::Opcode;
    const auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
    // A POOL right after an ACT, over the ACT's rows: it waits for the ACT's
    // last write (the unit-busy rule), then reads what the ACT wrote.
    if (act_rows_) {
      const auto rows_written = *act_rows_;
      act_rows_.reset();
      if (auto in = pool(rows_written)) return *in;
    }
    for (;;) {
      switch (pick(0, 27)) {
        case 0:
        case 1: {
          const std::uint64_t r = rows();
          return make(Opcode::RHM, 0, i64(base(w_.host_rows, r)), i64(base(w_.ub_rows, r)), i64(r));
        }
        case 2: {
          const std::uint64_t r = rows();
          return make(Opcode::WHM, 0, i64(base(w_.ub_rows, r)), i64(base(w_.host_rows, r)), i64(r));
        }
        case 3: {
          const std::uint64_t r = rows();
          return make(Opcode::WHM, isa::kFlagWhmAcc, i64(base(w_.acc_rows, r)),
                      i64(base(w_.host_rows, 4 * r)), i64(r));
        }
        case 4:
        case 5:
          // The FIFO plus the shadow hold fifo_depth + 1 tiles no switch has taken.
          if (weights_full(cfg_)) continue;
          read_weights();
          return make(Opcode::RW, 0, i64(pick(0, w_.weight_tiles - 1)));
        case 6:
        case 7:
        case 8: {
          std::uint8_t flags = pick(0, 1) ? isa::kFlagMmcOverwrite : 0;
          // MMC.C reads the whole map from its ub_row: inside the window
          // when the map fits it, else inside the unified buffer.
          const std::uint64_t map = registers().map_rows();
          const bool convolve = map <= cfg_.ub_rows && pick(0, 1) != 0;
          if (can_switch() && pick(0, 2) != 0) flags |= take_switch();
          const std::uint64_t r = rows();
          if (!convolve)
            return make(Opcode::MMC, flags, i64(base(w_.ub_rows, r)), i64(base(w_.acc_rows, r)), i64(r));
          flags |= isa::kFlagMmcConvolve;
          const std::uint64_t ub =
              map <= w_.ub_rows ? base(w_.ub_rows, map) : pick(0, std::min(w_.ub_rows, cfg_.ub_rows - map));
          return make(Opcode::MMC, flags, i64(ub), i64(base(w_.acc_rows, r)), i64(r));
        }
        case 9:
        case 10: {
          const std::uint64_t r = rows();
          const std::uint64_t ub = base(w_.ub_rows, r);
          if (pick(0, 3) == 0) act_rows_.emplace(ub, r);
          return make(Opcode::ACT, kActivations[pick(0, 3)], i64(base(w_.acc_rows, r)), i64(ub), i64(r));
        }
        case 11: {
          const auto m = static_cast<std::int32_t>(static_cast<std::uint32_t>(rng_()));
          return make(Opcode::SETQ, 0, pick(0, 3) ? m % 512 : m, i64(pick(0, 62)),
                      static_cast<std::int64_t>(pick(0, 255)) - 128);
        }
        case 12: return make(Opcode::SYNC, 0);
        case 14: return cmap();
        case 15: return cstr();
        case 16: return ctap();
        case 17:
        case 18:
        case 19:
          if (auto in = pool(std::nullopt)) return *in;
          continue;
        case 20: return cwin();
        case 13:
        case 21: return pick(0, 1) ? vsrc() : vscl();
        case 22:
        case 23: {
          // Operand B from the vector registers: its rows must fit the UB
          // window (with broadcast, its one row does).
          const std::uint64_t room =
              registers().vec.broadcast ? w_.max_rows : w_.ub_rows - registers().vec.b_row;
          const std::uint64_t r = std::min(rows(), room);
          return make(Opcode::VEC, kActivations[pick(0, 3)], i64(base(w_.ub_rows, r)),
                      i64(base(w_.ub_rows, r)), i64(r));
        }
        case 24: {
          // HWT of 1 to N rows (at most max_rows) of the host window into a
          // tile the RWs read, transposed or not: a RAW for their RWs, a WAR
          // with those in flight, host rows a WHM writes.
          const std::uint64_t r = pick(1, std::min<std::uint64_t>(cfg_.array_n, w_.max_rows));
          const std::uint8_t flags = pick(0, 1) ? isa::kFlagHwtTranspose : 0;
          return make(Opcode::HWT, flags, i64(base(w_.host_rows, r)), i64(pick(0, w_.weight_tiles - 1)), i64(r));
        }
        case 25: {
          // With ub_weight_path, RWU of 1 to N rows (at most max_rows) of the
          // UB window, transposed or not: a tile pushed in order with the
          // RWs', from rows the others write.
          if (cfg_.ub_weight_path == 0 || weights_full(cfg_)) continue;
          read_weights();
          const std::uint64_t r = pick(1, std::min<std::uint64_t>(cfg_.array_n, w_.max_rows));
          const std::uint8_t flags = pick(0, 1) ? isa::kFlagRwuTranspose : 0;
          return make(Opcode::RWU, flags, i64(base(w_.ub_rows, r)), i64(r));
        }
        case 26: return pick(0, 1) ? ngeo() : ncon();
        case 27: {
          // GELU's rows anywhere in the UB window, in place now and then.
          const std::uint64_t r = rows();
          const std::uint64_t x = base(w_.ub_rows, r);
          return make(Opcode::GELU, 0, i64(x), i64(pick(0, 3) == 0 ? x : base(w_.ub_rows, r)), i64(r));
        }
        default: return make(Opcode::NOP, 0);
      }
    }
  }

  const ArchConfig& cfg_;
  const Windows& w_;
  std::mt19937_64 rng_;
  // The UB rows (first, count) of the ACT just emitted, when a POOL over them follows.
  std::optional<RowRange> act_rows_;
};

}  // namespace

isa::Program random_program(const ArchConfig& cfg, std::uint64_t seed, const Windows& w) {
  return WindowMix(cfg, seed, w).run();
}

}  // namespace tpu::testing
