#include "asm/assembler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

#include "asm/lexer.h"
#include "common/plural.h"

namespace tpu::assembler {
namespace {

using isa::FieldSpec;
using isa::InstrSpec;

// Parsing, evaluating and freeing an expression recurse once per level of
// nesting (parentheses, unary and binary operators), and evaluating a symbol
// recurses into its definition. These limits keep any source, however
// nested, from exhausting the stack.
constexpr int kMaxExprDepth = 256;    // levels in one expression
constexpr int kMaxEvalDepth = 1024;   // levels through symbol definitions

struct Expr {
  enum class Kind { Number, Symbol, Unary, Binary };
  Kind kind = Kind::Number;
  Tok op = Tok::End;
  std::int64_t value = 0;
  std::string name;
  SourceLoc loc;
  int depth = 1;  // levels of the tree below and including this node
  std::unique_ptr<Expr> lhs, rhs;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Operand {
  ExprPtr expr;
  SourceLoc loc;
};

struct Statement {
  const InstrSpec* spec = nullptr;
  std::uint8_t flags = 0;
  SourceLoc loc;
  std::vector<Operand> operands;
};

struct Symbol {
  enum class State { Pending, Evaluating, Done, Failed };
  SourceLoc loc;
  const Expr* expr = nullptr;  // null for labels
  State state = State::Pending;
  std::int64_t value = 0;      // a label's pc, or the .equ value once Done
};

// Thrown after a diagnostic to abandon the rest of a line.
struct LineFailed {};

// Recursive-descent parser over the tokens of one line.
class LineParser {
 public:
  LineParser(const std::vector<Token>& toks, std::vector<Diagnostic>& diags)
      : toks_(toks), diags_(diags) {}

  const Token& peek(std::size_t ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(SourceLoc loc, std::string msg) {
    diags_.push_back({loc, std::move(msg)});
    throw LineFailed{};
  }
  const Token& expect(Tok k, const char* what) {
    if (peek().kind != k)
      fail(peek().loc, fmt::format("expected {}, found {}", what, describe(peek())));
    return next();
  }
  static std::string describe(const Token& t) {
    if (t.kind == Tok::End) return "end of line";
    return fmt::format("'{}'", t.text);
  }
  void check_depth(SourceLoc loc, int depth) {
    if (depth > kMaxExprDepth)
      fail(loc,
           fmt::format("expression is nested too deeply (more than {} levels)", kMaxExprDepth));
  }

  ExprPtr parse_expr() { return parse_shift(); }

 private:
  ExprPtr binary(Tok op, SourceLoc loc, ExprPtr l, ExprPtr r) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::Binary;
    e->op = op;
    e->loc = loc;
    e->depth = 1 + std::max(l->depth, r->depth);
    e->lhs = std::move(l);
    e->rhs = std::move(r);
    check_depth(loc, e->depth);
    return e;
  }
  ExprPtr parse_shift() {
    ExprPtr e = parse_additive();
    while (peek().kind == Tok::Shl || peek().kind == Tok::Shr) {
      const Token& op = next();
      e = binary(op.kind, op.loc, std::move(e), parse_additive());
    }
    return e;
  }
  ExprPtr parse_additive() {
    ExprPtr e = parse_multiplicative();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      const Token& op = next();
      e = binary(op.kind, op.loc, std::move(e), parse_multiplicative());
    }
    return e;
  }
  ExprPtr parse_multiplicative() {
    ExprPtr e = parse_unary();
    while (peek().kind == Tok::Star || peek().kind == Tok::Slash) {
      const Token& op = next();
      e = binary(op.kind, op.loc, std::move(e), parse_unary());
    }
    return e;
  }
  ExprPtr parse_unary() {
    if (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      const Token& op = next();
      auto e = std::make_unique<Expr>();
      e->kind = Expr::Kind::Unary;
      e->op = op.kind;
      e->loc = op.loc;
      check_depth(op.loc, ++nesting_);
      e->lhs = parse_unary();
      --nesting_;
      e->depth = 1 + e->lhs->depth;
      check_depth(op.loc, e->depth);
      return e;
    }
    return parse_primary();
  }
  ExprPtr parse_primary() {
    const Token& t = peek();
    auto e = std::make_unique<Expr>();
    e->loc = t.loc;
    switch (t.kind) {
      case Tok::Number:
        e->kind = Expr::Kind::Number;
        e->value = next().value;
        return e;
      case Tok::Ident:
        e->kind = Expr::Kind::Symbol;
        e->name = std::string(next().text);
        return e;
      case Tok::LParen: {
        next();
        check_depth(t.loc, ++nesting_);
        ExprPtr inner = parse_expr();
        --nesting_;
        expect(Tok::RParen, "')'");
        return inner;
      }
      default:
        fail(t.loc, fmt::format("expected an expression, found {}", describe(t)));
    }
  }

