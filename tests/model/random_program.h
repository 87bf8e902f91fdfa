// Random valid programs for differential tests of the model (the fast path
// against the detailed one, tests/model/test_fast_path.cpp).
//
// A program mixes every instruction and flag on a small machine with random
// timing parameters, and is dense in what makes timing interesting: ranges
// drawn from a few narrow windows so that instructions of different units
// overlap (RAW, WAR and WAW hazards) and MMCs accumulate into each other's
// rows, bursts of RW against the FIFO depth (FIFO full), MMC.S waiting for
// tiles, SETQ between ACTs, SYNCs, and convolutions: CMAP, CSTR and CTAP with
// small random geometries (maps overlapping the other instructions' ranges,
// origins negative and beyond the map, output rows wider than the map,
// strides 1..3, pads of every sign) and MMC.C with every combination of S
// and O, and pooling: CWIN with windows of 1 to 3 pixels each way and POOL
// and POOL.A of those maps (outputs anywhere, their own map included, among
// ACTs writing what they read), and the vector unit: VSRC (with and without
// broadcast, zero points of every sign) and VSCL (factors of every sign, small
// and near the int16 limits, every operation) between VECs of every
// activation, their operands and outputs in the same narrow windows (in
// place, overlapping, among ACTs and POOLs). It stays clear of deadlocks (RW only while
// the FIFO and the shadow can still take the tile without a switch, MMC.S
// and MMC.SC only after an RW that no switch has taken) and keeps every range
// inside its memory (an MMC.C's or a POOL's whole input map inside the UB,
// as the registers stand when it issues: the generator follows them in
// program order), unless `faults` is set: then about one program in ten has
// an address past a memory's end (an MMC.C's or a POOL's map, a VEC's operand
// B among them) or
// an instruction that deadlocks.
//
// With `large`, the machines have N = 64 and memories of 30 K rows, and about
// half the MMCs (MMC.Cs too, then mostly padding rows) are 3 K to 24 K rows
// long: long enough to cross the fast path's threshold for splitting an MMC
// over threads (16 M MACs, 4096 rows at N = 64), so that the threaded split
// runs with its default settings, and to write the 4 MiB and more for which
// the accumulators ask for huge pages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "config/arch_config.h"
#include "isa/isa.h"
#include "isa/program.h"
#include "model/memories.h"

namespace tpu::testing {

struct RandomProgram {
  ArchConfig cfg;
  isa::Program program;
};

class RandomProgramGenerator {
 public:
  explicit RandomProgramGenerator(std::uint32_t seed, bool large = false)
      : rng_(seed), large_(large) {}

