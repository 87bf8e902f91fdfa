// The assembler's and lexer's error messages: every message at its exact
// line:col, several errors per file, no program on error, memory-range checks
// against a configuration, and the GCC-style formatted form.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "asm/assembler.h"
#include "asm/diagnostics.h"
#include "common/file_io.h"
#include "config/arch_config.h"

namespace {

using Catch::Matchers::Contains;
using tpu::ArchConfig;
using tpu::assembler::assemble;
using tpu::assembler::Diagnostic;
using tpu::assembler::format_diagnostic;
using tpu::assembler::format_diagnostics;
using tpu::assembler::Options;
using tpu::assembler::Result;

struct Expected {
  std::string source;
  int line;
  int col;
  std::string message;  // a substring of the diagnostic
};

// The source must produce exactly this one error and no program.
void check_error(const Expected& e, const Options& options = {}) {
  const Result r = assemble(e.source, options);
  INFO("source: " << e.source);
  INFO(format_diagnostics("test.s", e.source, r.diagnostics));
  CHECK(r.diagnostics.size() == 1);
  if (r.diagnostics.empty()) return;
  CHECK(r.diagnostics[0].loc.line == e.line);
  CHECK(r.diagnostics[0].loc.col == e.col);
  CHECK_THAT(r.diagnostics[0].message, Contains(e.message));
  CHECK_FALSE(r.program.has_value());
}

void check_errors(const std::vector<Expected>& cases, const Options& options = {}) {
  for (const Expected& e : cases) check_error(e, options);
}

// "line:col" of each diagnostic, in the order reported.
std::vector<std::string> positions(const Result& r) {
  std::vector<std::string> out;
  for (const Diagnostic& d : r.diagnostics)
    out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col));
  return out;
}

// Small memories so that range errors are easy to provoke.
ArchConfig small_memories() {
  ArchConfig cfg;
  cfg.preset = "test";
  cfg.array_n = 8;
  cfg.host_rows = 1000;
  cfg.weight_tiles = 10;
  cfg.ub_rows = 100;
  cfg.acc_rows = 50;
  cfg.fifo_depth = 4;
  return cfg;
}

}  // namespace

// ---- Lexer -----------------------------------------------------------------

TEST_CASE("malformed numbers are reported at the number", "[asm][diag][lexer]") {
  check_errors({
      {"RW 0x", 1, 4, "invalid number '0x': no digits"},
      {"RW 0b", 1, 4, "invalid number '0b': no digits"},
      {"RW 0x1g", 1, 4, "invalid digit 'g' in hexadecimal number '0x1g'"},
      {"RW 0b102", 1, 4, "invalid digit '2' in binary number '0b102'"},
      {"RW 12a", 1, 4, "invalid digit 'a' in decimal number '12a'"},
      {"SETQ 9223372036854775808, 0, 0", 1, 6,
       "number '9223372036854775808' does not fit in 64 bits"},
      {"SETQ 0x8000000000000000, 0, 0", 1, 6, "number '0x8000000000000000' does not fit in 64 bits"},
      {"RW 99999999999999999999", 1, 4, "number '99999999999999999999' does not fit in 64 bits"},
  });
}

TEST_CASE("stray characters are reported where they are", "[asm][diag][lexer]") {
  check_errors({
      {"SETQ 1 < 2, 0, 0", 1, 8, "unexpected character '<' (did you mean '<<'?)"},
      {"RW 8 > 1", 1, 6, "unexpected character '>' (did you mean '>>'?)"},
      {"RW 1 <", 1, 6, "unexpected character '<' (did you mean '<<'?)"},
      {"RW @", 1, 4, "unexpected character '@'"},
      {"RW 1 % 2", 1, 6, "unexpected character '%'"},
      {"RW \x01", 1, 4, "unexpected byte 0x01"},
      {"RW \xc3\xa9", 1, 4, "unexpected byte 0xc3"},
  });
}

// ---- Parser ----------------------------------------------------------------

TEST_CASE("malformed expressions are reported at the offending token", "[asm][diag]") {
  check_errors({
      {"RW (1", 1, 6, "expected ')', found end of line"},
      {"RW (1 2", 1, 7, "expected ')', found '2'"},
      {"RHM 1, , 3", 1, 8, "expected an expression, found ','"},
      {"RW 1,", 1, 6, "expected an expression, found end of line"},
      {"RW )", 1, 4, "expected an expression, found ')'"},
      {"RW 1 + # comment", 1, 8, "expected an expression, found end of line"},
  });
}

TEST_CASE("malformed directives are reported at the offending token", "[asm][diag]") {
  check_errors({
      {".5", 1, 2, "expected a directive name after '.', found '5'"},
      {".", 1, 2, "expected a directive name after '.', found end of line"},
      {". equ A, 1", 1, 1, "expected a directive name after '.'"},
      {".equ 5, 1", 1, 6, "expected a symbol name, found '5'"},
      {".equ A 1", 1, 8, "expected ',', found '1'"},
      {".equ A", 1, 7, "expected ',', found end of line"},
      {".foo 1", 1, 1, "unknown directive '.foo' (known: .equ, .array)"},
      {".equ A, 1 2", 1, 11, "unexpected '2' after the statement"},
      {".array 8 )", 1, 10, "unexpected ')' after the statement"},
      {".array 8\n.array 8", 2, 1, ".array is already given at line 1"},
  });
}

TEST_CASE("a line that is not an instruction is reported at its start", "[asm][diag]") {
  check_errors({
      {"5", 1, 1, "expected a mnemonic or directive, found '5'"},
      {"lbl: ,", 1, 6, "expected a mnemonic or directive, found ','"},
      {"  FOO 1", 1, 3, "unknown instruction 'FOO'"},
      {"RW 1 2", 1, 6, "expected ',' or end of line, found '2'"},
      {"RHM 1, 2 3", 1, 10, "expected ',' or end of line, found '3'"},
  });
}