  const std::vector<Token>& toks_;
  std::vector<Diagnostic>& diags_;
  std::size_t pos_ = 0;
  int nesting_ = 0;  // open parentheses and unary operators being parsed
};

std::string field_range_text(const FieldSpec& f) {
  return fmt::format("{}-bit {} field, {}..{}", f.width, f.is_signed ? "signed" : "unsigned", f.min,
                     f.max);
}

class Assembler {
 public:
  Assembler(std::string_view source, const Options& options) : source_(source), options_(options) {}

  Result run() {
    int line_no = 0;
    std::size_t start = 0;
    while (start <= source_.size()) {
      std::size_t end = source_.find('\n', start);
      if (end == std::string_view::npos) end = source_.size();
      std::string_view line = source_.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      parse_line(line, ++line_no);
      start = end + 1;
    }
    // Every .equ is evaluated, used or not, so its errors are reported.
    for (auto& [name, sym] : symbols_)
      if (sym.expr != nullptr) value_of(name, sym.loc);
    const unsigned n = resolve_array_n();
    array_n_ = n;
    Result result;
    isa::Program prog;
    prog.array_n = n;
    for (const Statement& st : stmts_) {
      prog.code.push_back(build(st));
      result.line_of_pc.push_back(st.loc.line);
    }
    std::stable_sort(diags_.begin(), diags_.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return a.loc.line != b.loc.line ? a.loc.line < b.loc.line : a.loc.col < b.loc.col;
    });
    result.diagnostics = std::move(diags_);
    if (result.diagnostics.empty()) result.program = std::move(prog);
    return result;
  }

 private:
  void error(SourceLoc loc, std::string msg) { diags_.push_back({loc, std::move(msg)}); }

  void define(const Token& name, Symbol sym) {
    const std::string key(name.text);
    if (const auto it = symbols_.find(key); it != symbols_.end()) {
      error(name.loc, fmt::format("'{}' is already defined at line {}, column {}", key,
                                  it->second.loc.line, it->second.loc.col));
      return;
    }
    symbols_.emplace(key, sym);
  }

  void parse_line(std::string_view line, int line_no) {
    std::vector<Token> toks;
    if (!lex_line(line, line_no, toks, diags_)) return;
    LineParser p(toks, diags_);
    try {
      // Labels.
      while (p.peek().kind == Tok::Ident && p.peek(1).kind == Tok::Colon) {
        const Token& name = p.next();
        p.next();
        Symbol sym;
        sym.loc = name.loc;
        sym.state = Symbol::State::Done;
        sym.value = static_cast<std::int64_t>(stmts_.size());
        define(name, sym);
      }
      if (p.peek().kind == Tok::End) return;
      if (p.peek().kind == Tok::Dot)
        parse_directive(p);
      else
        parse_instruction(p);
      if (p.peek().kind != Tok::End)
        p.fail(p.peek().loc, fmt::format("unexpected {} after the statement",
                                         LineParser::describe(p.peek())));
    } catch (const LineFailed&) {
      // Diagnosed; the rest of the line is skipped.
    }
  }

