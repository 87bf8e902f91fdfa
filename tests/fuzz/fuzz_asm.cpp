// Fuzz target: the assembler (src/asm) on arbitrary source text.
//
// Properties, beyond not crashing: assemble() throws nothing for any text;
// every diagnostic points into the text and renders; a source that assembles
// serializes into a file that parses back to the same program, and its
// canonical disassembly re-assembles to the same program (docs/isa.md).
// Each input is assembled twice: with no configuration, and with the memory
// range checks of preset small8.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "asm/assembler.h"
#include "config/arch_config.h"
#include "fuzz_check.h"
#include "isa/program.h"

namespace {

using namespace tpu;

int count_lines(std::string_view text) {
  int lines = 1;
  for (char c : text) lines += c == '\n';
  return lines;
}

void check(std::string_view source, const assembler::Options& opts) {
  const assembler::Result r = assembler::assemble(source, opts);
  if (!r.diagnostics.empty()) {
    FUZZ_CHECK(!r.program, "a program despite errors");
    const int lines = count_lines(source);
    for (const assembler::Diagnostic& d : r.diagnostics) {
      FUZZ_CHECK(d.loc.line >= 1 && d.loc.line <= lines && d.loc.col >= 1, d.message);
      FUZZ_CHECK(fuzz::one_line(d.message), d.message);
    }
    assembler::format_diagnostics("fuzz.s", source, r.diagnostics);
    return;
  }
  FUZZ_CHECK(r.program.has_value(), "no program and no errors");
  const isa::Program& prog = *r.program;
  FUZZ_CHECK(r.line_of_pc.size() == prog.code.size(), "line_of_pc");
  FUZZ_CHECK(isa::parse_program(isa::serialize(prog)).code == prog.code, "file round trip");
  std::string text = ".array " + std::to_string(prog.array_n) + "\n";
  for (const isa::Instruction& in : prog.code) text += isa::disassemble(in) + "\n";
  const assembler::Result again = assembler::assemble(text, {});
  FUZZ_CHECK(again.program && again.program->code == prog.code &&
                 again.program->array_n == prog.array_n,
             "disassembly does not re-assemble to the same program:\n" + text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  static const ArchConfig small8 = preset_config("small8");
  check(source, {});
  assembler::Options checked;
  checked.config = &small8;
  check(source, checked);
  return 0;
}
