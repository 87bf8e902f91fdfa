// The assembler's accepted syntax: comments, case, flags, numbers, labels,
// .equ, .array, expressions, line endings and OpenTPU's example programs.
// Expected instructions are written out by hand; flag bits are those of the
// documented table (WHM A = 0; MMC S = 0, O = 1, C = 2; ACT R = 0, Q = 1,
// T = 2; POOL A = 0).
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "asm/assembler.h"
#include "config/arch_config.h"
#include "isa/program.h"

#include "support/print_instruction.h"

namespace {

using tpu::ArchConfig;
using tpu::assembler::assemble;
using tpu::assembler::Options;
using tpu::isa::Instruction;
using tpu::isa::Opcode;
using tpu::isa::Program;
using Code = std::vector<Instruction>;
using Bytes = std::vector<std::uint8_t>;

Instruction make(Opcode op, std::uint8_t flags = 0, std::int64_t a = 0, std::int64_t b = 0,
                 std::int64_t c = 0) {
  Instruction in;
  in.opcode = op;
  in.flags = flags;
  in.operands = {a, b, c};
  return in;
}

// Assembles source that must be free of errors.
Program assemble_ok(std::string_view source, const Options& options = {}) {
  const tpu::assembler::Result r = assemble(source, options);
  INFO(tpu::assembler::format_diagnostics("test.s", source, r.diagnostics));
  REQUIRE(r.diagnostics.empty());
  REQUIRE(r.program.has_value());
  return *r.program;
}

Code code_of(std::string_view source) { return assemble_ok(source).code; }

// The value of an expression, read back through SETQ's signed 32-bit M field.
std::int64_t value_of(const std::string& expr) {
  const Code code = code_of("SETQ " + expr + ", 0, 0\n");
  REQUIRE(code.size() == 1);
  return code[0].operands[0];
}

ArchConfig config_with_array(std::uint64_t n) {
  ArchConfig cfg = tpu::preset_config("small8");
  cfg.array_n = n;
  return cfg;
}

}  // namespace

TEST_CASE("comments run from # or semicolon to the end of the line", "[asm]") {
  const Code code = code_of(
      "# a whole-line comment with @ $ < characters the lexer would reject\n"
      "; another whole-line comment\n"
      "RW 1 # trailing comment\n"
      "RW 2 ; trailing ; comment # with both\n"
      "RW 3#no space before the comment\n"
      "   # indented comment\n");
  CHECK(code == Code{make(Opcode::RW, 0, 1), make(Opcode::RW, 0, 2), make(Opcode::RW, 0, 3)});
}

TEST_CASE("mnemonics and flag letters are case-insensitive", "[asm]") {
  const Code code = code_of(
      "mmc.so 1, 2, 3\n"
      "MMC.os 1, 2, 3\n"
      "Mmc.sO 1, 2, 3\n"
      "act.t 4, 5, 6\n"
      "whm.a 7, 8, 9\n"
      "rw 10\n"
      "setq -1, 2, 3\n"
      "sync\n"
      "hlt\n");
  const Instruction mmc = make(Opcode::MMC, 0b11, 1, 2, 3);
  CHECK(code == Code{mmc, mmc, mmc, make(Opcode::ACT, 0b100, 4, 5, 6),
                     make(Opcode::WHM, 0b1, 7, 8, 9), make(Opcode::RW, 0, 10),
                     make(Opcode::SETQ, 0, -1, 2, 3), make(Opcode::SYNC), make(Opcode::HLT)});
}

TEST_CASE("flag letters in any order give the same bytes", "[asm]") {
  const Bytes so = tpu::isa::serialize(assemble_ok("MMC.SO 7, 8, 9\n"));
  CHECK(tpu::isa::serialize(assemble_ok("MMC.OS 7, 8, 9\n")) == so);
  CHECK(tpu::isa::serialize(assemble_ok("mmc.os 7, 8, 9\n")) == so);
  CHECK(assemble_ok("MMC.OS 7, 8, 9\n").code == Code{make(Opcode::MMC, 0b11, 7, 8, 9)});
}