  void parse_directive(LineParser& p) {
    const Token& dot = p.next();
    const Token& name = p.expect(Tok::Ident, "a directive name after '.'");
    if (name.loc.col != dot.loc.col + 1) p.fail(dot.loc, "expected a directive name after '.'");
    std::string lower(name.text);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "equ") {
      const Token& sym_name = p.expect(Tok::Ident, "a symbol name");
      p.expect(Tok::Comma, "','");
      ExprPtr e = p.parse_expr();
      Symbol sym;
      sym.loc = sym_name.loc;
      sym.expr = e.get();
      owned_.push_back(std::move(e));
      define(sym_name, sym);
    } else if (lower == "array") {
      if (array_expr_ != nullptr)
        p.fail(dot.loc, fmt::format(".array is already given at line {}", array_loc_.line));
      array_loc_ = dot.loc;
      ExprPtr e = p.parse_expr();
      array_expr_ = e.get();
      owned_.push_back(std::move(e));
    } else {
      p.fail(dot.loc, fmt::format("unknown directive '.{}' (known: .equ, .array)", name.text));
    }
  }

  void parse_instruction(LineParser& p) {
    const Token& mn = p.expect(Tok::Ident, "a mnemonic or directive");
    Statement st;
    st.loc = mn.loc;
    st.spec = isa::find_instr(mn.text);
    if (st.spec == nullptr) p.fail(mn.loc, fmt::format("unknown instruction '{}'", mn.text));
    // Flags: ".XY" directly after the mnemonic, in any order.
    int expect_col = mn.loc.col + static_cast<int>(mn.text.size());
    while (p.peek().kind == Tok::Dot && p.peek().loc.col == expect_col) {
      const Token& dot = p.next();
      if (p.peek().kind != Tok::Ident || p.peek().loc.col != dot.loc.col + 1)
        p.fail(dot.loc, fmt::format("expected flag letters after '{}.'", st.spec->mnemonic));
      const Token& letters = p.next();
      for (std::size_t i = 0; i < letters.text.size(); ++i) {
        const SourceLoc at{letters.loc.line, letters.loc.col + static_cast<int>(i)};
        const char c = letters.text[i];
        const auto bit = isa::flag_bit(*st.spec, c);
        if (!bit) {
          std::string known;
          for (unsigned k = 0; k < st.spec->num_flags; ++k) known += st.spec->flags[k].letter;
          p.fail(at, known.empty()
                         ? fmt::format("{} takes no flags", st.spec->mnemonic)
                         : fmt::format("unknown flag '{}' for {} (valid: {})", c,
                                       st.spec->mnemonic, known));
        }
        const auto mask = static_cast<std::uint8_t>(1u << *bit);
        if (st.flags & mask) p.fail(at, fmt::format("flag '{}' is given twice", c));
        if ((st.spec->exclusive_flags & mask) && (st.flags & st.spec->exclusive_flags))
          p.fail(at, fmt::format("flag '{}' cannot be combined with the other {} flags given",
                                 c, st.spec->mnemonic));
        st.flags |= mask;
      }
      expect_col = letters.loc.col + static_cast<int>(letters.text.size());
    }
    if (p.peek().kind != Tok::End) {
      do {
        Operand op;
        op.loc = p.peek().loc;
        op.expr = p.parse_expr();
        st.operands.push_back(std::move(op));
      } while (p.accept(Tok::Comma));
    }
    if (p.peek().kind != Tok::End)
      p.fail(p.peek().loc, fmt::format("expected ',' or end of line, found {}",
                                       LineParser::describe(p.peek())));
    const unsigned required = st.spec->num_operands - st.spec->optional_operands;
    if (st.operands.size() < required || st.operands.size() > st.spec->num_operands) {
      std::string names;
      for (unsigned i = 0; i < st.spec->num_operands; ++i)
        names += fmt::format("{}{}{}{}", i ? ", " : "", i == required ? "[" : "",
                             isa::field_spec(st.spec->operands[i]).name,
                             i + 1 == st.spec->num_operands && i >= required ? "]" : "");
      const std::string count = required == st.spec->num_operands
                                    ? plural(required, "operand")
                                    : fmt::format("{} to {} operands", required, st.spec->num_operands);
      p.fail(mn.loc, st.spec->num_operands == 0
                         ? fmt::format("{} takes no operands, got {}", st.spec->mnemonic,
                                       st.operands.size())
                         : fmt::format("{} expects {} ({}), got {}", st.spec->mnemonic, count,
                                       names, st.operands.size()));
    }
    stmts_.push_back(std::move(st));
  }