  RandomProgram next(bool faults) {
    RandomProgram p;
    p.cfg = random_config();
    const ArchConfig& c = p.cfg;
    p.program.array_n = static_cast<unsigned>(c.array_n);
    std::vector<isa::Instruction>& code = p.program.code;
    const unsigned length = large_ ? pick(1, 16) : pick(1, 60);
    const bool faulty = faults && pick(0, 9) == 0;
    const unsigned fault_at = pick(0, length);
    unsigned pending_tiles = 0;  // RWs not yet taken by a switch
    // The input map of the convolution registers (CMAP's in_h x in_w) as the
    // next instruction finds them: reset to one pixel.
    std::uint64_t map_rows = 1;
    // Operand B of the vector registers: its first row and whether it is one row.
    std::uint64_t b_row = 0;
    bool broadcast = false;
    for (unsigned i = 0; i < length; ++i) {
      if (faulty && i == fault_at) {
        for (const isa::Instruction& in : fault_instructions(c, pending_tiles)) {
          if (in.opcode == isa::Opcode::CMAP)
            map_rows = static_cast<std::uint64_t>(in.operands[0] * in.operands[1]);
          code.push_back(in);
        }
        continue;
      }
      isa::Instruction in;
      // (The large programs, of a few MMCs of thousands of rows, draw no
      // vector instructions.)
      switch (pick(0, large_ ? 21 : 24)) {
        case 0:
        case 1:
          in = op(isa::Opcode::RHM, 0, host_row(c), ub_row(c), rows(c));
          break;
        case 2:
          in = op(isa::Opcode::WHM, 0, ub_row(c), host_row(c), rows(c));
          break;
        case 3: {
          const std::uint64_t r = rows(c);
          in = op(isa::Opcode::WHM, isa::kFlagWhmAcc, acc_row(c, r), host_row(c, 4 * r), r);
          break;
        }
        case 4:
        case 5:
        case 6:
          if (pending_tiles >= c.fifo_depth + 1) continue;
          in = op(isa::Opcode::RW, 0, pick(0, static_cast<unsigned>(c.weight_tiles) - 1));
          ++pending_tiles;
          break;
        case 7:
        case 8:
        case 9:
        case 10: {
          std::uint8_t flags = 0;
          if (pending_tiles > 0 && pick(0, 2) != 0) {
            flags |= isa::kFlagMmcSwitch;
            --pending_tiles;
          }
          if (pick(0, 2) == 0) flags |= isa::kFlagMmcOverwrite;
          const std::uint64_t r = large_ && pick(0, 1) ? pick(3000, 24000) : rows(c);
          in = op(isa::Opcode::MMC, flags, ub_row(c, r), acc_row(c, r), r);
          break;
        }
        case 11:
        case 12: {
          static const std::uint8_t kActs[] = {0, isa::kFlagActRelu, isa::kFlagActSigmoid,
                                               isa::kFlagActTanh};
          const std::uint64_t r = rows(c);
          in = op(isa::Opcode::ACT, kActs[pick(0, 3)], acc_row(c, r), ub_row(c, r), r);
          break;
        }
        case 13:
          in = op(isa::Opcode::SETQ, 0, static_cast<std::int64_t>(pick(0, 2000)) - 1000,
                  pick(0, 20), static_cast<std::int64_t>(pick(0, 255)) - 128);
          break;
        case 14:
          in = op(pick(0, 1) ? isa::Opcode::SYNC : isa::Opcode::NOP, 0);
          break;
        case 16:
          in = conv_register();
          if (in.opcode == isa::Opcode::CMAP)
            map_rows = static_cast<std::uint64_t>(in.operands[0] * in.operands[1]);
          break;
        case 17:
        case 18: {
          std::uint8_t flags = isa::kFlagMmcConvolve;
          if (pending_tiles > 0 && pick(0, 2) != 0) {
            flags |= isa::kFlagMmcSwitch;
            --pending_tiles;
          }
          if (pick(0, 2) == 0) flags |= isa::kFlagMmcOverwrite;
          // Output rows: as many as the map has pixels, or fewer, or more.
          const std::uint64_t r = large_ && pick(0, 1) ? pick(3000, 24000) : rows(c);
          in = op(isa::Opcode::MMC, flags, ub_row(c, map_rows), acc_row(c, r), r);
          break;
        }
        case 19:
          in = op(isa::Opcode::CWIN, 0, pick(1, 3), pick(1, 3));
          break;
        case 20:
        case 21: {
          // A map the whole of which is inside the UB; output rows anywhere.
          const std::uint64_t r = rows(c);
          in = op(isa::Opcode::POOL, pick(0, 1) ? isa::kFlagPoolAverage : 0, ub_row(c, map_rows),
                  ub_row(c, r), r);
          break;
        }
        case 22:
          if (pick(0, 1)) {
            broadcast = pick(0, 2) == 0;
            b_row = ub_row(c, broadcast ? 1 : 20);
            in = op(isa::Opcode::VSRC, broadcast ? isa::kFlagVsrcBroadcast : 0, b_row,
                    static_cast<std::int64_t>(pick(0, 255)) - 128,
                    static_cast<std::int64_t>(pick(0, 255)) - 128);
          } else {
            const auto factor = [this]() -> std::int64_t {
              if (pick(0, 4) == 0) return pick(0, 1) ? -32768 : 32767;
              return static_cast<std::int64_t>(pick(0, 600)) - 300;
            };
            const std::int64_t da = factor();
            in = op(isa::Opcode::VSCL, 0, da, factor(), pick(0, 4));
          }
          break;
        case 23:
        case 24: {
          static const std::uint8_t kActs[] = {0, isa::kFlagActRelu, isa::kFlagActSigmoid,
                                               isa::kFlagActTanh};
          // Operand B must fit from b_row: at most ub_rows - b_row rows of it.
          const std::uint64_t r =
              broadcast ? rows(c) : std::min<std::uint64_t>(rows(c), c.ub_rows - b_row);
          in = op(isa::Opcode::VEC, kActs[pick(0, 3)], ub_row(c, r), ub_row(c, r), r);
          break;
        }
        default:
          in = op(isa::Opcode::NOP, 0);
          break;
      }
      code.push_back(in);
    }
    code.push_back(op(isa::Opcode::HLT, 0));
    return p;
  }

  // Random contents for every memory (the UB and ACC too, so that reading
  // rows no instruction wrote still gives telling values).
  void fill(model::Memories& mem) {
    for (auto* m : {&mem.host, &mem.weights, &mem.ub})
      for (std::int8_t& v : m->data()) v = static_cast<std::int8_t>(rng_());
    for (std::int32_t& v : mem.acc.data()) v = static_cast<std::int32_t>(rng_());
  }

  unsigned pick(unsigned lo, unsigned hi) {
    return std::uniform_int_distribution<unsigned>(lo, hi)(rng_);
  }

 private:
  ArchConfig random_config() {
    static const unsigned kSizes[] = {4, 5, 8, 8, 12, 16, 16, 33};
    ArchConfig c = preset_config("small8");
    c.array_n = large_ ? 64 : kSizes[pick(0, 7)];
    c.host_rows = 256;
    c.weight_tiles = 6;
    c.ub_rows = large_ ? 30000 : 48;
    c.acc_rows = large_ ? 30000 : 40;
    c.host_latency = pick(0, 12);
    c.host_bytes_per_cycle = pick(1, 3) == 1 ? pick(1, 4) : pick(5, 300);
    c.weight_latency = pick(0, 12);
    c.weight_bytes_per_cycle = pick(1, 3) == 1 ? pick(1, 8) : pick(9, 600);
    c.act_latency = pick(1, 6);
    c.fifo_depth = pick(1, 4);
    validate(c);
    return c;
  }