TEST_CASE("flag letters may be split over several dot groups", "[asm]") {
  CHECK(code_of("MMC.S.O 7, 8, 9\nMMC.o.S 7, 8, 9\n") ==
        Code{make(Opcode::MMC, 0b11, 7, 8, 9), make(Opcode::MMC, 0b11, 7, 8, 9)});
}

TEST_CASE("each flag letter sets its documented bit", "[asm]") {
  const Code code = code_of(
      "WHM 1, 2, 3\nWHM.A 1, 2, 3\n"
      "MMC 1, 2, 3\nMMC.S 1, 2, 3\nMMC.O 1, 2, 3\nMMC.C 1, 2, 3\n"
      "ACT 1, 2, 3\nACT.R 1, 2, 3\nACT.Q 1, 2, 3\nACT.T 1, 2, 3\n"
      "POOL 1, 2, 3\nPOOL.A 1, 2, 3\n");
  std::vector<unsigned> flags;
  for (const Instruction& in : code) flags.push_back(in.flags);
  CHECK(flags == std::vector<unsigned>{0, 1, 0, 1, 2, 4, 0, 1, 2, 4, 0, 1});
}

TEST_CASE("the convolution instructions assemble with any flag order and case", "[asm][conv]") {
  const Code code = code_of(
      "CMAP 3, 4, 5\n"
      "cmap 9, 7, 0x10\n"
      "CSTR 1, 2, -3\n"
      "cstr 3, 1, 0\n"
      "CTAP -1, -1\n"
      "ctap 2, -(1 + 1)\n"
      "MMC.C 1, 2, 3\n"
      "MMC.SOC 0, 0, 16\n"
      "mmc.cos 0, 0, 16\n"
      "MMC.O.C.S 0, 0, 16\n"
      "MMC.SC 4, 5, 6\n"
      "Mmc.oC 7, 8, 9\n");
  const Instruction soc = make(Opcode::MMC, 0b111, 0, 0, 16);
  CHECK(code == Code{make(Opcode::CMAP, 0, 3, 4, 5), make(Opcode::CMAP, 0, 9, 7, 16),
                     make(Opcode::CSTR, 0, 1, 2, -3), make(Opcode::CSTR, 0, 3, 1, 0),
                     make(Opcode::CTAP, 0, -1, -1), make(Opcode::CTAP, 0, 2, -2),
                     make(Opcode::MMC, 0b100, 1, 2, 3), soc, soc, soc,
                     make(Opcode::MMC, 0b101, 4, 5, 6), make(Opcode::MMC, 0b110, 7, 8, 9)});
}

TEST_CASE("POOL, POOL.A and CWIN assemble with any flag case", "[asm][pool]") {
  const Code code = code_of(
      "POOL 1, 2, 3\n"
      "pool 0x10, 0b11, 7\n"
      "POOL.A 4, 5, 6\n"
      "pool.a 4, 5, 6\n"
      "Pool.A 4, 5, 6\n"
      "POOL.a 4, 5, 6\n"
      "CWIN 2, 3\n"
      "cwin 3, 2\n"
      "CwIn 1, 0xFF\n"
      "CWIN 2 * 2, (1 + 1)\n");
  const Instruction avg = make(Opcode::POOL, 0b1, 4, 5, 6);
  CHECK(code == Code{make(Opcode::POOL, 0, 1, 2, 3), make(Opcode::POOL, 0, 16, 3, 7), avg, avg,
                     avg, avg, make(Opcode::CWIN, 0, 2, 3), make(Opcode::CWIN, 0, 3, 2),
                     make(Opcode::CWIN, 0, 1, 255), make(Opcode::CWIN, 0, 4, 2)});
}

