// Disassembly and round trips: instruction -> bytes -> text -> assembler ->
// the same bytes, for hand-picked and for many random instructions, and a
// whole program file through the parser, the disassembler and the assembler.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "asm/assembler.h"
#include "isa/program.h"

namespace {

using tpu::assembler::assemble;
using tpu::assembler::Options;
using tpu::isa::disassemble;
using tpu::isa::EncodedInstr;
using tpu::isa::FieldSpec;
using tpu::isa::Instruction;
using tpu::isa::InstrSpec;
using tpu::isa::kInstrs;
using tpu::isa::Opcode;
using Bytes = std::vector<std::uint8_t>;

template <typename It>
std::string hex(It begin, It end) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (It it = begin; it != end; ++it) {
    if (!s.empty()) s += ' ';
    s += digits[*it >> 4];
    s += digits[*it & 15];
  }
  return s;
}

EncodedInstr from_hex(const std::string& text) {
  EncodedInstr b{};
  REQUIRE(text.size() == 16 * 3 - 1);
  for (unsigned i = 0; i < b.size(); ++i)
    b[i] = static_cast<std::uint8_t>(std::stoul(text.substr(3 * i, 2), nullptr, 16));
  return b;
}

// Random valid instructions from a fixed seed, with operands biased towards
// the edges of their fields.
class RandomInstructions {
 public:
  explicit RandomInstructions(std::uint64_t seed) : rng_(seed) {}

  Instruction next() {
    const InstrSpec& s = kInstrs[pick(0, kInstrs.size() - 1)];
    Instruction in;
    in.opcode = s.opcode;
    in.flags = flags(s);
    for (unsigned i = 0; i < s.num_operands; ++i)
      in.operands[i] = operand(tpu::isa::kFields[static_cast<unsigned>(s.operands[i])]);
    // NGEO's width is at most groups * N, which the assembler checks: keep it
    // within what every N (at least kMinArrayN) allows.
    if (s.opcode == tpu::isa::Opcode::NGEO)
      in.operands[3] = in.operands[3] % (in.operands[0] * tpu::isa::kMinArrayN + 1);
    // So are HWT's and RWU's rows (at most N, a tile's rows): 1 to kMinArrayN.
    if (s.opcode == tpu::isa::Opcode::HWT) in.operands[2] = 1 + (in.operands[2] - 1) % tpu::isa::kMinArrayN;
    if (s.opcode == tpu::isa::Opcode::RWU) in.operands[1] = 1 + (in.operands[1] - 1) % tpu::isa::kMinArrayN;
    return in;
  }

 private:
  std::int64_t pick(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }

  // Each flag with probability 1/2, drawn again while two exclusive ones are set.
  std::uint8_t flags(const InstrSpec& s) {
    for (;;) {
      unsigned f = 0;
      for (unsigned k = 0; k < s.num_flags; ++k)
        if (pick(0, 1) != 0) f |= 1u << s.flags[k].bit;
      const unsigned excl = f & s.exclusive_flags;
      if ((excl & (excl - 1)) == 0) return static_cast<std::uint8_t>(f);
    }
  }

  std::int64_t operand(const FieldSpec& f) {
    switch (pick(0, 7)) {
      case 0: return f.min;
      case 1: return f.max;
      case 2: return f.min + 1;
      case 3: return f.max - 1;
      case 4: return std::max(f.min, std::min(f.max, pick(-2, 2)));  // near zero
      default: return pick(f.min, f.max);
    }
  }

  std::mt19937_64 rng_;
};

// Assembles error-free source and returns the program file image.
Bytes assemble_file(const std::string& source) {
  const tpu::assembler::Result r = assemble(source, Options{});
  INFO(tpu::assembler::format_diagnostics("roundtrip.s", source, r.diagnostics));
  REQUIRE(r.diagnostics.empty());
  return tpu::isa::serialize(*r.program);
}

Instruction make(Opcode op, std::uint8_t flags = 0, std::int64_t a = 0, std::int64_t b = 0,
                 std::int64_t c = 0) {
  Instruction in;
  in.opcode = op;
  in.flags = flags;
  in.operands = {a, b, c};
  return in;
}

}  // namespace

