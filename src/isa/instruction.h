// A decoded instruction, its binary encoding and its canonical assembly text.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/isa.h"

namespace tpu::isa {

struct Instruction {
  Opcode opcode = Opcode::NOP;
  std::uint8_t flags = 0;
  std::array<std::int64_t, kNumSlots> operands{};  // unused operands are 0

  bool has(std::uint8_t flag_mask) const { return (flags & flag_mask) != 0; }
  bool operator==(const Instruction& o) const {
    return opcode == o.opcode && flags == o.flags && operands == o.operands;
  }
  bool operator!=(const Instruction& o) const { return !(*this == o); }
};

using EncodedInstr = std::array<std::uint8_t, kInstrBytes>;

// Thrown for bytes that are not a valid instruction or program file.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks that `instr` is encodable: known opcode, accepted flags, at most one
// flag of an exclusive group, operands within their fields' legal ranges and
// unused operands zero. Returns an empty string when valid, else the reason.
std::string validate(const Instruction& instr);

// Encodes a valid instruction (validate() must return ""; throws
// std::invalid_argument otherwise).
EncodedInstr encode(const Instruction& instr);

// Decodes and validates; throws DecodeError with a one-line reason.
Instruction decode(const EncodedInstr& bytes);

// Canonical assembly: upper-case mnemonic, flags in table order, operands in
// decimal, e.g. "MMC.SO 0, 0, 10". tpu-as turns it back into the same bytes.
std::string disassemble(const Instruction& instr);

// ---- Memory footprint ------------------------------------------------------
// The memories an instruction reads and writes, in each memory's own units.
// The assembler checks them against a configuration, and the simulator uses
// them for fault checks and hazard interlocks.
enum class Space : std::uint8_t { HostMem, WeightMem, UnifiedBuffer, Accumulators };
const char* space_name(Space s);

struct Access {
  Space space;
  std::uint64_t base;
  std::uint64_t count;
  bool is_write;
  unsigned operand;  // index of the operand that holds `base`
};

// Host rows one accumulator row fills when WHM.A writes it out (N int32 = 4N bytes).
inline constexpr unsigned kHostRowsPerAccRow = 4;

std::vector<Access> accesses(const Instruction& instr);

}  // namespace tpu::isa