TEST_CASE("bad flags are reported at the offending letter", "[asm][diag]") {
  check_errors({
      {"MMC. S 0, 0, 1", 1, 4, "expected flag letters after 'MMC.'"},
      {"mmc.5 0, 0, 1", 1, 4, "expected flag letters after 'MMC.'"},
      {"NOP.X", 1, 5, "NOP takes no flags"},
      {"RHM.A 0, 0, 1", 1, 5, "RHM takes no flags"},
      {"MMC.SX 0, 0, 1", 1, 6, "unknown flag 'X' for MMC (valid: SOC)"},
      {"MMC.SOCX 0, 0, 1", 1, 8, "unknown flag 'X' for MMC (valid: SOC)"},
      {"MMC.CSC 0, 0, 1", 1, 7, "flag 'C' is given twice"},
      {"CMAP.C 1, 1, 1", 1, 6, "CMAP takes no flags"},
      {"CSTR.S 1, 1, 0", 1, 6, "CSTR takes no flags"},
      {"ctap.o 0, 0", 1, 6, "CTAP takes no flags"},
      {"POOL.X 0, 0, 1", 1, 6, "unknown flag 'X' for POOL (valid: A)"},
      {"pool.ar 0, 0, 1", 1, 7, "unknown flag 'r' for POOL (valid: A)"},
      {"POOL.S 0, 0, 1", 1, 6, "unknown flag 'S' for POOL (valid: A)"},
      {"POOL.AA 0, 0, 1", 1, 7, "flag 'A' is given twice"},
      {"POOL.A.A 0, 0, 1", 1, 8, "flag 'A' is given twice"},
      {"POOL. 0, 0, 1", 1, 5, "expected flag letters after 'POOL.'"},
      {"CWIN.A 1, 1", 1, 6, "CWIN takes no flags"},
      {"cwin.x 1, 1", 1, 6, "CWIN takes no flags"},
      {"ACT.z 0, 0, 1", 1, 5, "unknown flag 'z' for ACT (valid: RQT)"},
      {"MMC.SOS 0, 0, 1", 1, 7, "flag 'S' is given twice"},
      {"ACT.RQ 0, 0, 1", 1, 6, "flag 'Q' cannot be combined with the other ACT flags given"},
      {"ACT.TR 0, 0, 1", 1, 6, "flag 'R' cannot be combined with the other ACT flags given"},
      {"VEC.QT 0, 0, 1", 1, 6, "flag 'T' cannot be combined with the other VEC flags given"},
      {"VSRC.C 0, 0, 0", 1, 6, "unknown flag 'C' for VSRC (valid: B)"},
      {"VSCL.B 1, 1, 0", 1, 6, "VSCL takes no flags"},
  });
}

TEST_CASE("a wrong operand count is reported at the mnemonic", "[asm][diag]") {
  check_errors({
      {"HLT 1", 1, 1, "HLT takes no operands, got 1"},
      {"  NOP 1, 2", 1, 3, "NOP takes no operands, got 2"},
      {"RW", 1, 1, "RW expects 1 operand (weight_tile), got 0"},
      {"RHM", 1, 1, "RHM expects 3 operands (host_row, ub_row, rows), got 0"},
      {"WHM 0, 0", 1, 1, "WHM expects 3 operands (src_row, host_row, rows), got 2"},
      {"MMC 0, 0", 1, 1, "MMC expects 3 operands (ub_row, acc_row, rows), got 2"},
      {"ACT 1", 1, 1, "ACT expects 3 operands (acc_row, ub_row, rows), got 1"},
      {"SETQ 1, 2, 3, 4", 1, 1, "SETQ expects 3 operands (M, S, Z), got 4"},
      {"CMAP 1, 2", 1, 1, "CMAP expects 3 operands (in_h, in_w, out_w), got 2"},
      {"CSTR", 1, 1, "CSTR expects 3 operands (stride_y, stride_x, pad), got 0"},
      // NGEO's width is optional: 3 or 4 operands.
      {"NGEO 1, 2", 1, 1, "NGEO expects 3 to 4 operands (groups, stride, sh, [width]), got 2"},
      {"NGEO 1, 2, 3, 4, 5", 1, 1,
       "NGEO expects 3 to 4 operands (groups, stride, sh, [width]), got 5"},
      {"CTAP 1", 1, 1, "CTAP expects 2 operands (y0, x0), got 1"},
      {"CTAP 1, 2, 3", 1, 1, "CTAP expects 2 operands (y0, x0), got 3"},
      {"MMC.C 0, 0", 1, 1, "MMC expects 3 operands (ub_row, acc_row, rows), got 2"},
      {"POOL 0, 0", 1, 1, "POOL expects 3 operands (map_row, ub_row, rows), got 2"},
      {"POOL.A", 1, 1, "POOL expects 3 operands (map_row, ub_row, rows), got 0"},
      {"POOL 0, 0, 1, 2", 1, 1, "POOL expects 3 operands (map_row, ub_row, rows), got 4"},
      {"CWIN 1", 1, 1, "CWIN expects 2 operands (win_h, win_w), got 1"},
      {"CWIN 1, 2, 3", 1, 1, "CWIN expects 2 operands (win_h, win_w), got 3"},
      {"  cwin", 1, 3, "CWIN expects 2 operands (win_h, win_w), got 0"},
  });
}

TEST_CASE("the operand count agrees in number with the count", "[asm][diag][plural]") {
  // Whole messages: "1 operand", never "1 operands"; every other count is plural.
  const auto message = [](const std::string& source) {
    const Result r = assemble(source, Options{});
    REQUIRE(r.diagnostics.size() == 1);
    return r.diagnostics[0].message;
  };
  CHECK(message("RW") == "RW expects 1 operand (weight_tile), got 0");
  CHECK(message("RW 1, 2") == "RW expects 1 operand (weight_tile), got 2");
  CHECK(message("RHM 1") == "RHM expects 3 operands (host_row, ub_row, rows), got 1");
  CHECK(message("SETQ") == "SETQ expects 3 operands (M, S, Z), got 0");
  CHECK(message("HLT 1") == "HLT takes no operands, got 1");
}

// ---- Symbols and evaluation --------------------------------------------------

TEST_CASE("symbol errors are reported at the definition or use", "[asm][diag]") {
  check_errors({
      {"x: NOP\nx: NOP", 2, 1, "'x' is already defined at line 1, column 1"},
      {".equ A, 1\n  .equ A, 2", 2, 8, "'A' is already defined at line 1, column 6"},
      {"L: NOP\n.equ L, 1", 2, 6, "'L' is already defined at line 1, column 1"},
      {"RW foo", 1, 4, "undefined symbol 'foo'"},
      {".equ x, 1\nRW X", 2, 4, "undefined symbol 'X'"},
      {".equ UNUSED, nothing", 1, 14, "undefined symbol 'nothing'"},
      {".equ A, A + 1", 1, 9, "'A' is defined in terms of itself"},
      {".equ A, B\n.equ B, A", 2, 9, "'A' is defined in terms of itself"},
  });
}

TEST_CASE("arithmetic overflow is reported at the operator", "[asm][diag]") {
  const std::string msg = "arithmetic overflow: the result does not fit in 64 bits";
  check_errors({
      {"SETQ 9223372036854775807 + 1, 0, 0", 1, 26, msg},
      {".equ X, -9223372036854775807 - 2", 1, 30, msg},
      {".equ X, 4611686018427387904 * 2", 1, 29, msg},
      {".equ X, (-9223372036854775807 - 1) / -1", 1, 36, msg},
      {".equ X, -(-9223372036854775807 - 1)", 1, 9, msg},
      {".equ X, 1 << 63", 1, 11, msg},
      {".equ X, 3 << 62", 1, 11, msg},
  });
}