TEST_CASE("disassemble writes the canonical assembly text", "[asm][roundtrip]") {
  CHECK(disassemble(make(Opcode::NOP)) == "NOP");
  CHECK(disassemble(make(Opcode::HLT)) == "HLT");
  CHECK(disassemble(make(Opcode::SYNC)) == "SYNC");
  CHECK(disassemble(make(Opcode::RW, 0, 12)) == "RW 12");
  CHECK(disassemble(make(Opcode::RHM, 0, 4294967295, 16777215, 1)) ==
        "RHM 4294967295, 16777215, 1");
  CHECK(disassemble(make(Opcode::MMC, 0b11, 0, 0, 10)) == "MMC.SO 0, 0, 10");
  CHECK(disassemble(make(Opcode::MMC, 0b10, 1, 2, 3)) == "MMC.O 1, 2, 3");
  CHECK(disassemble(make(Opcode::ACT, 0b100, 1, 2, 3)) == "ACT.T 1, 2, 3");
  CHECK(disassemble(make(Opcode::WHM, 0b1, 4, 5, 6)) == "WHM.A 4, 5, 6");
  CHECK(disassemble(make(Opcode::SETQ, 0, -2147483648, 62, -128)) ==
        "SETQ -2147483648, 62, -128");
  // The convolution instructions: flags in table order S, O, C; CTAP's two
  // operands; signed operands in decimal with a minus sign.
  CHECK(disassemble(make(Opcode::MMC, 0b111, 0, 0, 16)) == "MMC.SOC 0, 0, 16");
  CHECK(disassemble(make(Opcode::MMC, 0b100, 1, 2, 3)) == "MMC.C 1, 2, 3");
  CHECK(disassemble(make(Opcode::MMC, 0b101, 1, 2, 3)) == "MMC.SC 1, 2, 3");
  CHECK(disassemble(make(Opcode::MMC, 0b110, 1, 2, 3)) == "MMC.OC 1, 2, 3");
  CHECK(disassemble(make(Opcode::CMAP, 0, 65535, 1, 7)) == "CMAP 65535, 1, 7");
  CHECK(disassemble(make(Opcode::CSTR, 0, 255, 1, -128)) == "CSTR 255, 1, -128");
  CHECK(disassemble(make(Opcode::CTAP, 0, -1, -1)) == "CTAP -1, -1");
  CHECK(disassemble(make(Opcode::CTAP, 0, -32768, 32767)) == "CTAP -32768, 32767");
  // Pooling: POOL's one flag A; CWIN's two operands.
  CHECK(disassemble(make(Opcode::POOL, 0, 0, 40, 6)) == "POOL 0, 40, 6");
  CHECK(disassemble(make(Opcode::POOL, 0b1, 16777215, 0, 16777215)) ==
        "POOL.A 16777215, 0, 16777215");
  CHECK(disassemble(make(Opcode::CWIN, 0, 255, 1)) == "CWIN 255, 1");
  CHECK(disassemble(make(Opcode::CWIN, 0, 2, 3)) == "CWIN 2, 3");
  // The vector unit: VEC's flags are ACT's; VSRC's one flag B; VSCL's
  // signed factors.
  CHECK(disassemble(make(Opcode::VEC, 0b1, 0, 64, 16)) == "VEC.R 0, 64, 16");
  CHECK(disassemble(make(Opcode::VEC, 0, 16777215, 0, 1)) == "VEC 16777215, 0, 1");
  CHECK(disassemble(make(Opcode::VSRC, 0b1, 500, -128, 127)) == "VSRC.B 500, -128, 127");
  CHECK(disassemble(make(Opcode::VSCL, 0, -32768, 32767, 4)) == "VSCL -32768, 32767, 4");
}

