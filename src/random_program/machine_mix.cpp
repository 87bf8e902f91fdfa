// RandomProgramGenerator's mix (random_program.h): a small random machine
// for every program and instructions on it, from one 32-bit random stream
// that the tests draw from too.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "random_program/program_draw.h"
#include "random_program/random_program.h"

namespace tpu::testing {

class MachineMix : ProgramDraw {
 public:
  MachineMix(std::uint32_t seed, bool large) : rng_(seed), large_(large) {}

  RandomProgram next(bool faults) {
    RandomProgram p;
    p.cfg = random_config();
    const ArchConfig& c = p.cfg;
    start(p.program, c.array_n);
    const unsigned length = large_ ? pick(1, 16) : pick(1, 60);
    const bool faulty = faults && pick(0, 9) == 0;
    const unsigned fault_at = pick(0, length);
    for (unsigned i = 0; i < length; ++i) {
      if (faulty && i == fault_at) {
        // Of the fault's instructions only a CMAP is followed: the
        // instructions after the fault are drawn as the seed has always drawn them.
        for (const isa::Instruction& in : fault_instructions(c)) {
          p.program.code.push_back(in);
          if (in.opcode == isa::Opcode::CMAP) registers().apply(in);
        }
        continue;
      }
      // A slot whose RW would deadlock stays empty.
      if (const std::optional<isa::Instruction> in = draw(c)) append(p.program, *in);
    }
    finish(p.program);
    return p;
  }

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
    c.ub_weight_path = 1;  // RWU always (the other mix draws the flag with the timing)
    validate(c);
    return c;
  }

  // The next instruction, or nothing when the RW drawn would deadlock.
  // (The large programs, of a few MMCs of thousands of rows, draw no vector
  // instructions.)
  std::optional<isa::Instruction> draw(const ArchConfig& c) {
    switch (pick(0, large_ ? 21 : 26)) {
      case 0:
      case 1: return make(isa::Opcode::RHM, 0, host_row(c), ub_row(c), rows(c));
      case 2: return make(isa::Opcode::WHM, 0, ub_row(c), host_row(c), rows(c));
      case 3: {
        const std::uint64_t r = rows(c);
        return make(isa::Opcode::WHM, isa::kFlagWhmAcc, acc_row(c, r), host_row(c, 4 * r), r);
      }
      case 4:
      case 5:
      case 6:
        if (weights_full(c)) return std::nullopt;
        read_weights();
        return make(isa::Opcode::RW, 0, pick(0, static_cast<unsigned>(c.weight_tiles) - 1));
      case 7:
      case 8:
      case 9:
      case 10: {
        std::uint8_t flags = 0;
        if (can_switch() && pick(0, 2) != 0) flags |= take_switch();
        if (pick(0, 2) == 0) flags |= isa::kFlagMmcOverwrite;
        const std::uint64_t r = large_ && pick(0, 1) ? pick(3000, 24000) : rows(c);
        return make(isa::Opcode::MMC, flags, ub_row(c, r), acc_row(c, r), r);
      }
      case 11:
      case 12: {
        const std::uint64_t r = rows(c);
        return make(isa::Opcode::ACT, kActivations[pick(0, 3)], acc_row(c, r), ub_row(c, r), r);
      }
      case 13:
        return make(isa::Opcode::SETQ, 0, static_cast<std::int64_t>(pick(0, 2000)) - 1000, pick(0, 20),
                    static_cast<std::int64_t>(pick(0, 255)) - 128);
      case 14: return make(pick(0, 1) ? isa::Opcode::SYNC : isa::Opcode::NOP, 0);
      case 15: return attention_operand(c);
      case 16: return conv_register();
      case 17:
      case 18: {
        std::uint8_t flags = isa::kFlagMmcConvolve;
        if (can_switch() && pick(0, 2) != 0) flags |= take_switch();
        if (pick(0, 2) == 0) flags |= isa::kFlagMmcOverwrite;
        // Output rows: as many as the map has pixels, or fewer, or more.
        const std::uint64_t r = large_ && pick(0, 1) ? pick(3000, 24000) : rows(c);
        return make(isa::Opcode::MMC, flags, ub_row(c, registers().map_rows()), acc_row(c, r), r);
      }
      case 19: return make(isa::Opcode::CWIN, 0, pick(1, 3), pick(1, 3));
      case 20:
      case 21: {
        // A map the whole of which is inside the UB; output rows anywhere.
        const std::uint64_t r = rows(c);
        return make(isa::Opcode::POOL, pick(0, 1) ? isa::kFlagPoolAverage : 0,
                    ub_row(c, registers().map_rows()), ub_row(c, r), r);
      }
      case 22: return pick(0, 1) ? vsrc(c) : vscl();
      case 23:
      case 24: {
        // Operand B must fit from its first row: at most ub_rows - b_row rows of it.
        const isa::VecRegs& vec = registers().vec;
        const std::uint64_t r =
            vec.broadcast ? rows(c) : std::min<std::uint64_t>(rows(c), c.ub_rows - vec.b_row);
        return make(isa::Opcode::VEC, kActivations[pick(0, 3)], ub_row(c, r), ub_row(c, r), r);
      }
      case 25: return norm_register(c);
      case 26: {
        // SMAX and LNRM read and write the hull of their tokens' rows.
        static const isa::Opcode kNorms[] = {isa::Opcode::SMAX, isa::Opcode::LNRM, isa::Opcode::GELU};
        const isa::Opcode op = kNorms[pick(0, 2)];
        const std::uint64_t r = rows(c);
        const std::uint64_t span = op == isa::Opcode::GELU ? r : registers().norm.span(r);
        return make(op, 0, ub_row(c, span), ub_row(c, span), r);
      }
      default: return make(isa::Opcode::NOP, 0);
    }
  }