TEST_CASE("division by zero and bad shift counts are reported at the operator", "[asm][diag]") {
  check_errors({
      {".equ X, 1 / 0", 1, 11, "division by zero"},
      {"RW 1/(2-2)", 1, 5, "division by zero"},
      {".equ X, 1 << 64", 1, 11, "shift count 64 is outside 0..63"},
      {".equ X, 1 >> -1", 1, 11, "shift count -1 is outside 0..63"},
  });
}

// ---- Operands and the array size ---------------------------------------------

TEST_CASE("out-of-range operands are reported at the operand", "[asm][diag]") {
  check_errors({
      {"RHM 0, 0, 0", 1, 11, "rows must be at least 1, got 0"},
      {"RHM 0, 0, -1", 1, 11, "-1 is out of range for rows (24-bit unsigned field, 1..16777215)"},
      {"RHM 0, -1, 1", 1, 8, "-1 is out of range for ub_row (24-bit unsigned field, 0..16777215)"},
      {"RHM 4294967296, 0, 1", 1, 5,
       "4294967296 is out of range for host_row (32-bit unsigned field, 0..4294967295)"},
      {"WHM 16777216, 0, 1", 1, 5, "16777216 is out of range for src_row"},
      {"MMC 0, 16777216, 1", 1, 8, "16777216 is out of range for acc_row"},
      {"RW 1 + 0xFFFFFF", 1, 4,
       "16777216 is out of range for weight_tile (24-bit unsigned field, 0..16777215)"},
      {"SETQ 2147483648, 0, 0", 1, 6,
       "2147483648 is out of range for M (32-bit signed field, -2147483648..2147483647)"},
      {"SETQ 0x80000000, 0, 0", 1, 6, "2147483648 is out of range for M"},
      {"SETQ 0, 63, 0", 1, 9, "63 is out of range for S (6-bit unsigned field, 0..62)"},
      {"SETQ 0, 0, -129", 1, 12, "-129 is out of range for Z (8-bit signed field, -128..127)"},
  });
}

TEST_CASE("out-of-range convolution registers are reported at the operand", "[asm][diag][conv]") {
  check_errors({
      {"CMAP 0, 4, 4", 1, 6, "0 is out of range for in_h (16-bit unsigned field, 1..65535)"},
      {"CMAP 4, 65536, 4", 1, 9,
       "65536 is out of range for in_w (16-bit unsigned field, 1..65535)"},
      {"CMAP 4, 4, 0", 1, 12, "0 is out of range for out_w (16-bit unsigned field, 1..65535)"},
      {"CMAP -1, 4, 4", 1, 6, "-1 is out of range for in_h"},
      {"CSTR 1, 256, 0", 1, 9, "256 is out of range for stride_x (8-bit unsigned field, 1..255)"},
      {"CSTR 0, 1, 0", 1, 6, "0 is out of range for stride_y (8-bit unsigned field, 1..255)"},
      {"CSTR 1, 1, 128", 1, 12, "128 is out of range for pad (8-bit signed field, -128..127)"},
      {"CSTR 1, 1, -129", 1, 12, "-129 is out of range for pad (8-bit signed field, -128..127)"},
      {"CSTR 1, 1, 0xFF", 1, 12, "255 is out of range for pad"},
      {"CTAP -32769, 0", 1, 6,
       "-32769 is out of range for y0 (16-bit signed field, -32768..32767)"},
      {"CTAP 0, 32768", 1, 9, "32768 is out of range for x0 (16-bit signed field, -32768..32767)"},
      {"CTAP 0, 0xFFFF", 1, 9, "65535 is out of range for x0"},
  });
  // Every operand of a line is checked.
  const Result r = assemble("CMAP 0, 0, 65536\n", Options{});
  CHECK(positions(r) == std::vector<std::string>{"1:6", "1:9", "1:12"});
}

TEST_CASE("out-of-range pooling operands are reported at the operand", "[asm][diag][pool]") {
  check_errors({
      {"CWIN 0, 1", 1, 6, "0 is out of range for win_h (8-bit unsigned field, 1..255)"},
      {"CWIN 1, 256", 1, 9, "256 is out of range for win_w (8-bit unsigned field, 1..255)"},
      {"CWIN 256, 1", 1, 6, "256 is out of range for win_h (8-bit unsigned field, 1..255)"},
      {"CWIN 1, 0", 1, 9, "0 is out of range for win_w (8-bit unsigned field, 1..255)"},
      {"CWIN -1, 1", 1, 6, "-1 is out of range for win_h"},
      {"CWIN 1, 0x100", 1, 9, "256 is out of range for win_w"},
      {"POOL 16777216, 0, 1", 1, 6,
       "16777216 is out of range for map_row (24-bit unsigned field, 0..16777215)"},
      {"POOL -1, 0, 1", 1, 6, "-1 is out of range for map_row"},
      {"POOL 0, 16777216, 1", 1, 9,
       "16777216 is out of range for ub_row (24-bit unsigned field, 0..16777215)"},
      {"POOL.A 0, 0, 0", 1, 14, "rows must be at least 1, got 0"},
      {"POOL 0, 0, 16777216", 1, 12,
       "16777216 is out of range for rows (24-bit unsigned field, 1..16777215)"},
      // The vector unit's fields.
      {"VSCL 0, 0, 5", 1, 12, "5 is out of range for op (3-bit unsigned field, 0..4)"},
      {"VSCL 32768, 0, 0", 1, 6, "32768 is out of range for da (16-bit signed field, -32768..32767)"},
      {"VSCL 0, -32769, 0", 1, 9, "-32769 is out of range for db"},
      {"VSRC 16777216, 0, 0", 1, 6,
       "16777216 is out of range for b_row (24-bit unsigned field, 0..16777215)"},
      {"VSRC 0, 128, 0", 1, 9, "128 is out of range for za (8-bit signed field, -128..127)"},
      {"VSRC 0, 0, -129", 1, 12, "-129 is out of range for zb"},
      {"VEC 0, 0, 0", 1, 11, "rows must be at least 1, got 0"},
      // The normalization registers' fields, and SMAX, LNRM, GELU's.
      {"NGEO 0, 0, 0", 1, 6, "0 is out of range for groups (16-bit unsigned field, 1..65535)"},
      {"NGEO 1, 16777216, 0", 1, 9,
       "16777216 is out of range for stride (24-bit unsigned field, 0..16777215)"},
      {"NGEO 1, 0, 16", 1, 12, "16 is out of range for sh (4-bit unsigned field, 0..15)"},
      {"NGEO 1, 0, 0, 65536", 1, 15,
       "65536 is out of range for width (16-bit unsigned field, 0..65535)"},
      {"NGEO 1, 0, 0, -1", 1, 15, "-1 is out of range for width"},
      // A token's width is at most its groups rows of N = 8 lanes (the default array).
      {"NGEO 1, 0, 0, 9", 1, 15, "width 9 is more than a token's groups * N = 1 * 8 = 8 values"},
      {"NGEO 3, 8, 2, 25", 1, 15, "width 25 is more than a token's groups * N = 3 * 8 = 24 values"},
      {"NCON 2147483648, 0, 0", 1, 6,
       "2147483648 is out of range for k0 (32-bit signed field, -2147483648..2147483647)"},
      {"NCON 0, 0, -2147483649", 1, 12, "-2147483649 is out of range for k2"},
      {"SMAX 16777216, 0, 1", 1, 6,
       "16777216 is out of range for x_row (24-bit unsigned field, 0..16777215)"},
      {"LNRM 0, 0, 0", 1, 12, "rows must be at least 1, got 0"},
      {"GELU.R 0, 0, 1", 1, 6, "GELU takes no flags"},
      // Attention's second operand: a tile has N = 8 rows (the default array).
      {"HWT 0, 0, 0", 1, 11, "rows must be at least 1, got 0"},
      {"HWT 0, 0, 9", 1, 11, "HWT of 9 rows is more than a weight tile's N = 8 rows"},
      {"HWT.T 4, 1, 100", 1, 13, "HWT of 100 rows is more than a weight tile's N = 8 rows"},
      {"RWU.T 0, 0", 1, 10, "rows must be at least 1, got 0"},
      {"RWU 0, 9", 1, 8, "RWU of 9 rows is more than a weight tile's N = 8 rows"},
      {"RWU.A 0, 1", 1, 5, "unknown flag 'A' for RWU (valid: T)"},
  });
  // Every operand of a line is checked.
  CHECK(positions(assemble("CWIN 0, 256\n", Options{})) ==
        std::vector<std::string>{"1:6", "1:9"});
  CHECK(positions(assemble("POOL.A -1, -1, 0\n", Options{})) ==
        std::vector<std::string>{"1:8", "1:12", "1:16"});
}

