// Splits one source line into tokens. Comments run from '#' or ';' to the end
// of the line. Numbers are decimal, 0x hex or 0b binary and must fit in int64.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "asm/diagnostics.h"

namespace tpu::assembler {

enum class Tok {
  Ident, Number, Comma, Colon, Dot, LParen, RParen, Plus, Minus, Star, Slash, Shl, Shr, End
};

struct Token {
  Tok kind = Tok::End;
  std::string_view text;   // points into the source
  std::int64_t value = 0;  // for Number
  SourceLoc loc;
};

const char* token_name(Tok t);

// Tokens of one line, always ending with an End token. On a lexical error it
// appends one diagnostic and returns false; the tokens are then incomplete.
bool lex_line(std::string_view line, int line_no, std::vector<Token>& out,
              std::vector<Diagnostic>& diags);

}  // namespace tpu::assembler