TEST_CASE("the documented pooling example assembles as documented", "[asm][pool]") {
  // docs/isa.md, CWIN: a 2 x 2 max pool with stride 2 of a 6 x 5 map whose
  // zero point is -5, into 3 x 2 output pixels.
  const Code code = code_of(
      "CMAP 6, 5, 2\n"
      "CSTR 2, 2, -5\n"
      "CTAP 0, 0\n"
      "CWIN 2, 2\n"
      "POOL 0, 40, 6\n");
  CHECK(code == Code{make(Opcode::CMAP, 0, 6, 5, 2), make(Opcode::CSTR, 0, 2, 2, -5),
                     make(Opcode::CTAP, 0, 0, 0), make(Opcode::CWIN, 0, 2, 2),
                     make(Opcode::POOL, 0, 0, 40, 6)});
  // And the global average pool: CMAP h, w, 1; CTAP 0, 0; CWIN h, w; POOL.A m, u, 1.
  CHECK(code_of(".equ H, 7\n.equ W, 9\n"
                "CMAP H, W, 1\nCTAP 0, 0\nCWIN H, W\nPOOL.A 100, 200, 1\n") ==
        Code{make(Opcode::CMAP, 0, 7, 9, 1), make(Opcode::CTAP, 0, 0, 0),
             make(Opcode::CWIN, 0, 7, 9), make(Opcode::POOL, 1, 100, 200, 1)});
}

TEST_CASE("numbers can be decimal, hexadecimal or binary", "[asm]") {
  const Code code = code_of(
      "RHM 42, 0x2A, 0b101010\n"
      "RHM 0XfF, 0B11, 007\n"
      "RHM 0xdeadBEEF, 0x0, 0b1\n");
  CHECK(code == Code{make(Opcode::RHM, 0, 42, 42, 42), make(Opcode::RHM, 0, 255, 3, 7),
                     make(Opcode::RHM, 0, 0xDEADBEEF, 0, 1)});
}

TEST_CASE("the largest number literal is INT64_MAX", "[asm]") {
  CHECK(value_of("9223372036854775807 - 9223372036854775806") == 1);
  CHECK(value_of("0x7FFFFFFFFFFFFFFF - 0x7FFFFFFFFFFFFFF0") == 15);
}

TEST_CASE("each operand accepts its field's whole range", "[asm]") {
  const Code code = code_of(
      "RHM 4294967295, 16777215, 16777215\n"
      "RHM 0, 0, 1\n"
      "SETQ -2147483648, 0, -128\n"
      "SETQ 2147483647, 62, 127\n"
      "CMAP 65535, 65535, 65535\n"
      "CMAP 1, 1, 1\n"
      "CSTR 255, 255, 127\n"
      "CSTR 1, 1, -128\n"
      "CTAP -32768, 32767\n"
      "CTAP 32767, -32768\n"
      "CWIN 1, 1\n"
      "CWIN 255, 255\n"
      "POOL 16777215, 16777215, 16777215\n"
      "POOL.A 0, 0, 1\n");
  CHECK(code == Code{make(Opcode::RHM, 0, 4294967295, 16777215, 16777215),
                     make(Opcode::RHM, 0, 0, 0, 1),
                     make(Opcode::SETQ, 0, -2147483648, 0, -128),
                     make(Opcode::SETQ, 0, 2147483647, 62, 127),
                     make(Opcode::CMAP, 0, 65535, 65535, 65535),
                     make(Opcode::CMAP, 0, 1, 1, 1),
                     make(Opcode::CSTR, 0, 255, 255, 127),
                     make(Opcode::CSTR, 0, 1, 1, -128),
                     make(Opcode::CTAP, 0, -32768, 32767),
                     make(Opcode::CTAP, 0, 32767, -32768),
                     make(Opcode::CWIN, 0, 1, 1),
                     make(Opcode::CWIN, 0, 255, 255),
                     make(Opcode::POOL, 0, 16777215, 16777215, 16777215),
                     make(Opcode::POOL, 1, 0, 0, 1)});
}

TEST_CASE("a label's value is the index of the next instruction", "[asm]") {
  const Code code = code_of(
      "NOP\n"
      "first: NOP\n"
      "alone:\n"
      "\n"
      "  NOP\n"
      "RW first\n"
      "RW alone\n"
      "RW self\n"
      "self_next: self: RW self_next\n");
  CHECK(code == Code{make(Opcode::NOP), make(Opcode::NOP), make(Opcode::NOP),
                     make(Opcode::RW, 0, 1), make(Opcode::RW, 0, 2), make(Opcode::RW, 0, 6),
                     make(Opcode::RW, 0, 6)});
}