TEST_CASE("an .array outside 4..256 is reported at its value", "[asm][diag]") {
  check_errors({
      {".array 3", 1, 8, "array size 3 is outside 4..256"},
      {".array 257", 1, 8, "array size 257 is outside 4..256"},
  });
}

TEST_CASE("an .array that conflicts with Options.array_n is an error", "[asm][diag]") {
  Options o;
  o.array_n = 32;
  check_error({"HLT\n.array 16\n", 2, 1, ".array 16 conflicts with --array 32"}, o);
}

// ---- Memory ranges -------------------------------------------------------------

TEST_CASE("with a config, operands past the end of a memory are errors", "[asm][diag][memory]") {
  const ArchConfig cfg = small_memories();
  Options o;
  o.config = &cfg;
  check_errors(
      {
          {"RHM 0, 95, 10", 1, 8, "rows 95..104 are past the end of unified buffer (100 rows)"},
          {"RHM 0, 100, 1", 1, 8, "row 100 is past the end of unified buffer (100 rows)"},
          {"RHM 995, 0, 10", 1, 5, "rows 995..1004 are past the end of host memory (1000 rows)"},
          {"RW 10", 1, 4, "tile 10 is past the end of weight memory (10 tiles)"},
          {"MMC 95, 0, 10", 1, 5, "rows 95..104 are past the end of unified buffer (100 rows)"},
          {"MMC 0, 45, 10", 1, 8, "rows 45..54 are past the end of accumulators (50 rows)"},
          {"ACT 45, 0, 10", 1, 5, "rows 45..54 are past the end of accumulators (50 rows)"},
          {"ACT 0, 95, 10", 1, 8, "rows 95..104 are past the end of unified buffer (100 rows)"},
          {"WHM 99, 0, 2", 1, 5, "rows 99..100 are past the end of unified buffer (100 rows)"},
          {"WHM 0, 999, 2", 1, 8, "rows 999..1000 are past the end of host memory (1000 rows)"},
          {"WHM.A 48, 0, 3", 1, 7, "rows 48..50 are past the end of accumulators (50 rows)"},
          // A VEC's A and output at their operands; operand B, whose base is
          // VSRC's register, at a_row (docs/isa.md section 7); with .B, B is
          // one row.
          {"VEC 95, 0, 10", 1, 5, "rows 95..104 are past the end of unified buffer (100 rows)"},
          {"VEC 0, 95, 10", 1, 8, "rows 95..104 are past the end of unified buffer (100 rows)"},
          {"VSRC 96, 0, 0\nVEC 0, 0, 10", 2, 5,
           "rows 96..105 are past the end of unified buffer (100 rows)"},
          {"VSRC.B 100, 0, 0\nVEC 0, 0, 10", 2, 5,
           "row 100 is past the end of unified buffer (100 rows)"},
          // SMAX and LNRM read and write the hull of their tokens' rows,
          // NGEO's registers as they stand: (groups - 1) * stride + rows.
          {"NGEO 3, 40, 0\nSMAX 5, 0, 16", 2, 6,
           "rows 5..100 are past the end of unified buffer (100 rows)"},
          {"NGEO 2, 10, 0\nLNRM 0, 86, 5", 2, 9,
           "rows 86..100 are past the end of unified buffer (100 rows)"},
          {"GELU 95, 0, 10", 1, 6, "rows 95..104 are past the end of unified buffer (100 rows)"},
          // HWT reads host rows and writes one weight tile.
          {"HWT 995, 0, 8", 1, 5, "rows 995..1002 are past the end of host memory (1000 rows)"},
          {"HWT.T 0, 10, 8", 1, 10, "tile 10 is past the end of weight memory (10 tiles)"},
          // RWU needs the UB weight path, off here.
          {"RWU 0, 8", 1, 1, "RWU needs the configuration's ub_weight_path"},
      },
      o);
  // With it, RWU reads its UB rows.
  ArchConfig path = small_memories();
  path.ub_weight_path = 1;
  o.config = &path;
  check_errors({{"RWU.T 95, 8", 1, 7, "rows 95..102 are past the end of unified buffer (100 rows)"}}, o);
  const Result ok = assemble("RWU 92, 8\nHWT.T 992, 9, 8\n", o);
  CHECK(ok.diagnostics.empty());
}

TEST_CASE("memory range messages agree in number with the rows and the size",
          "[asm][diag][memory][plural]") {
  // One row or tile "is" past the end, a range "are"; a memory of one row is "(1 row)".
  ArchConfig one = small_memories();
  one.ub_rows = 1;
  one.weight_tiles = 1;
  Options o;
  o.config = &one;
  const auto message = [&o](const std::string& source) {
    const Result r = assemble(source, o);
    REQUIRE(r.diagnostics.size() == 1);
    return r.diagnostics[0].message;
  };
  CHECK(message("RHM 0, 1, 1") == "row 1 is past the end of unified buffer (1 row)");
  CHECK(message("RHM 0, 0, 2") == "rows 0..1 are past the end of unified buffer (1 row)");
  CHECK(message("RW 1") == "tile 1 is past the end of weight memory (1 tile)");
  CHECK(message("MMC 0, 0, 3") == "rows 0..2 are past the end of unified buffer (1 row)");
  const ArchConfig cfg = small_memories();
  o.config = &cfg;
  CHECK(message("RHM 0, 100, 1") == "row 100 is past the end of unified buffer (100 rows)");
  CHECK(message("RHM 0, 99, 2") == "rows 99..100 are past the end of unified buffer (100 rows)");
  CHECK(message("RW 10") == "tile 10 is past the end of weight memory (10 tiles)");
}

