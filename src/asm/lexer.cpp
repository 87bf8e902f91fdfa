#include "asm/lexer.h"

#include <fmt/format.h>

#include <cctype>
#include <optional>

namespace tpu::assembler {
namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Parses a number token; nullopt with `why` set when malformed or too large.
std::optional<std::int64_t> parse_number(std::string_view text, std::string& why) {
  unsigned base = 10;
  std::string_view digits = text;
  if (text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  } else if (text.size() >= 2 && text[0] == '0' && (text[1] == 'b' || text[1] == 'B')) {
    base = 2;
    digits.remove_prefix(2);
  }
  if (digits.empty()) {
    why = fmt::format("invalid number '{}': no digits", text);
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (char c : digits) {
    unsigned d;
    if (c >= '0' && c <= '9')
      d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = static_cast<unsigned>(c - 'A' + 10);
    else
      d = 99;
    if (d >= base) {
      why = fmt::format("invalid digit '{}' in {} number '{}'", c,
                        base == 16 ? "hexadecimal" : base == 2 ? "binary" : "decimal", text);
      return std::nullopt;
    }
    if (v > (static_cast<std::uint64_t>(INT64_MAX) - d) / base) {
      why = fmt::format("number '{}' does not fit in 64 bits", text);
      return std::nullopt;
    }
    v = v * base + d;
  }
  return static_cast<std::int64_t>(v);
}

}  // namespace

const char* token_name(Tok t) {
  switch (t) {
    case Tok::Ident: return "identifier";
    case Tok::Number: return "number";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Dot: return "'.'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Shl: return "'<<'";
    case Tok::Shr: return "'>>'";
    case Tok::End: return "end of line";
  }
  return "?";
}

bool lex_line(std::string_view line, int line_no, std::vector<Token>& out,
              std::vector<Diagnostic>& diags) {
  std::size_t i = 0;
  const auto loc_at = [&](std::size_t at) { return SourceLoc{line_no, static_cast<int>(at) + 1}; };
  while (i < line.size()) {
    const char c = line[i];
    if (c == '#' || c == ';') break;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    Token t;
    t.loc = loc_at(i);
    const std::size_t start = i;
    if (is_ident_start(c)) {
      while (i < line.size() && is_ident_char(line[i])) ++i;
      t.kind = Tok::Ident;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < line.size() && is_ident_char(line[i])) ++i;
      t.kind = Tok::Number;
      std::string why;
      const auto v = parse_number(line.substr(start, i - start), why);
      if (!v) {
        diags.push_back({t.loc, why});
        return false;
      }
      t.value = *v;
    } else if (c == '<' || c == '>') {
      if (i + 1 >= line.size() || line[i + 1] != c) {
        diags.push_back({t.loc, fmt::format("unexpected character '{}' (did you mean '{}{}'?)", c, c, c)});
        return false;
      }
      i += 2;
      t.kind = c == '<' ? Tok::Shl : Tok::Shr;
    } else {
      switch (c) {
        case ',': t.kind = Tok::Comma; break;
        case ':': t.kind = Tok::Colon; break;
        case '.': t.kind = Tok::Dot; break;
        case '(': t.kind = Tok::LParen; break;
        case ')': t.kind = Tok::RParen; break;
        case '+': t.kind = Tok::Plus; break;
        case '-': t.kind = Tok::Minus; break;
        case '*': t.kind = Tok::Star; break;
        case '/': t.kind = Tok::Slash; break;
        default:
          if (std::isprint(static_cast<unsigned char>(c)))
            diags.push_back({t.loc, fmt::format("unexpected character '{}'", c)});
          else
            diags.push_back({t.loc, fmt::format("unexpected byte 0x{:02x}",
                                                static_cast<unsigned>(static_cast<unsigned char>(c)))});
          return false;
      }
      ++i;
    }
    t.text = line.substr(start, i - start);
    out.push_back(t);
  }
  Token end;
  end.kind = Tok::End;
  end.loc = loc_at(i);
  out.push_back(end);
  return true;
}

}  // namespace tpu::assembler