TEST_CASE("labels can be used before they are defined", "[asm]") {
  const Code code = code_of(
      "RW later\n"
      "RW end\n"
      "later: NOP\n"
      "end:\n");
  CHECK(code == Code{make(Opcode::RW, 0, 2), make(Opcode::RW, 0, 3), make(Opcode::NOP)});
}

TEST_CASE("several labels on one line all name the same instruction", "[asm]") {
  const Code code = code_of(
      "NOP\n"
      "a: b :c: NOP\n"
      "RHM a, b, c\n");
  CHECK(code.at(2) == make(Opcode::RHM, 0, 1, 1, 1));
}

TEST_CASE(".equ defines a constant usable before its definition", "[asm]") {
  const Code code = code_of(
      "RW SIZE * 2\n"
      ".equ SIZE, BASE + 1\n"
      ".equ BASE, 0x10\n"
      ".equ AFTER, here + 1\n"
      "here: RW AFTER\n");
  CHECK(code == Code{make(Opcode::RW, 0, 34), make(Opcode::RW, 0, 2)});
}

TEST_CASE("directive names are case-insensitive", "[asm]") {
  const Program p = assemble_ok(".EQU X, 5\n.Array 16\nRW X\n");
  CHECK(p.array_n == 16);
  CHECK(p.code == Code{make(Opcode::RW, 0, 5)});
}

TEST_CASE("a symbol may be spelled like a mnemonic", "[asm]") {
  CHECK(code_of("NOP\nHLT: HLT\n.equ RW, 7\nRW RW\nRW HLT\n") ==
        Code{make(Opcode::NOP), make(Opcode::HLT), make(Opcode::RW, 0, 7),
             make(Opcode::RW, 0, 1)});
}

TEST_CASE("a label before a directive names the next instruction", "[asm]") {
  CHECK(code_of("NOP\nhere: .equ X, 1\nRW here\n") ==
        Code{make(Opcode::NOP), make(Opcode::RW, 0, 1)});
}

TEST_CASE("symbols are case-sensitive", "[asm]") {
  const Code code = code_of(
      ".equ n, 1\n"
      ".equ N, 2\n"
      "RW n\n"
      "RW N\n");
  CHECK(code == Code{make(Opcode::RW, 0, 1), make(Opcode::RW, 0, 2)});
}

TEST_CASE("expressions use C operator precedence", "[asm]") {
  struct Case {
    const char* expr;
    std::int64_t value;
  };
  const std::vector<Case> cases = {
      {"1+2*3", 7},     {"(1+2)*3", 9},  {"1<<2+1", 8},  {"2*3<<1", 12},
      {"16>>1+1", 4},   {"-(3)", -3},    {"2*-3", -6},   {"-2*3", -6},
      {"+5", 5},        {"--5", 5},      {"((((7))))", 7}, {" 1 + 2 * ( 3 - 1 ) ", 5},
      {"1+6/2", 4},     {"-8>>1", -4},   {"8-3+1", 6},   {"1<<2<<3", 32},
  };
  for (const Case& c : cases) {
    INFO(c.expr);
    CHECK(value_of(c.expr) == c.value);
  }
}

TEST_CASE("the documented expression examples have the documented values", "[asm]") {
  // docs/isa.md section 6 and the SETQ section.
  CHECK(value_of("1 << 2 + 1") == 8);
  CHECK(value_of("-7 / 2 + 10") == 7);
  CHECK(value_of("-0x80000000") == -2147483648);
  CHECK(value_of("(-9223372036854775807 - 1) >> 32") == -2147483648);
}

TEST_CASE("subtraction, division and shifts associate to the left", "[asm]") {
  CHECK(value_of("10-4-3") == 3);
  CHECK(value_of("100/10/5") == 2);
  CHECK(value_of("64>>2>>1") == 8);
}