  static isa::Instruction op(isa::Opcode opcode, std::uint8_t flags, std::int64_t a = 0,
                             std::int64_t b = 0, std::int64_t c = 0) {
    isa::Instruction in;
    in.opcode = opcode;
    in.flags = flags;
    const unsigned n = isa::spec_of(opcode).num_operands;
    if (n > 0) in.operands[0] = a;
    if (n > 1) in.operands[1] = b;
    if (n > 2) in.operands[2] = c;
    return in;
  }

  // One of CMAP, CSTR and CTAP. Maps of 1 to 30 pixels, at most 6 x 8 (most
  // of the small UB of 48 rows: MMC.C maps overlap what the other
  // instructions read and write), output rows of 1 to 8 pixels, narrower or
  // wider than the map; strides 1..3; pads of every sign; origins -3..8 in
  // each direction (before the map, inside it, past its edge), one in ten
  // far outside (-32768 or 32767).
  isa::Instruction conv_register() {
    switch (pick(0, 2)) {
      case 0: {
        const unsigned h = pick(1, 6);
        const unsigned w = pick(1, std::min(8u, 30 / h));
        return op(isa::Opcode::CMAP, 0, h, w, pick(1, 8));
      }
      case 1:
        return op(isa::Opcode::CSTR, 0, pick(1, 3), pick(1, 3),
                  static_cast<std::int64_t>(pick(0, 255)) - 128);
      default: {
        const auto origin = [this]() -> std::int64_t {
          if (pick(0, 9) == 0) return pick(0, 1) ? -32768 : 32767;
          return static_cast<std::int64_t>(pick(0, 11)) - 3;
        };
        const std::int64_t y0 = origin();
        return op(isa::Opcode::CTAP, 0, y0, origin());
      }
    }
  }

  // Row counts: mostly short, sometimes long enough to fill a memory.
  std::uint64_t rows(const ArchConfig&) { return pick(0, 4) == 0 ? pick(9, 20) : pick(1, 8); }
  // A start row from a few narrow windows, so that ranges overlap often.
  std::uint64_t windowed(std::uint64_t size, std::uint64_t count) {
    const std::uint64_t last = size - count;
    const std::uint64_t window = std::min<std::uint64_t>(last, pick(0, 1) ? 4 : last);
    const std::uint64_t base = pick(0, 2) * (last - window) / 2;
    return base + pick(0, static_cast<unsigned>(window));
  }
  std::uint64_t ub_row(const ArchConfig& c, std::uint64_t count = 20) {
    return windowed(c.ub_rows, count);
  }
  std::uint64_t acc_row(const ArchConfig& c, std::uint64_t count = 20) {
    return windowed(c.acc_rows, count);
  }
  std::uint64_t host_row(const ArchConfig& c, std::uint64_t count = 80) {
    return windowed(c.host_rows, count);
  }

  std::vector<isa::Instruction> fault_instructions(const ArchConfig& c, unsigned pending_tiles) {
    switch (pick(0, 6)) {
      case 6:  // a VEC whose operand B runs past the end of the UB (its operand A does not)
        return {op(isa::Opcode::VSRC, 0, c.ub_rows - 2, 0, 0), op(isa::Opcode::VEC, 0, 0, 0, 5)};
      case 0:  // past the end of the UB
        return {op(isa::Opcode::RHM, 0, 0, c.ub_rows - 2, 5)};
      case 1:  // past the end of the accumulators
        return {op(isa::Opcode::MMC, 0, 0, c.acc_rows - 1, 3)};
      case 4:  // an MMC.C whose map runs past the end of the UB (the one row it reads does not)
        return {op(isa::Opcode::CMAP, 0, 3, 3, 1), op(isa::Opcode::CTAP, 0, 0, 0),
                op(isa::Opcode::MMC, isa::kFlagMmcConvolve, c.ub_rows - 8, 0, 1)};
      case 5:  // a POOL whose map runs past the end of the UB (its one window does not)
        return {op(isa::Opcode::CMAP, 0, 2, 4, 1), op(isa::Opcode::CTAP, 0, 0, 0),
                op(isa::Opcode::CWIN, 0, 1, 1),
                op(isa::Opcode::POOL, isa::kFlagPoolAverage, c.ub_rows - 5, 0, 1)};
      case 2:  // one MMC.S more than there are RWs for: a deadlock
        return std::vector<isa::Instruction>(pending_tiles + 1,
                                             op(isa::Opcode::MMC, isa::kFlagMmcSwitch, 0, 0, 2));
      default:  // more RWs than the FIFO and the shadow hold without a switch: a deadlock
        return std::vector<isa::Instruction>(c.fifo_depth + 2, op(isa::Opcode::RW, 0, 0));
    }
  }

  std::mt19937 rng_;
  bool large_;
};

}  // namespace tpu::testing