  std::optional<std::int64_t> value_of(const std::string& name, SourceLoc use) {
    const auto it = symbols_.find(name);
    if (it == symbols_.end()) {
      error(use, fmt::format("undefined symbol '{}'", name));
      return std::nullopt;
    }
    Symbol& sym = it->second;
    switch (sym.state) {
      case Symbol::State::Done: return sym.value;
      case Symbol::State::Failed: return std::nullopt;
      case Symbol::State::Evaluating:
        error(use, fmt::format("'{}' is defined in terms of itself", name));
        return std::nullopt;
      case Symbol::State::Pending: break;
    }
    sym.state = Symbol::State::Evaluating;
    const auto v = eval(*sym.expr);
    // `sym` stays valid: evaluation never inserts into the map.
    sym.state = v ? Symbol::State::Done : Symbol::State::Failed;
    sym.value = v.value_or(0);
    return v;
  }

  std::optional<std::int64_t> eval(const Expr& e) {
    if (eval_depth_ >= kMaxEvalDepth) {
      error(e.loc, fmt::format("symbol definitions nest too deeply (more than {} levels)",
                               kMaxEvalDepth));
      return std::nullopt;
    }
    ++eval_depth_;
    const auto v = eval_node(e);
    --eval_depth_;
    return v;
  }