TEST_CASE("division truncates towards zero", "[asm]") {
  CHECK(value_of("10/3") == 3);
  CHECK(value_of("-7/2") == -3);
  CHECK(value_of("7/-2") == -3);
  CHECK(value_of("-7/-2") == 3);
}

TEST_CASE("CRLF line endings assemble like LF", "[asm]") {
  const std::string lf =
      "# comment\n.equ X, 3\nstart: RHM X, 1, 2\n\nMMC.SO 0, 0, start + 1\nHLT\n";
  std::string crlf;
  for (char c : lf) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const Code code = code_of(crlf);
  CHECK(code == code_of(lf));
  CHECK(code == Code{make(Opcode::RHM, 0, 3, 1, 2), make(Opcode::MMC, 0b11, 0, 0, 1),
                     make(Opcode::HLT)});
}

TEST_CASE("blank and whitespace-only lines are ignored", "[asm]") {
  const Code code = code_of("\n\n   \n\t\t\nRW 1\n \t \n\nRW 2\n\n");
  CHECK(code == Code{make(Opcode::RW, 0, 1), make(Opcode::RW, 0, 2)});
}

TEST_CASE("tabs separate tokens like spaces", "[asm]") {
  CHECK(code_of("\tRHM\t1,\t2 ,3\t\n") == Code{make(Opcode::RHM, 0, 1, 2, 3)});
}

TEST_CASE("the last line needs no trailing newline", "[asm]") {
  CHECK(code_of("RW 1\nHLT") == Code{make(Opcode::RW, 0, 1), make(Opcode::HLT)});
  CHECK(code_of("RW 1\r\nHLT") == Code{make(Opcode::RW, 0, 1), make(Opcode::HLT)});
}

TEST_CASE("an empty source gives an empty program", "[asm]") {
  CHECK(code_of("").empty());
  CHECK(code_of("# only a comment").empty());
}

TEST_CASE("line_of_pc gives each instruction's source line", "[asm]") {
  const auto r = assemble("# header\n\nRW 1\nlabel:\n  RW 2 ; x\n.equ A, 1\nHLT", Options{});
  REQUIRE(r.program.has_value());
  CHECK(r.line_of_pc == std::vector<int>{3, 5, 7});
}

TEST_CASE("the documentation's example program assembles as documented", "[asm]") {
  // docs/isa.md section 6, with the disassembly it gives there.
  const Program p = assemble_ok(
      "# Requantize one 16-row batch (N = 8).\n"
      ".array 8\n"
      ".equ BATCH, 16\n"
      ".equ X_UB,  0              ; UB rows 0..15: inputs\n"
      ".equ Y_UB,  X_UB + BATCH   ; UB rows 16..31: outputs\n"
      "start:  RHM   0x100, X_UB, BATCH\n"
      "        rw    2\n"
      "        mmc.so X_UB, 0, BATCH\n"
      "        SETQ  3, 2, -4\n"
      "        ACT.R 0, Y_UB, BATCH\n"
      "        WHM   Y_UB, 0x200, BATCH\n"
      "end:    HLT                ; end = 6\n"
      "        RW end\n");
  CHECK(p.array_n == 8);
  CHECK(p.code == Code{make(Opcode::RHM, 0, 256, 0, 16), make(Opcode::RW, 0, 2),
                       make(Opcode::MMC, 0b11, 0, 0, 16), make(Opcode::SETQ, 0, 3, 2, -4),
                       make(Opcode::ACT, 0b1, 0, 16, 16), make(Opcode::WHM, 0, 16, 512, 16),
                       make(Opcode::HLT), make(Opcode::RW, 0, 6)});
}

