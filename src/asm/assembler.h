// The tpu-sim assembler: source text -> Program, or every error in the file.
//
// Syntax (docs/isa.md): one statement per line, optionally preceded by
// labels ("name:"). A statement is an instruction, "MNEMONIC[.FLAGS] expr,
// expr, ...", or a directive: ".equ NAME, expr" or ".array expr". Mnemonics and
// flags are case-insensitive, symbols case-sensitive. A label's value is the
// index of the next instruction. Expressions use + - * / << >> and
// parentheses with C precedence, evaluated in 64-bit signed arithmetic;
// overflow, division by zero and bad shifts are errors.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "asm/diagnostics.h"
#include "config/arch_config.h"
#include "isa/program.h"

namespace tpu::assembler {

struct Options {
  // --array N; wins over the .array directive, which wins over the config's.
  std::optional<unsigned> array_n;
  // When set, every memory operand range is checked against these sizes.
  const ArchConfig* config = nullptr;
  // N used when neither the options, the source nor a config give one.
  unsigned default_array_n = 8;
};

struct Result {
  std::optional<isa::Program> program;  // set when there are no diagnostics
  std::vector<Diagnostic> diagnostics;  // sorted by position
  std::vector<int> line_of_pc;          // source line of each instruction
};

// Throws std::invalid_argument when options.array_n or default_array_n is
// outside kMinArrayN..kMaxArrayN; errors in the source are diagnostics.
Result assemble(std::string_view source, const Options& options);

}  // namespace tpu::assembler
