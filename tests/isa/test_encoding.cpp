// Instruction encoding and decoding against the documented layout (isa.h):
// one 128-bit little-endian word with bits [7:0] opcode, [15:8] flags,
// operand slot i at bit 16 + 32*i in its field's width (two's complement for
// signed fields, zero-extended to the slot) and bits [127:112] zero.
//
// Expected bytes are computed here with plain shifts on a 128-bit integer,
// never with the library's own bit helpers.
#include <catch2/catch.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "isa/instruction.h"
#include "isa/isa.h"

#include "support/print_instruction.h"

namespace {

using Catch::Matchers::Contains;
using tpu::isa::decode;
using tpu::isa::DecodeError;
using tpu::isa::EncodedInstr;
using tpu::isa::encode;
using tpu::isa::Field;
using tpu::isa::FieldSpec;
using tpu::isa::Instruction;
using tpu::isa::InstrSpec;
using tpu::isa::kInstrs;
using tpu::isa::Opcode;
using tpu::isa::validate;

__extension__ typedef unsigned __int128 Word;

const InstrSpec& spec_for(Opcode op) {
  for (const InstrSpec& s : kInstrs)
    if (s.opcode == op) return s;
  FAIL("opcode not in the table");
  return kInstrs[0];
}

const FieldSpec& field(Field f) { return tpu::isa::kFields[static_cast<unsigned>(f)]; }

// The documented layout, built from the instruction's fields with shifts.
EncodedInstr expected_bytes(const Instruction& in) {
  const InstrSpec& spec = spec_for(in.opcode);
  Word w = Word{static_cast<std::uint8_t>(in.opcode)} | Word{in.flags} << 8;
  for (unsigned i = 0; i < spec.num_operands; ++i) {
    const unsigned width = field(spec.operands[i]).width;
    const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
    w |= Word{static_cast<std::uint64_t>(in.operands[i]) & mask} << (16 + 32 * i);
  }
  EncodedInstr b{};
  for (unsigned k = 0; k < b.size(); ++k) b[k] = static_cast<std::uint8_t>(w >> (8 * k));
  return b;
}

std::string hex(const EncodedInstr& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (std::uint8_t v : b) {
    if (!s.empty()) s += ' ';
    s += digits[v >> 4];
    s += digits[v & 15];
  }
  return s;
}

EncodedInstr with_bit(EncodedInstr b, unsigned bit) {
  b[bit / 8] = static_cast<std::uint8_t>(b[bit / 8] | (1u << (bit % 8)));
  return b;
}

std::string decode_error(const EncodedInstr& b) {
  try {
    decode(b);
  } catch (const DecodeError& e) {
    return e.what();
  }
  return "<decoded without error>";
}

// Every subset of the instruction's flags with at most one exclusive flag.
std::vector<std::uint8_t> legal_flag_sets(const InstrSpec& s) {
  std::vector<std::uint8_t> sets;
  for (unsigned subset = 0; subset < (1u << s.num_flags); ++subset) {
    unsigned flags = 0;
    unsigned exclusive = 0;
    for (unsigned k = 0; k < s.num_flags; ++k) {
      if (((subset >> k) & 1u) == 0) continue;
      const unsigned mask = 1u << s.flags[k].bit;
      flags |= mask;
      if (s.exclusive_flags & mask) ++exclusive;
    }
    if (exclusive <= 1) sets.push_back(static_cast<std::uint8_t>(flags));
  }
  return sets;
}

// min, min + 1, the middle, max - 1 and max of a field.
std::vector<std::int64_t> edge_values(const FieldSpec& f) {
  return {f.min, f.min + 1, f.min + (f.max - f.min) / 2, f.max - 1, f.max};
}

// Every instruction of the table with every legal flag set and every
// combination of edge values of its operands.
std::vector<Instruction> all_legal_instructions() {
  std::vector<Instruction> out;
  for (const InstrSpec& s : kInstrs) {
    std::vector<Instruction> partial(1);
    partial[0].opcode = s.opcode;
    for (unsigned i = 0; i < s.num_operands; ++i) {
      std::vector<Instruction> next;
      for (const Instruction& p : partial)
        for (std::int64_t v : edge_values(field(s.operands[i]))) {
          Instruction in = p;
          in.operands[i] = v;
          next.push_back(in);
        }
      partial = next;
    }
    for (std::uint8_t flags : legal_flag_sets(s))
      for (Instruction in : partial) {
        in.flags = flags;
        out.push_back(in);
      }
  }
  return out;
}

// A valid instruction: no flags, every operand at its field's minimum.
Instruction minimal(const InstrSpec& s) {
  Instruction in;
  in.opcode = s.opcode;
  for (unsigned i = 0; i < s.num_operands; ++i) in.operands[i] = field(s.operands[i]).min;
  return in;
}

}  // namespace