// OpenTPU's example programs (github.com/UCSBarchlab/OpenTPU, boston.a and
// simple_nn.a), verbatim.
TEST_CASE("OpenTPU's boston.a assembles unchanged", "[asm][opentpu]") {
  const char* boston =
      "# Host mem: N x 13 input matrix\n"
      "# Weight mem:\n"
      "# L1: 13x8\n"
      "# L2: 8x8\n"
      "# L3: 8x1\n"
      "RHM 0, 0, 10   # read from host mem addr 0, to UB addr 0, for length N = 10\n"
      "RW  0         # read weights from dram addr 0 to FIFO\n"
      "MMC.SO 0, 0, 10   # Do MM on UB addr 0, to accumulator addr 0, for length 10\n"
      "ACT.R 0, 0, 10 # Do ACT ReLU on accumulator addr 0, to UB addr 0, for length 10\n"
      "MMC.SO 0, 0, 10\n"
      "ACT.R 0, 0, 10\n"
      "MMC.SO 0, 0, 10\n"
      "ACT.R 0, 0, 10\n"
      "WHM 0, 0, 10   # write result from UB addr 0, to host mem addr 0, for length 10\n"
      "HLT\n";
  const Instruction mmc = make(Opcode::MMC, 0b11, 0, 0, 10);
  const Instruction act = make(Opcode::ACT, 0b1, 0, 0, 10);
  CHECK(code_of(boston) == Code{make(Opcode::RHM, 0, 0, 0, 10), make(Opcode::RW, 0, 0), mmc, act,
                                mmc, act, mmc, act, make(Opcode::WHM, 0, 0, 0, 10),
                                make(Opcode::HLT)});
}

TEST_CASE("OpenTPU's simple_nn.a assembles unchanged", "[asm][opentpu]") {
  const char* simple_nn =
      "# Host mem: N x 8 input matrix\n"
      "# Weight mem: 8 x 8 weight matrix\n"
      "\n"
      "RHM 0, 0, 4   # read from host mem addr 0, to UB addr 0, for length N = 4\n"
      "RW  0         # read weights from dram addr 0 to FIFO\n"
      "MMC 0, 0, 4   # Do MM on UB addr 0, to accumulator addr 0, for length 4\n"
      "ACT.R 0, 4, 4 # Do ACT ReLU on accumulator addr 0, to UB addr 4, for length 4\n"
      "SYNC          \n"
      "WHM 4, 4, 4   # write result from UB addr 4, to host mem addr 4, for length 4\n"
      "HLT\n";
  CHECK(code_of(simple_nn) == Code{make(Opcode::RHM, 0, 0, 0, 4), make(Opcode::RW, 0, 0),
                                   make(Opcode::MMC, 0, 0, 0, 4), make(Opcode::ACT, 0b1, 0, 4, 4),
                                   make(Opcode::SYNC), make(Opcode::WHM, 0, 4, 4, 4),
                                   make(Opcode::HLT)});
}

// Array size: Options.array_n > .array > the config's > Options.default_array_n.
// A conflicting .array and Options.array_n is tested in test_diagnostics.cpp.
TEST_CASE("without any other source the array size is the default", "[asm][array]") {
  CHECK(assemble_ok("HLT\n").array_n == 8);
  Options o;
  o.default_array_n = 16;
  CHECK(assemble_ok("HLT\n", o).array_n == 16);
}

TEST_CASE("a config's array size wins over the default", "[asm][array]") {
  const ArchConfig cfg = config_with_array(32);
  Options o;
  o.config = &cfg;
  o.default_array_n = 16;
  CHECK(assemble_ok("HLT\n", o).array_n == 32);
}

TEST_CASE(".array wins over the config and the default", "[asm][array]") {
  const ArchConfig cfg = config_with_array(32);
  Options o;
  o.config = &cfg;
  CHECK(assemble_ok(".array 64\nHLT\n", o).array_n == 64);
  CHECK(assemble_ok("HLT\n.array 4\n").array_n == 4);
  CHECK(assemble_ok(".array 256\n").array_n == 256);
}

TEST_CASE(".array takes an expression with forward references", "[asm][array]") {
  CHECK(assemble_ok(".array SIZE * 2\n.equ SIZE, 8\n").array_n == 16);
}

TEST_CASE("Options.array_n wins over everything else", "[asm][array]") {
  const ArchConfig cfg = config_with_array(32);
  Options o;
  o.array_n = 128;
  o.config = &cfg;
  o.default_array_n = 16;
  CHECK(assemble_ok("HLT\n", o).array_n == 128);
  CHECK(assemble_ok(".array 128\nHLT\n", o).array_n == 128);
}