TEST_CASE("WHM.A writes four host rows per accumulator row", "[asm][diag][memory]") {
  const ArchConfig cfg = small_memories();
  Options o;
  o.config = &cfg;
  // 3 accumulator rows fill 12 host rows: 990..1001 passes the end of 1000.
  check_error({"WHM.A 0, 990, 3", 1, 10,
               "rows 990..1001 are past the end of host memory (1000 rows)"},
              o);
  // Without .A the same operands only write host rows 990..992.
  CHECK(assemble("WHM 0, 990, 3", o).diagnostics.empty());
}

TEST_CASE("memory ranges are checked only when every operand is in range", "[asm][diag][memory]") {
  const ArchConfig cfg = small_memories();
  Options o;
  o.config = &cfg;
  // Host rows 995.. and UB rows 95.. would pass the ends, but rows = 0 is
  // already an error.
  check_error({"RHM 995, 95, 0", 1, 14, "rows must be at least 1, got 0"}, o);
}

TEST_CASE("the documented WHM.A example reports both memories", "[asm][diag][memory]") {
  // docs/isa.md section 7, with the small8 preset.
  const ArchConfig cfg = tpu::preset_config("small8");
  Options o;
  o.config = &cfg;
  const Result r = assemble("WHM.A 4095, 1048572, 2\n", o);
  REQUIRE(r.diagnostics.size() == 2);
  CHECK(positions(r) == std::vector<std::string>{"1:7", "1:13"});
  CHECK(r.diagnostics[0].message == "rows 4095..4096 are past the end of accumulators (4096 rows)");
  CHECK(r.diagnostics[1].message ==
        "rows 1048572..1048579 are past the end of host memory (1048576 rows)");
}

TEST_CASE("operands that end exactly at the end of a memory are accepted", "[asm][diag][memory]") {
  const ArchConfig cfg = small_memories();
  Options o;
  o.config = &cfg;
  const Result r = assemble(
      "RHM 990, 90, 10\n"
      "RW 9\n"
      "MMC 90, 40, 10\n"
      "ACT 40, 90, 10\n"
      "WHM 99, 999, 1\n"
      "WHM.A 47, 988, 3\n",
      o);
  INFO(format_diagnostics("test.s", "", r.diagnostics));
  CHECK(r.diagnostics.empty());
  CHECK(r.program.has_value());
}

TEST_CASE("with a config, an MMC.C reads the whole map of the last CMAP before it",
          "[asm][diag][memory][conv]") {
  // MMC.C reads UB rows ub_row .. ub_row + in_h*in_w - 1, with in_h and in_w
  // from the last CMAP before it in program order (1 x 1 at reset), and
  // writes ACC rows acc_row ..+rows like MMC.
  const ArchConfig cfg = tpu::preset_config("small8");  // 16384 UB rows
  Options o;
  o.config = &cfg;
  const auto ok = [&o](const std::string& source) {
    const Result r = assemble(source, o);
    INFO(source);
    INFO(format_diagnostics("test.s", source, r.diagnostics));
    CHECK(r.diagnostics.empty());
    CHECK(r.program.has_value());
  };
  // A 100 x 100 map: 10000 rows from ub_row on.
  ok("CMAP 100, 100, 10\nMMC.C 0, 0, 1\n");
  ok("CMAP 100, 100, 10\nMMC.SOC 6384, 0, 4096\n");  // rows 6384..16383: the last row
  check_errors(
      {
          {"CMAP 100, 100, 10\nMMC.C 16000, 0, 1\n", 2, 7,
           "rows 16000..25999 are past the end of unified buffer (16384 rows)"},
          {"CMAP 100, 100, 10\nMMC.SOC 6385, 0, 1\n", 2, 9,
           "rows 6385..16384 are past the end of unified buffer (16384 rows)"},
          // 200 x 200 = 40000 rows do not fit a UB of 16384 at all.
          {"CMAP 200, 200, 10\nMMC.C 0, 0, 1\n", 2, 7,
           "rows 0..39999 are past the end of unified buffer (16384 rows)"},
          // The map, not the rows the MMC.C reads: this one reads pixel (0, 0) only.
          {"CMAP 2, 2, 1\nCTAP 0, 0\nMMC.C 16383, 0, 1\n", 3, 7,
           "rows 16383..16386 are past the end of unified buffer (16384 rows)"},
          // ... nor any row at all, every one being a padding row.
          {"CMAP 2, 2, 1\nCTAP -100, -100\nMMC.C 16383, 0, 1\n", 3, 7,
           "rows 16383..16386 are past the end of unified buffer (16384 rows)"},
          // The ACC range is the rows, as for MMC.
          {"CMAP 2, 2, 2\nMMC.C 0, 4090, 7\n", 2, 10,
           "rows 4090..4096 are past the end of accumulators (4096 rows)"},
      },
      o);
  // A CMAP after the MMC.C does not count; the last one before it does.
  ok("MMC.C 16000, 0, 1\nCMAP 100, 100, 10\n");
  ok("MMC.C 16383, 0, 1\nCMAP 100, 100, 10\nCMAP 1, 1, 1\nMMC.C 16383, 0, 1\n");
  ok("CMAP 100, 100, 10\nCMAP 1, 2, 1\nMMC.C 16382, 0, 100\n");
  ok("CMAP 100, 100, 10\nCSTR 2, 2, 0\nCTAP 0, 0\nSYNC\nMMC.C 6384, 0, 1\n");
  // The reset map is one pixel.
  ok("MMC.C 16383, 0, 1\n");
  check_error(
      {"MMC.C 16384, 0, 1\n", 1, 7, "row 16384 is past the end of unified buffer (16384 rows)"}, o);
  // A map that grows between two MMC.Cs at the same row: only the second fails.
  check_error({"CMAP 1, 1, 1\nMMC.C 16383, 0, 1\nCMAP 2, 1, 1\nMMC.C 16383, 0, 1\n", 4, 7,
               "rows 16383..16384 are past the end of unified buffer (16384 rows)"},
              o);
  // A CMAP with symbols defined after it evaluates as usual.
  check_error({"CMAP H, W, 1\nMMC.C 16000, 0, 1\n.equ H, 20\n.equ W, 20\n", 2, 7,
               "rows 16000..16399 are past the end of unified buffer (16384 rows)"},
              o);
  // An MMC without C reads its own rows whatever the map.
  ok("CMAP 100, 100, 10\nMMC 16000, 0, 384\n");
  check_error({"CMAP 1, 1, 1\nMMC 16000, 0, 385\n", 2, 5,
               "rows 16000..16384 are past the end of unified buffer (16384 rows)"},
              o);
  // Several errors in one file, each MMC.C with the map before it.
  const Result r = assemble(
      "CMAP 10, 10, 1\nMMC.C 16300, 0, 1\nCMAP 5, 5, 1\nMMC.C 16300, 0, 1\n"
      "MMC.C 16360, 0, 1\n",
      o);
  CHECK(positions(r) == std::vector<std::string>{"2:7", "5:7"});
  REQUIRE(r.diagnostics.size() == 2);
  CHECK(r.diagnostics[0].message ==
        "rows 16300..16399 are past the end of unified buffer (16384 rows)");
  CHECK(r.diagnostics[1].message ==
        "rows 16360..16384 are past the end of unified buffer (16384 rows)");
}