TEST_CASE("the vector instructions assemble to their bytes and disassemble back",
          "[asm][roundtrip][vec]") {
  // Bytes worked out by hand from docs/isa.md section 4: opcode (VEC 0x0d,
  // VSRC 0x0e, VSCL 0x10), flags (VEC's R, Q, T = bits 0..2, VSRC's B =
  // bit 0), then each operand little-endian in its slot: rows 24 bits, za
  // and zb 8 bits, da and db 16 bits in two's complement, op 3 bits.
  struct Example {
    const char* text;   // as written
    const char* canon;  // as disassembled
    const char* bytes;
  };
  const std::vector<Example> examples = {
      {"VEC 1, 2, 3", "VEC 1, 2, 3", "0d 00 01 00 00 00 02 00 00 00 03 00 00 00 00 00"},
      {"vec.t 0x123456, 0xFFFFFF, 300", "VEC.T 1193046, 16777215, 300",
       "0d 04 56 34 12 00 ff ff ff 00 2c 01 00 00 00 00"},
      {"VEC.q 0, 0, 1", "VEC.Q 0, 0, 1", "0d 02 00 00 00 00 00 00 00 00 01 00 00 00 00 00"},
      {"VSRC 100, -3, 5", "VSRC 100, -3, 5", "0e 00 64 00 00 00 fd 00 00 00 05 00 00 00 00 00"},
      {"vsrc.b 0xFFFFFF, 127, -0x80", "VSRC.B 16777215, 127, -128",
       "0e 01 ff ff ff 00 7f 00 00 00 80 00 00 00 00 00"},
      {"VSCL 16384, 9000, 0", "VSCL 16384, 9000, 0",
       "10 00 00 40 00 00 28 23 00 00 00 00 00 00 00 00"},
      {"VSCL -1, 0 - 32768, 2 + 2", "VSCL -1, -32768, 4",
       "10 00 ff ff 00 00 00 80 00 00 04 00 00 00 00 00"},
  };
  for (const Example& e : examples) {
    INFO(e.text);
    const Bytes file = assemble_file(std::string(e.text) + "\n");
    REQUIRE(file.size() == 32);
    CHECK(hex(file.begin() + 16, file.end()) == e.bytes);
    const Instruction decoded = tpu::isa::decode(from_hex(e.bytes));
    CHECK(disassemble(decoded) == e.canon);
    const Bytes again = assemble_file(std::string(e.canon) + "\n");
    CHECK(hex(again.begin() + 16, again.end()) == e.bytes);
  }
}

TEST_CASE("the pooling instructions assemble to their bytes and disassemble back",
          "[asm][roundtrip][pool]") {
  // Bytes worked out by hand from docs/isa.md section 4: opcode (POOL 0x0b,
  // CWIN 0x0c), flags (POOL's A = bit 0), then each operand little-endian in
  // its slot (map_row, ub_row and rows 24 bits, win_h and win_w 8 bits), the
  // slots an instruction does not use and bytes 14..15 zero.
  struct Example {
    const char* text;   // as written
    const char* canon;  // as disassembled
    const char* bytes;
  };
  const std::vector<Example> examples = {
      {"POOL 1, 2, 3", "POOL 1, 2, 3", "0b 00 01 00 00 00 02 00 00 00 03 00 00 00 00 00"},
      {"pool.a 1, 2, 3", "POOL.A 1, 2, 3", "0b 01 01 00 00 00 02 00 00 00 03 00 00 00 00 00"},
      {"Pool.A 0x123456, 0xFFFFFF, 300", "POOL.A 1193046, 16777215, 300",
       "0b 01 56 34 12 00 ff ff ff 00 2c 01 00 00 00 00"},
      {"POOL 0, 0, 16777215", "POOL 0, 0, 16777215",
       "0b 00 00 00 00 00 00 00 00 00 ff ff ff 00 00 00"},
      {"CWIN 1, 1", "CWIN 1, 1", "0c 00 01 00 00 00 01 00 00 00 00 00 00 00 00 00"},
      {"cwin 255, 0x80", "CWIN 255, 128", "0c 00 ff 00 00 00 80 00 00 00 00 00 00 00 00 00"},
      {"CWIN 3, 2", "CWIN 3, 2", "0c 00 03 00 00 00 02 00 00 00 00 00 00 00 00 00"},
  };
  for (const Example& e : examples) {
    INFO(e.text);
    const Bytes file = assemble_file(std::string(e.text) + "\n");
    REQUIRE(file.size() == 32);
    CHECK(hex(file.begin() + 16, file.end()) == e.bytes);
    const Instruction decoded = tpu::isa::decode(from_hex(e.bytes));
    CHECK(disassemble(decoded) == e.canon);
    const Bytes again = assemble_file(std::string(e.canon) + "\n");
    CHECK(hex(again.begin() + 16, again.end()) == e.bytes);
  }
}

