// The program file: a header, then the encoded instructions.
//
// Header, 16 bytes, little-endian (docs/isa.md):
//   [0..3]   magic "TPUP"
//   [4..5]   format version (kFormatVersion)
//   [6..7]   array size N the program was assembled for
//   [8..11]  instruction count
//   [12..15] reserved, zero
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isa/instruction.h"

namespace tpu::isa {

inline constexpr std::array<std::uint8_t, 4> kMagic{'T', 'P', 'U', 'P'};
inline constexpr std::uint16_t kFormatVersion = 1;
inline constexpr unsigned kHeaderBytes = 16;
inline constexpr unsigned kMinArrayN = 4;
inline constexpr unsigned kMaxArrayN = 256;

struct Program {
  unsigned array_n = 0;
  std::vector<Instruction> code;
};

std::vector<std::uint8_t> serialize(const Program& prog);

// Parses and validates a whole file image; throws DecodeError with a one-line
// reason (instruction errors name the pc).
Program parse_program(const std::vector<std::uint8_t>& bytes);

// Reads and parses a program file; errors name the path.
Program load_program(const std::string& path);


}  // namespace tpu::isa
