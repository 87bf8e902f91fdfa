// Lets Catch print isa::Instruction values in failure messages.
#pragma once

#include <ostream>

#include "isa/instruction.h"

namespace tpu::isa {
inline std::ostream& operator<<(std::ostream& os, const Instruction& in) {
  return os << "{opcode 0x" << std::hex << static_cast<unsigned>(in.opcode) << " flags 0x"
            << static_cast<unsigned>(in.flags) << std::dec << " operands " << in.operands[0]
            << ", " << in.operands[1] << ", " << in.operands[2] << ", " << in.operands[3] << "}";
}
}  // namespace tpu::isa