TEST_CASE("the convolution instructions assemble to their bytes and disassemble back",
          "[asm][roundtrip]") {
  // Bytes worked out by hand from docs/isa.md section 4: opcode (CMAP 0x08,
  // CSTR 0x09, CTAP 0x0a, MMC 0x04 with C = flag bit 2), flags, then each
  // operand little-endian in its slot, signed ones in two's complement in
  // their field's width (16 bits for y0 and x0, 8 for pad).
  struct Example {
    const char* text;   // as written
    const char* canon;  // as disassembled
    const char* bytes;
  };
  const std::vector<Example> examples = {
      {"CMAP 3, 4, 5", "CMAP 3, 4, 5", "08 00 03 00 00 00 04 00 00 00 05 00 00 00 00 00"},
      {"cmap 0xFFFF, 300, 1", "CMAP 65535, 300, 1",
       "08 00 ff ff 00 00 2c 01 00 00 01 00 00 00 00 00"},
      {"CSTR 2, 1, -1", "CSTR 2, 1, -1", "09 00 02 00 00 00 01 00 00 00 ff 00 00 00 00 00"},
      {"CSTR 255, 3, -0x80", "CSTR 255, 3, -128",
       "09 00 ff 00 00 00 03 00 00 00 80 00 00 00 00 00"},
      {"CSTR 1, 1, 127", "CSTR 1, 1, 127", "09 00 01 00 00 00 01 00 00 00 7f 00 00 00 00 00"},
      {"CTAP -1, -1", "CTAP -1, -1", "0a 00 ff ff 00 00 ff ff 00 00 00 00 00 00 00 00"},
      {"CTAP 0 - 32768, 32767", "CTAP -32768, 32767",
       "0a 00 00 80 00 00 ff 7f 00 00 00 00 00 00 00 00"},
      {"ctap 2, -3", "CTAP 2, -3", "0a 00 02 00 00 00 fd ff 00 00 00 00 00 00 00 00"},
      {"MMC.SOC 0, 0, 16", "MMC.SOC 0, 0, 16", "04 07 00 00 00 00 00 00 00 00 10 00 00 00 00 00"},
      {"mmc.cos 0, 0, 16", "MMC.SOC 0, 0, 16", "04 07 00 00 00 00 00 00 00 00 10 00 00 00 00 00"},
      {"MMC.C 8, 100, 16", "MMC.C 8, 100, 16", "04 04 08 00 00 00 64 00 00 00 10 00 00 00 00 00"},
      {"MMC.C.S 1, 2, 3", "MMC.SC 1, 2, 3", "04 05 01 00 00 00 02 00 00 00 03 00 00 00 00 00"},
      {"MMC.CO 1, 2, 3", "MMC.OC 1, 2, 3", "04 06 01 00 00 00 02 00 00 00 03 00 00 00 00 00"},
  };
  for (const Example& e : examples) {
    INFO(e.text);
    const Bytes file = assemble_file(std::string(e.text) + "\n");
    REQUIRE(file.size() == 32);
    CHECK(hex(file.begin() + 16, file.end()) == e.bytes);
    const Instruction decoded = tpu::isa::decode(from_hex(e.bytes));
    CHECK(disassemble(decoded) == e.canon);
    // The canonical text assembles to the same bytes.
    const Bytes again = assemble_file(std::string(e.canon) + "\n");
    CHECK(hex(again.begin() + 16, again.end()) == e.bytes);
  }
}