TEST_CASE("the instruction table matches the documented ISA", "[isa][encoding]") {
  struct Doc {
    const char* mnemonic;
    unsigned opcode;
    const char* flags;  // letter k is flag bit k
    unsigned exclusive;
    std::vector<Field> operands;
  };
  const std::vector<Doc> doc = {
      {"NOP", 0x00, "", 0, {}},
      {"RHM", 0x01, "", 0, {Field::HostRow, Field::UbRow, Field::Rows}},
      {"WHM", 0x02, "A", 0, {Field::SrcRow, Field::HostRow, Field::Rows}},
      {"RW", 0x03, "", 0, {Field::WeightTile}},
      {"MMC", 0x04, "SOC", 0, {Field::UbRow, Field::AccRow, Field::Rows}},
      {"ACT", 0x05, "RQT", 0b111, {Field::AccRow, Field::UbRow, Field::Rows}},
      {"SETQ", 0x06, "", 0, {Field::QMul, Field::QShift, Field::QZero}},
      {"SYNC", 0x07, "", 0, {}},
      {"CMAP", 0x08, "", 0, {Field::MapH, Field::MapW, Field::OutW}},
      {"CSTR", 0x09, "", 0, {Field::StrideY, Field::StrideX, Field::Pad}},
      {"CTAP", 0x0A, "", 0, {Field::OriginY, Field::OriginX}},
      {"POOL", 0x0B, "A", 0, {Field::MapRow, Field::UbRow, Field::Rows}},
      {"CWIN", 0x0C, "", 0, {Field::WinH, Field::WinW}},
      {"VEC", 0x0D, "RQT", 0b111, {Field::VecARow, Field::UbRow, Field::Rows}},
      {"VSRC", 0x0E, "B", 0, {Field::VecBRow, Field::VecZeroA, Field::VecZeroB}},
      {"HLT", 0x0F, "", 0, {}},
      {"VSCL", 0x10, "", 0, {Field::VecFactorA, Field::VecFactorB, Field::VecOp}},
      {"NGEO", 0x11, "", 0, {Field::NormGroups, Field::NormStride, Field::NormShift, Field::NormWidth}},
      {"NCON", 0x12, "", 0, {Field::NormK0, Field::NormK1, Field::NormK2}},
      {"SMAX", 0x13, "", 0, {Field::NormRow, Field::UbRow, Field::Rows}},
      {"LNRM", 0x14, "", 0, {Field::NormRow, Field::UbRow, Field::Rows}},
      {"GELU", 0x15, "", 0, {Field::NormRow, Field::UbRow, Field::Rows}},
      {"HWT", 0x16, "T", 0, {Field::HostRow, Field::WeightTile, Field::Rows}},
      {"RWU", 0x17, "T", 0, {Field::UbRow, Field::Rows}},
  };
  REQUIRE(kInstrs.size() == doc.size());
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const InstrSpec& s = kInstrs[i];
    INFO(doc[i].mnemonic);
    CHECK(s.mnemonic == doc[i].mnemonic);
    CHECK(static_cast<unsigned>(s.opcode) == doc[i].opcode);
    CHECK(s.exclusive_flags == doc[i].exclusive);
    const std::string letters = doc[i].flags;
    REQUIRE(s.num_flags == letters.size());
    for (unsigned k = 0; k < s.num_flags; ++k) {
      CHECK(s.flags[k].letter == letters[k]);
      CHECK(s.flags[k].bit == k);
    }
    REQUIRE(s.num_operands == doc[i].operands.size());
    for (unsigned k = 0; k < s.num_operands; ++k) CHECK(s.operands[k] == doc[i].operands[k]);
  }
}

