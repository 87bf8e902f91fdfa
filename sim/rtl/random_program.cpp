#include "random_program.h"

#include <algorithm>

namespace tpu::rtl {
namespace {

class Generator {
 public:
  Generator(const ArchConfig& cfg, std::uint64_t seed, const Windows& w)
      : cfg_(cfg), w_(w), rng_(seed) {}

  isa::Program run() {
    isa::Program p;
    p.array_n = static_cast<unsigned>(cfg_.array_n);
    const unsigned length = pick(1, 40);
    for (unsigned i = 0; i < length; ++i) p.code.push_back(next());
    p.code.push_back(make(isa::Opcode::HLT, 0));
    return p;
  }

 private:
  std::uint64_t pick(std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng_);
  }
  std::uint64_t rows() { return pick(1, w_.max_rows); }
  std::uint64_t base(std::uint64_t window, std::uint64_t count) { return pick(0, window - count); }

  static isa::Instruction make(isa::Opcode op, std::uint8_t flags, std::int64_t a = 0,
                               std::int64_t b = 0, std::int64_t c = 0) {
    isa::Instruction in;
    in.opcode = op;
    in.flags = flags;
    in.operands = {a, b, c};
    return in;
  }

  isa::Instruction next() {
    using isa::Opcode;
    const auto i64 = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
    for (;;) {
      switch (pick(0, 13)) {
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
          if (pending_ >= cfg_.fifo_depth + 1) continue;
          ++pending_;
          return make(Opcode::RW, 0, i64(pick(0, w_.weight_tiles - 1)));
        case 6:
        case 7:
        case 8: {
          std::uint8_t flags = pick(0, 1) ? isa::kFlagMmcOverwrite : 0;
          if (pending_ > 0 && pick(0, 2) != 0) {
            flags |= isa::kFlagMmcSwitch;
            --pending_;
          }
          const std::uint64_t r = rows();
          return make(Opcode::MMC, flags, i64(base(w_.ub_rows, r)), i64(base(w_.acc_rows, r)), i64(r));
        }
        case 9:
        case 10: {
          static constexpr std::uint8_t kFunctions[] = {0, isa::kFlagActRelu, isa::kFlagActSigmoid,
                                                        isa::kFlagActTanh};
          const std::uint64_t r = rows();
          return make(Opcode::ACT, kFunctions[pick(0, 3)], i64(base(w_.acc_rows, r)),
                      i64(base(w_.ub_rows, r)), i64(r));
        }
        case 11: {
          const auto m = static_cast<std::int32_t>(static_cast<std::uint32_t>(rng_()));
          return make(Opcode::SETQ, 0, pick(0, 3) ? m % 512 : m, i64(pick(0, 62)),
                      static_cast<std::int64_t>(pick(0, 255)) - 128);
        }
        case 12: return make(Opcode::SYNC, 0);
        default: return make(Opcode::NOP, 0);
      }
    }
  }

  const ArchConfig& cfg_;
  const Windows& w_;
  std::mt19937_64 rng_;
  std::uint64_t pending_ = 0;  // RWs no switch has taken yet
};

}  // namespace

isa::Program random_program(const ArchConfig& cfg, std::uint64_t seed, const Windows& w) {
  return Generator(cfg, seed, w).run();
}

void random_memories(model::Memories& mem, std::uint64_t seed, const Windows& w) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  const auto fill = [&](auto* data, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i)
      data[i] = static_cast<std::remove_reference_t<decltype(data[0])>>(rng());
  };
  fill(mem.host.data().data(), w.host_rows * mem.host.width());
  fill(mem.weights.data().data(), w.weight_tiles * mem.weights.width());
  fill(mem.ub.data().data(), w.ub_rows * mem.ub.width());
  // Small accumulators, so that requantized values are not all saturated.
  for (std::size_t i = 0; i < w.acc_rows * mem.acc.width(); ++i)
    mem.acc.data()[i] = static_cast<std::int32_t>(rng() % 20001) - 10000;
}

}  // namespace tpu::rtl