TEST_CASE("the documented examples assemble to their bytes and disassemble back", "[asm][roundtrip]") {
  // docs/isa.md section 3: each example line with its 16 bytes (the bytes of
  // MMC.C, CMAP, CSTR, CTAP, POOL and CWIN checked by hand against section 4
  // too).
  struct Example {
    const char* text;
    const char* bytes;
  };
  const std::vector<Example> examples = {
      {"RHM 0, 0, 8", "01 00 00 00 00 00 00 00 00 00 08 00 00 00 00 00"},
      {"RHM 4096, 32, 16", "01 00 00 10 00 00 20 00 00 00 10 00 00 00 00 00"},
      {"WHM 32, 512, 16", "02 00 20 00 00 00 00 02 00 00 10 00 00 00 00 00"},
      {"WHM.A 100, 1024, 2", "02 01 64 00 00 00 00 04 00 00 02 00 00 00 00 00"},
      {"RW 7", "03 00 07 00 00 00 00 00 00 00 00 00 00 00 00 00"},
      {"MMC 0, 100, 16", "04 00 00 00 00 00 64 00 00 00 10 00 00 00 00 00"},
      {"MMC.S 8, 100, 16", "04 01 08 00 00 00 64 00 00 00 10 00 00 00 00 00"},
      {"MMC.SO 0, 0, 10", "04 03 00 00 00 00 00 00 00 00 0a 00 00 00 00 00"},
      {"ACT 100, 32, 16", "05 00 64 00 00 00 20 00 00 00 10 00 00 00 00 00"},
      {"ACT.R 0, 0, 10", "05 01 00 00 00 00 00 00 00 00 0a 00 00 00 00 00"},
      {"ACT.Q 100, 48, 16", "05 02 64 00 00 00 30 00 00 00 10 00 00 00 00 00"},
      {"ACT.T 100, 64, 16", "05 04 64 00 00 00 40 00 00 00 10 00 00 00 00 00"},
      {"SETQ 1, 0, 0", "06 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00"},
      {"SETQ 1234, 10, -3", "06 00 d2 04 00 00 0a 00 00 00 fd 00 00 00 00 00"},
      {"SETQ -2147483648, 62, -128", "06 00 00 00 00 80 3e 00 00 00 80 00 00 00 00 00"},
      {"MMC.SOC 0, 0, 64", "04 07 00 00 00 00 00 00 00 00 40 00 00 00 00 00"},
      {"MMC.C 1000, 100, 448", "04 04 e8 03 00 00 64 00 00 00 c0 01 00 00 00 00"},
      {"CMAP 8, 8, 8", "08 00 08 00 00 00 08 00 00 00 08 00 00 00 00 00"},
      {"CSTR 1, 1, -3", "09 00 01 00 00 00 01 00 00 00 fd 00 00 00 00 00"},
      {"CTAP -1, -1", "0a 00 ff ff 00 00 ff ff 00 00 00 00 00 00 00 00"},
      {"CTAP -1, 0", "0a 00 ff ff 00 00 00 00 00 00 00 00 00 00 00 00"},
      {"MMC.SC 0, 0, 64", "04 05 00 00 00 00 00 00 00 00 40 00 00 00 00 00"},
      {"CMAP 224, 224, 112", "08 00 e0 00 00 00 e0 00 00 00 70 00 00 00 00 00"},
      {"CSTR 2, 2, 0", "09 00 02 00 00 00 02 00 00 00 00 00 00 00 00 00"},
      {"CTAP 0, 1", "0a 00 00 00 00 00 01 00 00 00 00 00 00 00 00 00"},
      {"POOL 0, 40, 6", "0b 00 00 00 00 00 28 00 00 00 06 00 00 00 00 00"},
      {"POOL.A 0, 50, 30", "0b 01 00 00 00 00 32 00 00 00 1e 00 00 00 00 00"},
      {"CMAP 6, 5, 2", "08 00 06 00 00 00 05 00 00 00 02 00 00 00 00 00"},
      {"CSTR 2, 2, -5", "09 00 02 00 00 00 02 00 00 00 fb 00 00 00 00 00"},
      {"CTAP 0, 0", "0a 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"},
      {"VEC 0, 64, 16", "0d 00 00 00 00 00 40 00 00 00 10 00 00 00 00 00"},
      {"VEC.R 100, 200, 8", "0d 01 64 00 00 00 c8 00 00 00 08 00 00 00 00 00"},
      {"VEC.Q 0, 0, 1", "0d 02 00 00 00 00 00 00 00 00 01 00 00 00 00 00"},
      {"VSRC 100, -3, 5", "0e 00 64 00 00 00 fd 00 00 00 05 00 00 00 00 00"},
      {"VSCL 16384, 9000, 0", "10 00 00 40 00 00 28 23 00 00 00 00 00 00 00 00"},
      {"SETQ 1518500250, 45, -128", "06 00 9a 79 82 5a 2d 00 00 00 80 00 00 00 00 00"},
      {"VEC.R 0, 200, 64", "0d 01 00 00 00 00 c8 00 00 00 40 00 00 00 00 00"},
      {"VSRC.B 500, 0, -128", "0e 01 f4 01 00 00 00 00 00 00 80 00 00 00 00 00"},
      {"VSCL 1, 1, 2", "10 00 01 00 00 00 01 00 00 00 02 00 00 00 00 00"},
      {"VEC 0, 64, 64", "0d 00 00 00 00 00 40 00 00 00 40 00 00 00 00 00"},
      {"CWIN 2, 2", "0c 00 02 00 00 00 02 00 00 00 00 00 00 00 00 00"},
      {"SYNC", "07 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"},
      {"NOP", "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"},
      {"HLT", "0f 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"},
      {"SMAX 0, 0, 32", "13 00 00 00 00 00 00 00 00 00 20 00 00 00 00 00"},
      {"LNRM 64, 128, 32", "14 00 40 00 00 00 80 00 00 00 20 00 00 00 00 00"},
      {"GELU 0, 256, 128", "15 00 00 00 00 00 00 01 00 00 80 00 00 00 00 00"},
      {"NGEO 4, 64, 11", "11 00 04 00 00 00 40 00 00 00 0b 00 00 00 00 00"},
      {"NCON 22713, 44335, 1030312935", "12 00 b9 58 00 00 2f ad 00 00 e7 53 69 3d 00 00"},
      {"SETQ 1073741824, 52, -128", "06 00 00 00 00 40 34 00 00 00 80 00 00 00 00 00"},
      {"SMAX 0, 0, 64", "13 00 00 00 00 00 00 00 00 00 40 00 00 00 00 00"},
      {"NGEO 3, 16, 2, 20", "11 00 03 00 00 00 10 00 00 00 02 00 00 00 14 00"},
      {"LNRM 0, 64, 32", "14 00 00 00 00 00 40 00 00 00 20 00 00 00 00 00"},
      {"HWT 0, 3, 8", "16 00 00 00 00 00 03 00 00 00 08 00 00 00 00 00"},
      {"HWT.T 64, 5, 8", "16 01 40 00 00 00 05 00 00 00 08 00 00 00 00 00"},
      {"RWU 16, 8", "17 00 10 00 00 00 08 00 00 00 00 00 00 00 00 00"},
      {"RWU.T 0, 4", "17 01 00 00 00 00 04 00 00 00 00 00 00 00 00 00"},
  };
  for (const Example& e : examples) {
    INFO(e.text);
    const Bytes file = assemble_file(std::string(e.text) + "\n");
    REQUIRE(file.size() == 32);
    CHECK(hex(file.begin() + 16, file.end()) == e.bytes);
    CHECK(disassemble(tpu::isa::decode(from_hex(e.bytes))) == e.text);
  }
}