TEST_CASE("the operand fields have the documented widths and ranges", "[isa][encoding]") {
  struct Doc {
    Field f;
    const char* name;
    unsigned width;
    bool is_signed;
    std::int64_t min, max;
  };
  const std::int64_t u24 = (std::int64_t{1} << 24) - 1;
  const std::vector<Doc> doc = {
      {Field::HostRow, "host_row", 32, false, 0, 4294967295},
      {Field::UbRow, "ub_row", 24, false, 0, u24},
      {Field::AccRow, "acc_row", 24, false, 0, u24},
      {Field::SrcRow, "src_row", 24, false, 0, u24},
      {Field::WeightTile, "weight_tile", 24, false, 0, u24},
      {Field::Rows, "rows", 24, false, 1, u24},
      {Field::QMul, "M", 32, true, -2147483648, 2147483647},
      {Field::QShift, "S", 6, false, 0, 62},
      {Field::QZero, "Z", 8, true, -128, 127},
      // The convolution registers: map height and width and output width
      // 1..65535, strides 1..255, the pad value an int8, the origin int16.
      {Field::MapH, "in_h", 16, false, 1, 65535},
      {Field::MapW, "in_w", 16, false, 1, 65535},
      {Field::OutW, "out_w", 16, false, 1, 65535},
      {Field::StrideY, "stride_y", 8, false, 1, 255},
      {Field::StrideX, "stride_x", 8, false, 1, 255},
      {Field::Pad, "pad", 8, true, -128, 127},
      {Field::OriginY, "y0", 16, true, -32768, 32767},
      {Field::OriginX, "x0", 16, true, -32768, 32767},
      // The pooling window 1..255 each way, and a map's UB row.
      {Field::WinH, "win_h", 8, false, 1, 255},
      {Field::WinW, "win_w", 8, false, 1, 255},
      {Field::MapRow, "map_row", 24, false, 0, u24},
      // The vector unit: two UB rows, int8 zero points, int16 factors and
      // the operation 0..4 (ADD, SUB, MUL, MAX, MIN) in 3 bits.
      {Field::VecARow, "a_row", 24, false, 0, u24},
      {Field::VecBRow, "b_row", 24, false, 0, u24},
      {Field::VecZeroA, "za", 8, true, -128, 127},
      {Field::VecZeroB, "zb", 8, true, -128, 127},
      {Field::VecFactorA, "da", 16, true, -32768, 32767},
      {Field::VecFactorB, "db", 16, true, -32768, 32767},
      {Field::VecOp, "op", 3, false, 0, 4},
      // SMAX, LNRM and GELU: a token of 1..65535 rows any distance apart,
      // a 4-bit shift, three int32 constants and the input's UB row.
      {Field::NormGroups, "groups", 16, false, 1, 65535},
      {Field::NormStride, "stride", 24, false, 0, u24},
      {Field::NormShift, "sh", 4, false, 0, 15},
      {Field::NormK0, "k0", 32, true, -2147483648, 2147483647},
      {Field::NormK1, "k1", 32, true, -2147483648, 2147483647},
      {Field::NormK2, "k2", 32, true, -2147483648, 2147483647},
      {Field::NormRow, "x_row", 24, false, 0, u24},
      // NGEO's token width D: 0 (all groups * N) or 1..65535, in slot 3's 16 bits.
      {Field::NormWidth, "width", 16, false, 0, 65535},
  };
  REQUIRE(tpu::isa::kFields.size() == doc.size());
  for (const Doc& d : doc) {
    const FieldSpec& f = field(d.f);
    INFO(d.name);
    CHECK(f.field == d.f);
    CHECK(f.name == d.name);
    CHECK(f.width == d.width);
    CHECK(f.is_signed == d.is_signed);
    CHECK(f.min == d.min);
    CHECK(f.max == d.max);
  }
}