  std::optional<std::int64_t> eval_node(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Number: return e.value;
      case Expr::Kind::Symbol: return value_of(e.name, e.loc);
      case Expr::Kind::Unary: {
        const auto v = eval(*e.lhs);
        if (!v) return std::nullopt;
        if (e.op == Tok::Plus) return v;
        if (*v == INT64_MIN) return overflow(e.loc);
        return -*v;
      }
      case Expr::Kind::Binary: break;
    }
    const auto l = eval(*e.lhs);
    const auto r = eval(*e.rhs);
    if (!l || !r) return std::nullopt;
    std::int64_t out = 0;
    switch (e.op) {
      case Tok::Plus:
        if (__builtin_add_overflow(*l, *r, &out)) return overflow(e.loc);
        return out;
      case Tok::Minus:
        if (__builtin_sub_overflow(*l, *r, &out)) return overflow(e.loc);
        return out;
      case Tok::Star:
        if (__builtin_mul_overflow(*l, *r, &out)) return overflow(e.loc);
        return out;
      case Tok::Slash:
        if (*r == 0) {
          error(e.loc, "division by zero");
          return std::nullopt;
        }
        if (*l == INT64_MIN && *r == -1) return overflow(e.loc);
        return *l / *r;
      case Tok::Shl:
      case Tok::Shr:
        if (*r < 0 || *r > 63) {
          error(e.loc, fmt::format("shift count {} is outside 0..63", *r));
          return std::nullopt;
        }
        if (e.op == Tok::Shr) return *l >> *r;
        // Left shift as a multiplication so that overflow is caught.
        if (*r == 63) return *l == 0 ? 0 : *l == -1 ? INT64_MIN : overflow(e.loc);
        if (__builtin_mul_overflow(*l, std::int64_t{1} << *r, &out)) return overflow(e.loc);
        return out;
      default: break;
    }
    return std::nullopt;
  }

  std::optional<std::int64_t> overflow(SourceLoc loc) {
    error(loc, "arithmetic overflow: the result does not fit in 64 bits");
    return std::nullopt;
  }

  unsigned resolve_array_n() {
    std::optional<std::int64_t> from_source;
    if (array_expr_ != nullptr) {
      from_source = eval(*array_expr_);
      if (from_source && (*from_source < isa::kMinArrayN || *from_source > isa::kMaxArrayN)) {
        error(array_expr_->loc, fmt::format("array size {} is outside {}..{}", *from_source,
                                            isa::kMinArrayN, isa::kMaxArrayN));
        from_source.reset();
      }
    }
    if (options_.array_n) {
      if (from_source && *from_source != *options_.array_n)
        error(array_loc_, fmt::format(".array {} conflicts with --array {}", *from_source,
                                      *options_.array_n));
      return *options_.array_n;
    }
    if (from_source) return static_cast<unsigned>(*from_source);
    if (options_.config != nullptr) return static_cast<unsigned>(options_.config->array_n);
    return options_.default_array_n;
  }

  isa::Instruction build(const Statement& st) {
    isa::Instruction in;
    in.opcode = st.spec->opcode;
    in.flags = st.flags;
    bool ok = true;
    for (unsigned i = 0; i < st.operands.size(); ++i) {
      const FieldSpec& f = isa::field_spec(st.spec->operands[i]);
      const auto v = eval(*st.operands[i].expr);
      if (!v) {
        ok = false;
        continue;
      }
      if (*v < f.min || *v > f.max) {
        ok = false;
        if (f.field == isa::Field::Rows && *v >= 0 && *v < f.min)
          error(st.operands[i].loc, fmt::format("rows must be at least {}, got {}", f.min, *v));
        else
          error(st.operands[i].loc,
                fmt::format("{} is out of range for {} ({})", *v, f.name, field_range_text(f)));
        continue;
      }
      in.operands[i] = *v;
    }
    if (ok) {
      unsigned at = 0;
      if (const std::string why = isa::check_with_array_n(in, array_n_, &at); !why.empty()) {
        error(st.operands[at].loc, why);
        ok = false;
      }
    }
    if (ok && in.opcode == isa::Opcode::RWU && options_.config != nullptr && options_.config->ub_weight_path == 0) {
      error(st.loc, "RWU needs the configuration's ub_weight_path (a weight path from the unified buffer, "
                    "beyond TPUv1), which is off");
      ok = false;
    }
    if (ok && options_.config != nullptr) check_memory(st, in);
    // The convolution registers, as the next MMC.C in program order finds
    // them (a program is straight-line code).
    if (ok) geometry_.apply(in);
    return in;
  }

  void check_memory(const Statement& st, const isa::Instruction& in) {
    for (const isa::Access& a : isa::accesses(in, geometry_)) {
      const std::uint64_t size = options_.config->size_of(a.space);
      if (a.base + a.count <= size) continue;
      const char* unit = isa::space_unit(a.space);
      error(st.operands[a.operand].loc,
            fmt::format("{} {} past the end of {} ({})", plural_range(a.base, a.count, unit),
                        agree(a.count, "is", "are"), isa::space_name(a.space), plural(size, unit)));
    }
  }

  std::string_view source_;
  const Options& options_;
  std::vector<Diagnostic> diags_;
  std::map<std::string, Symbol> symbols_;
  std::vector<Statement> stmts_;
  std::vector<ExprPtr> owned_;
  const Expr* array_expr_ = nullptr;
  SourceLoc array_loc_;
  int eval_depth_ = 0;  // eval() calls in progress
  unsigned array_n_ = 0;  // N, once resolved (before any statement is built)
  isa::ConvGeometry geometry_;  // CMAP/CSTR/CTAP so far, for MMC.C's range check
};

}  // namespace

Result assemble(std::string_view source, const Options& options) {
  // The array sizes a caller passes are its own bug, not the source's: they throw.
  for (const std::optional<unsigned> n : {options.array_n, std::optional<unsigned>(options.default_array_n)})
    if (n && (*n < isa::kMinArrayN || *n > isa::kMaxArrayN))
      throw std::invalid_argument(fmt::format("array size {} is outside {}..{}", *n,
                                              isa::kMinArrayN, isa::kMaxArrayN));
  return Assembler(source, options).run();
}

}  // namespace tpu::assembler