TEST_CASE("random valid instructions decode back to themselves", "[isa][roundtrip]") {
  RandomInstructions gen(0x5eed0001);
  for (int i = 0; i < 5000; ++i) {
    const Instruction in = gen.next();
    INFO(disassemble(in));
    CHECK(tpu::isa::decode(tpu::isa::encode(in)) == in);
  }
}

TEST_CASE("random instructions survive encode, disassemble and assemble", "[asm][roundtrip]") {
  RandomInstructions gen(0x5eed0002);
  std::set<std::pair<unsigned, unsigned>> opcode_flags_seen;
  for (int i = 0; i < 5000; ++i) {
    const Instruction in = gen.next();
    opcode_flags_seen.insert({static_cast<unsigned>(in.opcode), in.flags});
    const EncodedInstr bytes = tpu::isa::encode(in);
    const std::string text = disassemble(in);
    INFO(text);
    const Bytes file = assemble_file(text + "\n");
    REQUIRE(file.size() == 16 + 16);
    CHECK(hex(file.begin() + 16, file.end()) == hex(bytes.begin(), bytes.end()));
  }
  // The generator reached every opcode with every legal flag set:
  // 16 instructions without flags (NOP, RHM, RW, SETQ, SYNC, CMAP, CSTR,
  // CTAP, CWIN, HLT, VSCL, NGEO, NCON, SMAX, LNRM, GELU), WHM 2, POOL 2,
  // VSRC 2, MMC 8 (any of S, O, C), ACT and VEC 4 each (none, R, Q, T),
  // HWT and RWU 2 each (none, T).
  CHECK(opcode_flags_seen.size() == 16 + 2 + 2 + 2 + 8 + 4 + 4 + 2 + 2);
}

TEST_CASE("a random program file survives parse, disassemble and assemble", "[asm][roundtrip]") {
  RandomInstructions gen(0x5eed0003);
  std::mt19937_64 rng(0x5eed0004);
  for (int round = 0; round < 5; ++round) {
    tpu::isa::Program prog;
    prog.array_n = static_cast<unsigned>(std::uniform_int_distribution<unsigned>(4, 256)(rng));
    for (int i = 0; i < 400; ++i) prog.code.push_back(gen.next());
    const Bytes file = tpu::isa::serialize(prog);

    const tpu::isa::Program parsed = tpu::isa::parse_program(file);
    std::string source = ".array " + std::to_string(parsed.array_n) + "\n";
    for (const Instruction& in : parsed.code) source += disassemble(in) + "\n";
    INFO("array size " << prog.array_n);
    CHECK(assemble_file(source) == file);
  }
}
