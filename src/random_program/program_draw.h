// What the instruction mixes of random_program.h share while they draw a
// program: the instruction builder, the rule that keeps it clear of
// deadlocks, and the registers (convolution, pooling, vector) as the next
// instruction will find them. Each mix keeps its own random stream.
#pragma once

#include <cstdint>

#include "config/arch_config.h"
#include "isa/instruction.h"
#include "isa/program.h"

namespace tpu::testing {

class ProgramDraw {
 protected:
  // ACT's and VEC's activation functions, each drawn alike.
  static constexpr std::uint8_t kActivations[] = {0, isa::kFlagActRelu, isa::kFlagActSigmoid,
                                                  isa::kFlagActTanh};

  // An instruction; the mixes pass only the operands its opcode has.
  static isa::Instruction make(isa::Opcode op, std::uint8_t flags, std::int64_t a = 0,
                               std::int64_t b = 0, std::int64_t c = 0, std::int64_t d = 0) {
    isa::Instruction in;
    in.opcode = op;
    in.flags = flags;
    in.operands = {a, b, c, d};
    return in;
  }

  // A new program for a machine of size `array_n`, the registers at reset.
  void start(isa::Program& p, std::uint64_t array_n) {
    p.array_n = static_cast<unsigned>(array_n);
    pending_tiles_ = 0;
    registers_ = {};
  }
  // Appends `in`, following the registers it sets.
  void append(isa::Program& p, const isa::Instruction& in) {
    p.code.push_back(in);
    registers_.apply(in);
  }
  void finish(isa::Program& p) const { p.code.push_back(make(isa::Opcode::HLT, 0)); }

  // The deadlock rule. The FIFO plus the shadow hold fifo_depth + 1 tiles no
  // switch has taken: an RW beyond them would wait for a switch forever, and
  // an MMC.S with no such tile for an RW.
  bool weights_full(const ArchConfig& c) const { return pending_tiles_ >= c.fifo_depth + 1; }
  void read_weights() { ++pending_tiles_; }
  bool can_switch() const { return pending_tiles_ > 0; }
  std::uint8_t take_switch() {
    --pending_tiles_;
    return isa::kFlagMmcSwitch;
  }
  std::uint64_t pending_tiles() const { return pending_tiles_; }

  // The registers after the instructions appended so far.
  const isa::ConvGeometry& registers() const { return registers_; }
  isa::ConvGeometry& registers() { return registers_; }

 private:
  std::uint64_t pending_tiles_ = 0;  // RWs no switch has taken yet
  isa::ConvGeometry registers_;
};

}  // namespace tpu::testing