TEST_CASE("with a config, a POOL reads the whole map of the last CMAP before it",
          "[asm][diag][memory][pool]") {
  // POOL reads UB rows map_row .. map_row + in_h*in_w - 1, with in_h and in_w
  // from the last CMAP before it in program order (1 x 1 at reset), whatever
  // the window, origin and strides; it writes UB rows ub_row ..+rows.
  const ArchConfig cfg = tpu::preset_config("small8");  // 16384 UB rows
  Options o;
  o.config = &cfg;
  const auto ok = [&o](const std::string& source) {
    const Result r = assemble(source, o);
    INFO(source);
    INFO(format_diagnostics("test.s", source, r.diagnostics));
    CHECK(r.diagnostics.empty());
    CHECK(r.program.has_value());
  };
  // A 100 x 100 map: 10000 rows from map_row on.
  ok("CMAP 100, 100, 10\nPOOL 0, 10000, 6384\n");  // output rows 10000..16383: the last row
  ok("CMAP 100, 100, 10\nPOOL.A 6384, 0, 1\n");     // map rows 6384..16383
  check_errors(
      {
          {"CMAP 100, 100, 10\nPOOL 16000, 0, 1\n", 2, 6,
           "rows 16000..25999 are past the end of unified buffer (16384 rows)"},
          {"CMAP 100, 100, 10\nPOOL.A 6385, 0, 1\n", 2, 8,
           "rows 6385..16384 are past the end of unified buffer (16384 rows)"},
          {"CMAP 200, 200, 10\nPOOL 0, 0, 1\n", 2, 6,
           "rows 0..39999 are past the end of unified buffer (16384 rows)"},
          // The map, not the rows the windows read: this one reads pixel (0, 0) only.
          {"CMAP 2, 2, 1\nCTAP 0, 0\nCWIN 1, 1\nPOOL 16383, 0, 1\n", 4, 6,
           "rows 16383..16386 are past the end of unified buffer (16384 rows)"},
          // ... nor any row at all, every window being in the padding.
          {"CMAP 2, 2, 1\nCTAP -100, -100\nPOOL 16383, 0, 1\n", 3, 6,
           "rows 16383..16386 are past the end of unified buffer (16384 rows)"},
          // The output rows are the rows operand.
          {"POOL 0, 16380, 5\n", 1, 9,
           "rows 16380..16384 are past the end of unified buffer (16384 rows)"},
          {"CMAP 100, 100, 1\nPOOL.A 0, 16384, 1\n", 2, 11,
           "row 16384 is past the end of unified buffer (16384 rows)"},
      },
      o);
  // The window does not count: a 255 x 255 window of a one-pixel map.
  ok("CWIN 255, 255\nPOOL 16383, 16383, 1\n");
  // A CMAP after the POOL does not count; the last one before it does.
  ok("POOL 16000, 0, 1\nCMAP 100, 100, 10\n");
  ok("CMAP 100, 100, 10\nCMAP 1, 2, 1\nPOOL 16382, 0, 100\n");
  ok("CMAP 100, 100, 10\nCSTR 2, 2, 0\nCTAP 0, 0\nCWIN 3, 3\nSYNC\nPOOL 6384, 0, 1\n");
  // The reset map is one pixel.
  ok("POOL 16383, 0, 1\n");
  check_error(
      {"POOL 16384, 0, 1\n", 1, 6, "row 16384 is past the end of unified buffer (16384 rows)"}, o);
  // A map that grows between two POOLs at the same row: only the second fails.
  check_error({"CMAP 1, 1, 1\nPOOL 16383, 0, 1\nCMAP 2, 1, 1\nPOOL.A 16383, 0, 1\n", 4, 8,
               "rows 16383..16384 are past the end of unified buffer (16384 rows)"},
              o);
  // MMC.C and POOL read the same registers.
  check_error({"CMAP 100, 100, 10\nMMC.C 0, 0, 1\nPOOL 6385, 0, 1\n", 3, 6,
               "rows 6385..16384 are past the end of unified buffer (16384 rows)"},
              o);
  // A CMAP with symbols defined after it evaluates as usual.
  check_error({"CMAP H, W, 1\nPOOL 16000, 0, 1\n.equ H, 20\n.equ W, 20\n", 2, 6,
               "rows 16000..16399 are past the end of unified buffer (16384 rows)"},
              o);
  // The map and the output both past the end: two errors, at their operands.
  const Result r = assemble("CMAP 10, 10, 1\nPOOL 16300, 16380, 10\n", o);
  CHECK(positions(r) == std::vector<std::string>{"2:6", "2:13"});
  REQUIRE(r.diagnostics.size() == 2);
  CHECK(r.diagnostics[0].message ==
        "rows 16300..16399 are past the end of unified buffer (16384 rows)");
  CHECK(r.diagnostics[1].message ==
        "rows 16380..16389 are past the end of unified buffer (16384 rows)");
  CHECK_FALSE(r.program.has_value());
}

TEST_CASE("without a config no memory range is checked", "[asm][diag][memory]") {
  const Result r = assemble(
      "RHM 4294967295, 16777215, 16777215\n"
      "RW 16777215\n"
      "MMC 16777215, 16777215, 16777215\n"
      "ACT 16777215, 16777215, 16777215\n"
      "WHM.A 16777215, 4294967295, 16777215\n"
      "CMAP 65535, 65535, 1\n"
      "MMC.C 16777215, 16777215, 16777215\n"
      "CWIN 255, 255\n"
      "POOL.A 16777215, 16777215, 16777215\n",
      Options{});
  CHECK(r.diagnostics.empty());
  CHECK(r.program.has_value());
}

// ---- Several errors ---------------------------------------------------------