TEST_CASE("hand-written instructions encode to hand-written bytes", "[isa][encoding]") {
  struct Golden {
    Instruction in;
    EncodedInstr bytes;
  };
  const std::vector<Golden> golden = {
      {{Opcode::HLT, 0, {0, 0, 0}}, {0x0F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      {{Opcode::MMC, 0x03, {1, 2, 3}}, {0x04, 0x03, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0}},
      {{Opcode::RHM, 0, {0x89ABCDEF, 0x123456, 0xFFFFFF}},
       {0x01, 0, 0xEF, 0xCD, 0xAB, 0x89, 0x56, 0x34, 0x12, 0, 0xFF, 0xFF, 0xFF, 0, 0, 0}},
      {{Opcode::SETQ, 0, {-1, 62, -128}},
       {0x06, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x3E, 0, 0, 0, 0x80, 0, 0, 0, 0, 0}},
      {{Opcode::ACT, 0x04, {5, 6, 7}}, {0x05, 0x04, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0, 0, 0}},
      // NGEO's 16-, 24- and 4-bit fields; NCON's int32 constants in two's complement.
      {{Opcode::NGEO, 0, {65535, 0x123456, 15}},
       {0x11, 0, 0xFF, 0xFF, 0, 0, 0x56, 0x34, 0x12, 0, 0x0F, 0, 0, 0, 0, 0}},
      // NGEO's width in slot 3, bytes 14 and 15.
      {{Opcode::NGEO, 0, {1, 0, 0, 0xABCD}},
       {0x11, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xCD, 0xAB}},
      {{Opcode::NCON, 0, {-1, -2147483648, 2147483647}},
       {0x12, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0x80, 0xFF, 0xFF, 0xFF, 0x7F, 0, 0}},
      {{Opcode::GELU, 0, {1, 2, 3}}, {0x15, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0}},
      // Attention's second operand: HWT's host row, tile and rows; RWU's UB row and rows; T in bit 0.
      {{Opcode::HWT, 0x01, {64, 5, 32}}, {0x16, 0x01, 64, 0, 0, 0, 5, 0, 0, 0, 32, 0, 0, 0, 0, 0}},
      {{Opcode::RWU, 0, {0x123456, 256}}, {0x17, 0, 0x56, 0x34, 0x12, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
      // The convolution instructions: 16-bit fields in the low two bytes of
      // their slots, 8-bit ones in the low byte, signed ones in two's
      // complement in their own width (CTAP -1 is ff ff 00 00, not ff ff ff ff).
      {{Opcode::MMC, 0x04, {5, 6, 7}}, {0x04, 0x04, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0, 0, 0, 0, 0}},
      {{Opcode::MMC, 0x07, {0, 0, 16}}, {0x04, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0}},
      {{Opcode::CMAP, 0, {3, 4, 5}}, {0x08, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 0, 0}},
      {{Opcode::CMAP, 0, {65535, 1, 0x1234}},
       {0x08, 0, 0xFF, 0xFF, 0, 0, 1, 0, 0, 0, 0x34, 0x12, 0, 0, 0, 0}},
      {{Opcode::CSTR, 0, {255, 1, -128}},
       {0x09, 0, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0x80, 0, 0, 0, 0, 0}},
      {{Opcode::CSTR, 0, {2, 3, -1}}, {0x09, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xFF, 0, 0, 0, 0, 0}},
      {{Opcode::CSTR, 0, {1, 1, 127}}, {0x09, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0x7F, 0, 0, 0, 0, 0}},
      {{Opcode::CTAP, 0, {-1, -1, 0}},
       {0x0A, 0, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0}},
      {{Opcode::CTAP, 0, {-32768, 32767, 0}},
       {0x0A, 0, 0x00, 0x80, 0, 0, 0xFF, 0x7F, 0, 0, 0, 0, 0, 0, 0, 0}},
      {{Opcode::CTAP, 0, {2, -3, 0}}, {0x0A, 0, 2, 0, 0, 0, 0xFD, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0}},
      // Pooling: POOL's 24-bit rows in the low three bytes of their slots,
      // its flag A in bit 0; CWIN's 8-bit window in the low byte of slots 0
      // and 1, slot 2 unused.
      {{Opcode::POOL, 0, {0, 40, 6}}, {0x0B, 0, 0, 0, 0, 0, 40, 0, 0, 0, 6, 0, 0, 0, 0, 0}},
      {{Opcode::POOL, 0x01, {0, 50, 30}},
       {0x0B, 0x01, 0, 0, 0, 0, 0x32, 0, 0, 0, 0x1E, 0, 0, 0, 0, 0}},
      {{Opcode::POOL, 0x01, {0x123456, 0xFFFFFF, 0xABCDEF}},
       {0x0B, 0x01, 0x56, 0x34, 0x12, 0, 0xFF, 0xFF, 0xFF, 0, 0xEF, 0xCD, 0xAB, 0, 0, 0}},
      {{Opcode::CWIN, 0, {2, 3, 0}}, {0x0C, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      {{Opcode::CWIN, 0, {255, 1, 0}}, {0x0C, 0, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      {{Opcode::CWIN, 0, {1, 255, 0}}, {0x0C, 0, 1, 0, 0, 0, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      // The vector unit (docs/isa.md, VEC): VEC as ACT with A's row first;
      // VSRC's B flag in bit 0 and two int8 zero points; VSCL's int16
      // factors in the low two bytes and the 3-bit operation.
      {{Opcode::VEC, 0x01, {100, 200, 8}},
       {0x0D, 0x01, 100, 0, 0, 0, 200, 0, 0, 0, 8, 0, 0, 0, 0, 0}},
      {{Opcode::VEC, 0x04, {0xFFFFFF, 0, 0x10000}},
       {0x0D, 0x04, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}},
      {{Opcode::VSRC, 0x01, {500, 0, -128}},
       {0x0E, 0x01, 0xF4, 0x01, 0, 0, 0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0}},
      {{Opcode::VSRC, 0, {100, -3, 5}}, {0x0E, 0, 100, 0, 0, 0, 0xFD, 0, 0, 0, 5, 0, 0, 0, 0, 0}},
      {{Opcode::VSCL, 0, {16384, 9000, 0}},
       {0x10, 0, 0x00, 0x40, 0, 0, 0x28, 0x23, 0, 0, 0, 0, 0, 0, 0, 0}},
      {{Opcode::VSCL, 0, {-32768, -1, 4}},
       {0x10, 0, 0x00, 0x80, 0, 0, 0xFF, 0xFF, 0, 0, 4, 0, 0, 0, 0, 0}},
  };
  for (const Golden& g : golden) {
    INFO(g.in);
    CHECK(hex(encode(g.in)) == hex(g.bytes));
    CHECK(decode(g.bytes) == g.in);
  }
}

TEST_CASE("every legal instruction encodes to the documented layout", "[isa][encoding]") {
  const std::vector<Instruction> all = all_legal_instructions();
  // NOP, SYNC, HLT: 1 each; RW: 5; RHM, SETQ, CMAP, CSTR: 125; CTAP, CWIN:
  // 25; WHM, POOL: 2 x 125; MMC: 8 x 125 (S, O, C); ACT: 4 x 125; VEC: 4 x
  // 125 (R, Q, T); VSRC: 2 x 125 (B); VSCL: 125; NCON, SMAX, LNRM, GELU:
  // 125 each; NGEO (four operands): 625; HWT: 2 x 125 (T); RWU: 2 x 25 (T).
  REQUIRE(all.size() == 3 + 5 + 4 * 125 + 2 * 25 + 2 * 2 * 125 + 8 * 125 + 4 * 125 + 4 * 125 +
                            2 * 125 + 125 + 4 * 125 + 625 + 2 * 125 + 2 * 25);
  for (const Instruction& in : all) {
    INFO(in);
    CHECK(hex(encode(in)) == hex(expected_bytes(in)));
  }
}

TEST_CASE("decoding the documented layout gives back every legal instruction", "[isa][encoding]") {
  for (const Instruction& in : all_legal_instructions()) {
    INFO(in);
    CHECK(decode(expected_bytes(in)) == in);
  }
}

TEST_CASE("decode rejects every opcode byte that is not in the table", "[isa][decode]") {
  unsigned rejected = 0;
  for (unsigned op = 0; op < 256; ++op) {
    bool known = false;
    for (const InstrSpec& s : kInstrs) known = known || static_cast<unsigned>(s.opcode) == op;
    if (known) continue;
    EncodedInstr b{};
    b[0] = static_cast<std::uint8_t>(op);
    INFO("opcode " << op);
    CHECK_THAT(decode_error(b), Contains("unknown opcode"));
    ++rejected;
  }
  CHECK(rejected == 256 - kInstrs.size());
}

TEST_CASE("decode rejects flag bits an instruction does not define", "[isa][decode]") {
  for (const InstrSpec& s : kInstrs) {
    unsigned defined = 0;
    for (unsigned k = 0; k < s.num_flags; ++k) defined |= 1u << s.flags[k].bit;
    for (unsigned bit = 0; bit < 8; ++bit) {
      if (defined & (1u << bit)) continue;
      INFO(s.mnemonic << " flag bit " << bit);
      CHECK_THAT(decode_error(with_bit(expected_bytes(minimal(s)), 8 + bit)),
                 Contains("not defined"));
    }
  }
}

TEST_CASE("undefined flag bits: one bit is singular, several plural", "[isa][decode][plural]") {
  Instruction mmc = minimal(spec_for(Opcode::MMC));  // defines bits 0 (S), 1 (O) and 2 (C)
  mmc.flags = 0x80;
  CHECK(decode_error(expected_bytes(mmc)) == "flag bit 0x80 is not defined for MMC");
  CHECK(validate(mmc) == "flag bit 0x80 is not defined for MMC");
  mmc.flags = 0x18;
  CHECK(decode_error(expected_bytes(mmc)) == "flag bits 0x18 are not defined for MMC");
  mmc.flags = 0x0c;  // C is defined: only bit 3 is not
  CHECK(decode_error(expected_bytes(mmc)) == "flag bit 0x08 is not defined for MMC");
  mmc.flags = 0xff;
  CHECK(decode_error(expected_bytes(mmc)) == "flag bits 0xf8 are not defined for MMC");
  Instruction hlt = minimal(spec_for(Opcode::HLT));
  hlt.flags = 0x01;
  CHECK(validate(hlt) == "flag bit 0x01 is not defined for HLT");
}

TEST_CASE("decode rejects more than one exclusive ACT flag", "[isa][decode]") {
  const Instruction act = minimal(spec_for(Opcode::ACT));
  // R = bit 0, Q = bit 1, T = bit 2 of the flags byte.
  for (std::uint8_t flags : {0b011, 0b101, 0b110, 0b111}) {
    Instruction in = act;
    in.flags = flags;
    INFO("flags " << static_cast<unsigned>(flags));
    CHECK_THAT(decode_error(expected_bytes(in)), Contains("cannot be combined"));
  }
}

TEST_CASE("decode rejects nonzero bits above an operand field's width", "[isa][decode]") {
  unsigned checked = 0;
  for (const InstrSpec& s : kInstrs)
    for (unsigned i = 0; i < s.num_operands; ++i)
      for (unsigned bit = field(s.operands[i]).width; bit < tpu::isa::slot_bits(i); ++bit) {
        INFO(s.mnemonic << " slot " << i << " bit " << bit);
        CHECK_THAT(decode_error(with_bit(expected_bytes(minimal(s)), 16 + 32 * i + bit)),
                   Contains("unused bits of operand slot"));
        ++checked;
      }
  CHECK(checked > 0);
}

TEST_CASE("decode rejects nonzero bits in unused operand slots", "[isa][decode]") {
  for (const InstrSpec& s : kInstrs)
    for (unsigned i = s.num_operands; i < tpu::isa::kNumSlots; ++i)
      for (unsigned bit = 0; bit < tpu::isa::slot_bits(i); ++bit) {
        INFO(s.mnemonic << " slot " << i << " bit " << bit);
        CHECK_THAT(decode_error(with_bit(expected_bytes(minimal(s)), 16 + 32 * i + bit)),
                   Contains("unused bits of operand slot"));
      }
}

TEST_CASE("operand slot 3 is the word's bits 112 to 127, 16 of them", "[isa][encoding]") {
  // docs/isa.md section 4: three 32-bit slots from bit 16, then slot 3 in bytes 14 and 15.
  CHECK(tpu::isa::kNumSlots == 4);
  CHECK(tpu::isa::slot_lsb(3) == 112);
  CHECK(tpu::isa::slot_bits(3) == 16);
  CHECK(tpu::isa::slot_bits(2) == 32);
}

TEST_CASE("decode rejects encodable values outside a field's legal range", "[isa][decode]") {
  SECTION("SETQ with S = 63") {
    EncodedInstr b{};
    b[0] = 0x06;
    b[6] = 63;  // slot 1 starts at bit 48
    CHECK_THAT(decode_error(b), Contains("S = 63 is out of range"));
  }
  SECTION("rows = 0") {
    for (const InstrSpec& s : kInstrs)
      for (unsigned i = 0; i < s.num_operands; ++i) {
        if (s.operands[i] != Field::Rows) continue;
        Instruction in = minimal(s);
        in.operands[i] = 0;
        INFO(s.mnemonic);
        CHECK_THAT(decode_error(expected_bytes(in)), Contains("rows = 0 is out of range"));
      }
  }
}

TEST_CASE("validate and encode reject operands just outside a field's range", "[isa][validate]") {
  for (const InstrSpec& s : kInstrs)
    for (unsigned i = 0; i < s.num_operands; ++i) {
      const FieldSpec& f = field(s.operands[i]);
      for (std::int64_t v : {f.min - 1, f.max + 1}) {
        Instruction in = minimal(s);
        in.operands[i] = v;
        INFO(s.mnemonic << " operand " << i << " = " << v);
        CHECK_THAT(validate(in), Contains(std::string(f.name)) && Contains("out of range"));
        CHECK_THROWS_AS(encode(in), std::invalid_argument);
      }
    }
}

TEST_CASE("validate and encode reject nonzero unused operands", "[isa][validate]") {
  for (const InstrSpec& s : kInstrs)
    for (unsigned i = s.num_operands; i < tpu::isa::kNumSlots; ++i) {
      Instruction in = minimal(s);
      in.operands[i] = 1;
      INFO(s.mnemonic << " operand " << i);
      CHECK_THAT(validate(in), Contains("has no operand"));
      CHECK_THROWS_AS(encode(in), std::invalid_argument);
    }
}

TEST_CASE("validate and encode reject undefined flags and unknown opcodes", "[isa][validate]") {
  SECTION("a flag bit the instruction does not define") {
    Instruction in = minimal(spec_for(Opcode::RW));
    in.flags = 0x01;
    CHECK_THAT(validate(in), Contains("not defined"));
    CHECK_THROWS_AS(encode(in), std::invalid_argument);
    in = minimal(spec_for(Opcode::MMC));
    in.flags = 0x08;
    CHECK_THAT(validate(in), Contains("not defined"));
    in = minimal(spec_for(Opcode::CTAP));
    in.flags = 0x01;
    CHECK_THAT(validate(in), Contains("not defined"));
    CHECK_THROWS_AS(encode(in), std::invalid_argument);
  }
  SECTION("two exclusive flags") {
    Instruction in = minimal(spec_for(Opcode::ACT));
    in.flags = 0b101;
    CHECK_THAT(validate(in), Contains("cannot be combined"));
    CHECK_THROWS_AS(encode(in), std::invalid_argument);
  }
  SECTION("an opcode outside the table") {
    // 0x0D..0x17 are VEC, VSRC, HLT, VSCL, NGEO, NCON, SMAX, LNRM, GELU, HWT, RWU; 0x18 is the
    // first unused one.
    Instruction in;
    in.opcode = static_cast<Opcode>(0x18);
    CHECK_THAT(validate(in), Contains("unknown opcode 0x18"));
    CHECK_THROWS_AS(encode(in), std::invalid_argument);
  }
}

TEST_CASE("decode's messages are the documented ones", "[isa][decode]") {
  // docs/isa.md section 4 lists one example message per rejection (with
  // opcode 0x18 and MMC flag 0x08).
  EncodedInstr unknown{};
  unknown[0] = 0x18;
  CHECK(decode_error(unknown) == "unknown opcode 0x18");

  Instruction mmc = minimal(spec_for(Opcode::MMC));
  mmc.flags = 0x08;
  CHECK(decode_error(expected_bytes(mmc)) == "flag bit 0x08 is not defined for MMC");

  Instruction act = minimal(spec_for(Opcode::ACT));
  act.flags = 0b110;  // Q and T
  CHECK(decode_error(expected_bytes(act)) == "flags QT of ACT cannot be combined");

  const Instruction rhm = minimal(spec_for(Opcode::RHM));
  CHECK(decode_error(with_bit(expected_bytes(rhm), 48 + 24)) ==
        "RHM: unused bits of operand slot 1 are not zero");

  Instruction no_rows = rhm;
  no_rows.operands[2] = 0;
  CHECK(decode_error(expected_bytes(no_rows)) == "RHM: rows = 0 is out of range [1, 16777215]");

  CHECK(decode_error(with_bit(expected_bytes(minimal(spec_for(Opcode::HLT))), 127)) ==
        "HLT: unused bits of operand slot 3 are not zero");
}

TEST_CASE("decode rejects convolution registers outside their ranges", "[isa][decode]") {
  // In the 16- and 8-bit fields every encodable value but 0 is legal for the
  // map sizes and strides; 0 is out of range.
  EncodedInstr cmap{};
  cmap[0] = 0x08;
  cmap[6] = 1;   // in_w = 1
  cmap[10] = 1;  // out_w = 1; in_h = 0
  CHECK(decode_error(cmap) == "CMAP: in_h = 0 is out of range [1, 65535]");
  cmap[2] = 1;
  cmap[10] = 0;  // out_w = 0
  CHECK(decode_error(cmap) == "CMAP: out_w = 0 is out of range [1, 65535]");
  EncodedInstr cstr{};
  cstr[0] = 0x09;
  cstr[2] = 1;  // stride_y = 1, stride_x = 0
  CHECK(decode_error(cstr) == "CSTR: stride_x = 0 is out of range [1, 255]");
  // A sign-extended CTAP -1 (ff ff ff ff) has bits above the 16-bit field.
  EncodedInstr ctap{};
  ctap[0] = 0x0A;
  ctap[2] = ctap[3] = ctap[4] = ctap[5] = 0xFF;
  CHECK(decode_error(ctap) == "CTAP: unused bits of operand slot 0 are not zero");
  ctap[4] = ctap[5] = 0;
  Instruction minus_one;
  minus_one.opcode = Opcode::CTAP;
  minus_one.operands = {-1, 0, 0};
  CHECK(decode(ctap) == minus_one);
  ctap[10] = 1;  // CTAP has no third operand
  CHECK(decode_error(ctap) == "CTAP: unused bits of operand slot 2 are not zero");
}

TEST_CASE("decode rejects pooling operands and flags outside their ranges", "[isa][decode][pool]") {
  // CWIN: 8-bit windows of 1..255 each way, slot 2 unused.
  EncodedInstr cwin{};
  cwin[0] = 0x0C;
  cwin[6] = 1;  // win_w = 1; win_h = 0
  CHECK(decode_error(cwin) == "CWIN: win_h = 0 is out of range [1, 255]");
  cwin[2] = 1;
  cwin[6] = 0;  // win_w = 0
  CHECK(decode_error(cwin) == "CWIN: win_w = 0 is out of range [1, 255]");
  cwin[6] = 1;
  Instruction one_by_one;
  one_by_one.opcode = Opcode::CWIN;
  one_by_one.operands = {1, 1, 0};
  CHECK(decode(cwin) == one_by_one);
  cwin[3] = 1;  // win_h = 257 does not fit its 8 bits
  CHECK(decode_error(cwin) == "CWIN: unused bits of operand slot 0 are not zero");
  cwin[3] = 0;
  cwin[10] = 1;  // CWIN has no third operand
  CHECK(decode_error(cwin) == "CWIN: unused bits of operand slot 2 are not zero");
  cwin[10] = 0;
  cwin[1] = 0x01;  // CWIN has no flags
  CHECK(decode_error(cwin) == "flag bit 0x01 is not defined for CWIN");

  // POOL: flag A is bit 0 only; rows 1..2^24-1; 24-bit rows.
  EncodedInstr pool{};
  pool[0] = 0x0B;
  pool[1] = 0x01;
  pool[10] = 1;  // POOL.A 0, 0, 1
  Instruction avg;
  avg.opcode = Opcode::POOL;
  avg.flags = 0x01;
  avg.operands = {0, 0, 1};
  CHECK(decode(pool) == avg);
  pool[1] = 0x02;
  CHECK(decode_error(pool) == "flag bit 0x02 is not defined for POOL");
  pool[1] = 0x81;
  CHECK(decode_error(pool) == "flag bit 0x80 is not defined for POOL");
  pool[1] = 0x01;
  pool[5] = 1;  // map_row past 24 bits
  CHECK(decode_error(pool) == "POOL: unused bits of operand slot 0 are not zero");
  pool[5] = 0;
  pool[10] = 0;  // rows = 0
  CHECK(decode_error(pool) == "POOL: rows = 0 is out of range [1, 16777215]");
}