  // HWT or RWU of 1 to N rows, either transposed or not: a weight tile made
  // of host rows (into a tile the RWs read) or of UB rows (pushed as an RW's
  // tile, under the same deadlock rule).
  std::optional<isa::Instruction> attention_operand(const ArchConfig& c) {
    const auto n = static_cast<unsigned>(c.array_n);
    if (pick(0, 1)) {
      const std::uint64_t r = pick(1, n);
      const std::uint8_t flags = pick(0, 1) ? isa::kFlagHwtTranspose : 0;
      return make(isa::Opcode::HWT, flags, host_row(c, r), pick(0, static_cast<unsigned>(c.weight_tiles) - 1), r);
    }
    if (weights_full(c)) return std::nullopt;
    read_weights();
    const std::uint64_t r = pick(1, std::min(n, 20u));
    return make(isa::Opcode::RWU, pick(0, 1) ? isa::kFlagRwuTranspose : 0, ub_row(c, r), r);
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
        return make(isa::Opcode::CMAP, 0, h, w, pick(1, 8));
      }
      case 1:
        return make(isa::Opcode::CSTR, 0, pick(1, 3), pick(1, 3),
                    static_cast<std::int64_t>(pick(0, 255)) - 128);
      default: {
        const auto origin = [this]() -> std::int64_t {
          if (pick(0, 9) == 0) return pick(0, 1) ? -32768 : 32767;
          return static_cast<std::int64_t>(pick(0, 11)) - 3;
        };
        const std::int64_t y0 = origin();
        return make(isa::Opcode::CTAP, 0, y0, origin());
      }
    }
  }

  // NGEO (tokens of 1 to 3 rows up to 8 apart, every shift, half of them of
  // every width 1..G*N, the others of all G*N values) or NCON (constants
  // small, at the int32 limits, or anywhere: the arithmetic's saturations).
  isa::Instruction norm_register(const ArchConfig& c) {
    if (pick(0, 1)) {
      const unsigned groups = pick(1, 3), stride = pick(0, 8), shift = pick(0, 15);
      const unsigned width = pick(0, 1) ? pick(1, groups * static_cast<unsigned>(c.array_n)) : 0;
      return make(isa::Opcode::NGEO, 0, groups, stride, shift, width);
    }
    const auto constant = [this]() -> std::int64_t {
      switch (pick(0, 3)) {
        case 0: return pick(0, 1) ? INT32_MIN : INT32_MAX;
        case 1: return static_cast<std::int64_t>(pick(0, 4000)) - 2000;
        default: return static_cast<std::int64_t>(pick(0, 0x7fffffff)) * (pick(0, 1) ? 1 : -1);
      }
    };
    const std::int64_t k0 = constant(), k1 = constant();
    return make(isa::Opcode::NCON, 0, k0, k1, constant());
  }

  // VSRC: operand B one row (one in three) or up to 20 rows, zero points of every sign.
  isa::Instruction vsrc(const ArchConfig& c) {
    const bool broadcast = pick(0, 2) == 0;
    const std::uint64_t b_row = ub_row(c, broadcast ? 1 : 20);
    return make(isa::Opcode::VSRC, broadcast ? isa::kFlagVsrcBroadcast : 0, b_row,
                static_cast<std::int64_t>(pick(0, 255)) - 128,
                static_cast<std::int64_t>(pick(0, 255)) - 128);
  }

  // VSCL: factors in -300..300, one in five at an int16 limit; every operation.
  isa::Instruction vscl() {
    const auto factor = [this]() -> std::int64_t {
      if (pick(0, 4) == 0) return pick(0, 1) ? -32768 : 32767;
      return static_cast<std::int64_t>(pick(0, 600)) - 300;
    };
    const std::int64_t da = factor();
    return make(isa::Opcode::VSCL, 0, da, factor(), pick(0, 4));
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
  std::uint64_t ub_row(const ArchConfig& c, std::uint64_t count = 20) { return windowed(c.ub_rows, count); }
  std::uint64_t acc_row(const ArchConfig& c, std::uint64_t count = 20) { return windowed(c.acc_rows, count); }
  std::uint64_t host_row(const ArchConfig& c, std::uint64_t count = 80) { return windowed(c.host_rows, count); }

  // About one program in ten with faults: an address past a memory's end, or a deadlock.
  std::vector<isa::Instruction> fault_instructions(const ArchConfig& c) {
    switch (pick(0, 6)) {
      case 6:  // a VEC whose operand B runs past the end of the UB (its operand A does not)
        return {make(isa::Opcode::VSRC, 0, c.ub_rows - 2, 0, 0), make(isa::Opcode::VEC, 0, 0, 0, 5)};
      case 0:  // past the end of the UB
        return {make(isa::Opcode::RHM, 0, 0, c.ub_rows - 2, 5)};
      case 1:  // past the end of the accumulators
        return {make(isa::Opcode::MMC, 0, 0, c.acc_rows - 1, 3)};
      case 4:  // an MMC.C whose map runs past the end of the UB (the one row it reads does not)
        return {make(isa::Opcode::CMAP, 0, 3, 3, 1), make(isa::Opcode::CTAP, 0, 0, 0),
                make(isa::Opcode::MMC, isa::kFlagMmcConvolve, c.ub_rows - 8, 0, 1)};
      case 5:  // a POOL whose map runs past the end of the UB (its one window does not)
        return {make(isa::Opcode::CMAP, 0, 2, 4, 1), make(isa::Opcode::CTAP, 0, 0, 0),
                make(isa::Opcode::CWIN, 0, 1, 1),
                make(isa::Opcode::POOL, isa::kFlagPoolAverage, c.ub_rows - 5, 0, 1)};
      case 2:  // one MMC.S more than there are RWs for: a deadlock
        return std::vector<isa::Instruction>(pending_tiles() + 1,
                                             make(isa::Opcode::MMC, isa::kFlagMmcSwitch, 0, 0, 2));
      default:  // more RWs than the FIFO and the shadow hold without a switch: a deadlock
        return std::vector<isa::Instruction>(c.fifo_depth + 2, make(isa::Opcode::RW, 0, 0));
    }
  }

  std::mt19937 rng_;
  bool large_;
};

RandomProgramGenerator::RandomProgramGenerator(std::uint32_t seed, bool large)
    : mix_(std::make_unique<MachineMix>(seed, large)) {}
RandomProgramGenerator::~RandomProgramGenerator() = default;
RandomProgram RandomProgramGenerator::next(bool faults) { return mix_->next(faults); }
void RandomProgramGenerator::fill(model::Memories& mem) { mix_->fill(mem); }
unsigned RandomProgramGenerator::pick(unsigned lo, unsigned hi) { return mix_->pick(lo, hi); }

}  // namespace tpu::testing