TEST_CASE("every error in a file is reported, sorted by position", "[asm][diag]") {
  // The errors are found in different passes (parsing, .equ evaluation, the
  // array size, operand evaluation), so the order is the sort's doing.
  const char* source =
      "RW 99999999      # operand range\n"
      "FOO              # syntax\n"
      ".equ X, 1/0      # .equ evaluation\n"
      "MMC.SS 0, 0, 1   # flags\n"
      "RHM -1, -1, 0    # three operands\n"
      ".array 2         # array size\n"
      "HLT\n";
  const Result r = assemble(source, Options{});
  const std::vector<std::string> where = positions(r);
  CHECK(where == std::vector<std::string>{"1:4", "2:1", "3:10", "4:6", "5:5", "5:9", "5:13", "6:8"});
  CHECK_FALSE(r.program.has_value());
}

TEST_CASE("only the first lexical or syntax error of a line is reported", "[asm][diag]") {
  check_errors({
      {"RW @ @", 1, 4, "unexpected character '@'"},
      {"MMC.SX 0, 0, 0", 1, 6, "unknown flag 'X' for MMC"},
      {"RW ) )", 1, 4, "expected an expression, found ')'"},
      {"FOO 0x", 1, 5, "invalid number '0x': no digits"},
  });
}

TEST_CASE("evaluation and range errors are reported for every operand", "[asm][diag]") {
  const Result r = assemble("RHM -1, -1, 0\nRW foo + bar\n", Options{});
  REQUIRE(r.diagnostics.size() == 5);
  CHECK(positions(r) == std::vector<std::string>{"1:5", "1:9", "1:13", "2:4", "2:10"});
  CHECK_THAT(r.diagnostics[0].message, Contains("for host_row"));
  CHECK_THAT(r.diagnostics[1].message, Contains("for ub_row"));
  CHECK_THAT(r.diagnostics[2].message, Contains("rows must be at least 1"));
  CHECK_THAT(r.diagnostics[3].message, Contains("undefined symbol 'foo'"));
  CHECK_THAT(r.diagnostics[4].message, Contains("undefined symbol 'bar'"));
}

TEST_CASE("one error among valid lines still produces no program", "[asm][diag]") {
  const Result r = assemble("RHM 0, 0, 8\nRW 0\nMMC.SO 0, 0, 8\nACT.R 0, 0, 99999999\nHLT\n",
                            Options{});
  CHECK(r.diagnostics.size() == 1);
  CHECK_FALSE(r.program.has_value());
}

TEST_CASE("a memory error and a syntax error in one file are both reported", "[asm][diag]") {
  const ArchConfig cfg = small_memories();
  Options o;
  o.config = &cfg;
  const Result r = assemble("RHM 995, 95, 10\nFOO\n", o);
  const std::vector<std::string> where = positions(r);
  CHECK(where == std::vector<std::string>{"1:5", "1:10", "2:1"});
}

// ---- Nesting limits (found by tests/fuzz: deep nesting overflowed the stack) --

// `n` copies of `s`.
std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST_CASE("expressions nested up to 256 levels assemble", "[asm][diag][limits]") {
  CHECK(assemble("RW " + repeat("(", 255) + "1" + repeat(")", 255) + "\n", Options{}).program);
  CHECK(assemble("RW " + repeat("-", 254) + "1\n", Options{}).program);
  CHECK(assemble("RW 0" + repeat("+1", 255) + "\n", Options{}).program);
  // 128 minus signs and 128 parentheses.
  CHECK(assemble("RW " + repeat("-(", 128) + "0" + repeat(")", 128) + "\n", Options{}).program);
}

TEST_CASE("deeper expressions are an error, not a stack overflow", "[asm][diag][limits]") {
  const std::string message = "expression is nested too deeply (more than 256 levels)";
  for (const int n : {257, 100000}) {
    INFO("levels: " << n);
    // The error is at the parenthesis or operator that opens level 257.
    check_error({"RW " + repeat("(", n) + "1" + repeat(")", n), 1, 260, message});
    check_error({"RW " + repeat("-", n) + "1", 1, 260, message});
    check_error({"RW 0" + repeat("+1", n), 1, 515, message});
    check_error({"RW 0" + repeat("*(1", n) + repeat(")", n), 1, 774, message});
    check_error({"RW " + repeat("-(", n) + "0" + repeat(")", n), 1, 260, message});
  }
}

TEST_CASE("long chains of symbol definitions are an error, not a stack overflow",
          "[asm][diag][limits]") {
  // Each .equ names the next one, so evaluating A0 goes through all of them.
  const auto chain = [](int n) {
    std::string s;
    for (int i = 0; i < n; ++i)
      s += ".equ A" + std::to_string(i) + ", A" + std::to_string(i + 1) + "\n";
    return s + ".equ A" + std::to_string(n) + ", 7\nRW A0\n";
  };
  const Result ok = assemble(chain(300), Options{});
  REQUIRE(ok.program);
  CHECK(ok.program->code[0].operands[0] == 7);
  const Result r = assemble(chain(100000), Options{});
  CHECK_FALSE(r.program.has_value());
  REQUIRE_FALSE(r.diagnostics.empty());
  CHECK_THAT(r.diagnostics[0].message,
             Contains("symbol definitions nest too deeply (more than 1024 levels)"));
}

TEST_CASE("a too-deep expression is reported as file:line:col with the line and a caret",
          "[asm][diag][limits]") {
  // What tpu-as prints: the error on line 3, where "RW " fills columns 1-3, so
  // the 257th parenthesis (the one that opens level 257) is at column 3 + 257.
  const std::string source = "HLT\n\nRW " + repeat("(", 300) + "1" + repeat(")", 300) + "\n";
  const Result r = assemble(source, Options{});
  CHECK_FALSE(r.program.has_value());
  REQUIRE(r.diagnostics.size() == 1);
  const std::string line = "RW " + repeat("(", 300) + "1" + repeat(")", 300);
  CHECK(format_diagnostics("deep.s", source, r.diagnostics) ==
        "deep.s:3:260: error: expression is nested too deeply (more than 256 levels)\n" + line +
            "\n" + std::string(259, ' ') + "^\n");
}

// The inputs in tests/fuzz/regressions/fuzz_asm (run_fuzzers.sh replays them
// on every run) give the diagnostics written here, derived in the comments.
// Each overflows the stack (AddressSanitizer: stack-overflow) when the limits
// are raised out of reach, as the fuzzers found.
TEST_CASE("the fuzz_asm regression inputs give clear diagnostics", "[asm][diag][limits]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(TPU_SOURCE_DIR) / "tests/fuzz/regressions/fuzz_asm";
  const std::string deep = "expression is nested too deeply (more than 256 levels)";
  struct Case {
    std::string file;
    std::vector<std::string> where;  // "line:col" of each diagnostic
    std::string message;             // the message of every one
  };
  // equ_chain.s: ".equ Akkk, " (11 columns), 200 unary '-' and "Ak+1" for
  // k = 000..099, then A100 = 7 and RW A000. Evaluating A000 enters its 200
  // '-' (levels 1..200), then A001 (201), whose '-' are levels 202..401 ...:
  // the j-th '-' of Ak is level 201 k + j, and level 1025 is the 20th '-' of
  // A005 (line 6, column 11 + 20), which fails A000..A005. Every .equ is then
  // evaluated in name order (zero-padded, so numeric): A006 fails at A011 in
  // the same way, ... up to A090 at A095; A096..A100 are 805 levels, fine.
  std::vector<std::string> chain;
  for (int m = 0; m <= 15; ++m) chain.push_back(std::to_string(6 + 6 * m) + ":31");
  const std::vector<Case> cases = {
      // "RW " then 20000 '(': level 257 opens at column 3 + 257.
      {"deep_parens.s", {"1:260"}, deep},
      // "RW " then 20000 unary '-'.
      {"deep_unary.s", {"1:260"}, deep},
      // "RW 0" then 20000 "+1": the k-th '+' (column 5 + 2 (k - 1)) makes a
      // tree k + 1 levels deep, so the 256th, at column 515, is one too many.
      {"long_sum.s", {"1:515"}, deep},
      {"equ_chain.s", chain, "symbol definitions nest too deeply (more than 1024 levels)"},
  };
  std::vector<std::string> listed, on_disk;
  for (const Case& c : cases) listed.push_back(c.file);
  for (const auto& entry : fs::directory_iterator(dir)) on_disk.push_back(entry.path().filename());
  std::sort(listed.begin(), listed.end());
  std::sort(on_disk.begin(), on_disk.end());
  CHECK(on_disk == listed);  // a new regression input needs its expected diagnostics here
  for (const Case& c : cases) {
    INFO("file: " << c.file);
    const std::string source = tpu::read_file_text((dir / c.file).string());
    const Result r = assemble(source, Options{});
    CHECK_FALSE(r.program.has_value());
    CHECK(positions(r) == c.where);
    for (const Diagnostic& d : r.diagnostics) CHECK(d.message == c.message);
  }
}

// ---- Formatting -------------------------------------------------------------

TEST_CASE("a diagnostic is formatted as file:line:col, the line and a caret", "[asm][diag][format]") {
  CHECK(format_diagnostic("f.s", "ABC\nDEF GHI\n", Diagnostic{{2, 5}, "bad thing"}) ==
        "f.s:2:5: error: bad thing\nDEF GHI\n    ^\n");
  CHECK(format_diagnostic("f.s", "ABC", Diagnostic{{1, 1}, "first column"}) ==
        "f.s:1:1: error: first column\nABC\n^\n");
}

TEST_CASE("the assembler's diagnostics format with the caret under the operand", "[asm][diag][format]") {
  const std::string source = "HLT\nRW 99999999\n";
  const Result r = assemble(source, Options{});
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(format_diagnostic("prog.s", source, r.diagnostics[0]) ==
        "prog.s:2:4: error: 99999999 is out of range for weight_tile "
        "(24-bit unsigned field, 0..16777215)\n"
        "RW 99999999\n"
        "   ^\n");
}

TEST_CASE("the documented bad.s example prints as documented", "[asm][diag][format]") {
  // docs/isa.md section 8 (its first line is not shown there; any line that
  // defines IN will do).
  const std::string source =
      ".equ IN, 0\n"
      "    RHM IN, 0, 0\n"
      "    MMC.SR 0, 0, 8\n"
      "    ACT.R 0, OUT, 8\n"
      "    SETQ 1, 63, 0\n"
      "    WHM 16380, 0, 8\n";
  const ArchConfig cfg = tpu::preset_config("small8");
  Options o;
  o.config = &cfg;
  CHECK(format_diagnostics("bad.s", source, assemble(source, o).diagnostics) ==
        "bad.s:2:16: error: rows must be at least 1, got 0\n"
        "    RHM IN, 0, 0\n"
        "               ^\n"
        "bad.s:3:10: error: unknown flag 'R' for MMC (valid: SOC)\n"
        "    MMC.SR 0, 0, 8\n"
        "         ^\n"
        "bad.s:4:14: error: undefined symbol 'OUT'\n"
        "    ACT.R 0, OUT, 8\n"
        "             ^\n"
        "bad.s:5:13: error: 63 is out of range for S (6-bit unsigned field, 0..62)\n"
        "    SETQ 1, 63, 0\n"
        "            ^\n"
        "bad.s:6:9: error: rows 16380..16387 are past the end of unified buffer (16384 rows)\n"
        "    WHM 16380, 0, 8\n"
        "        ^\n");
}

TEST_CASE("the caret line keeps the source line's tabs", "[asm][diag][format]") {
  const std::string source = "\tRW\t99999999\n";
  const Result r = assemble(source, Options{});
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(r.diagnostics[0].loc.col == 5);
  CHECK_THAT(format_diagnostic("t.s", source, r.diagnostics[0]),
             Contains("t.s:1:5: error: ") && Contains("\n\tRW\t99999999\n\t  \t^\n"));
}

TEST_CASE("a caret at the end of the line follows the last character", "[asm][diag][format]") {
  const std::string source = "RW (1";
  const Result r = assemble(source, Options{});
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(format_diagnostic("e.s", source, r.diagnostics[0]) ==
        "e.s:1:6: error: expected ')', found end of line\nRW (1\n     ^\n");
}

TEST_CASE("a CRLF source line is shown without its carriage return", "[asm][diag][format]") {
  const std::string source = "HLT\r\nRW 99999999\r\nHLT\r\n";
  const Result r = assemble(source, Options{});
  REQUIRE(r.diagnostics.size() == 1);
  CHECK(r.diagnostics[0].loc.line == 2);
  CHECK_THAT(format_diagnostic("c.s", source, r.diagnostics[0]),
             Contains("\nRW 99999999\n   ^\n"));
  CHECK(format_diagnostic("c.s", source, r.diagnostics[0]).find('\r') == std::string::npos);
}

TEST_CASE("errors on CRLF lines have the same columns as on LF lines", "[asm][diag]") {
  // The carriage return is not part of the line: end of line is still column 6.
  check_error({"HLT\r\nRW 1,\r\n", 2, 6, "expected an expression, found end of line"});
  check_error({"RW 1,\r", 1, 6, "expected an expression, found end of line"});
}

TEST_CASE("format_diagnostics concatenates the diagnostics in order", "[asm][diag][format]") {
  const std::string source = "FOO\nBAR\n";
  const Result r = assemble(source, Options{});
  REQUIRE(r.diagnostics.size() == 2);
  CHECK(format_diagnostics("m.s", source, r.diagnostics) ==
        "m.s:1:1: error: unknown instruction 'FOO'\nFOO\n^\n"
        "m.s:2:1: error: unknown instruction 'BAR'\nBAR\n^\n");
}
