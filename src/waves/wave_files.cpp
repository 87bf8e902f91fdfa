#include "waves/wave_files.h"

#include <fmt/format.h>

#include <gtkwave/fstapi.h>

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "common/plural.h"
#include "isa/isa.h"
#include "model/waveform.h"

namespace tpu::wave {
namespace {

namespace fs = std::filesystem;

// Whitespace-separated tokens of a file, read in large blocks.
class Tokens {
 public:
  Tokens(const std::string& path, const std::string& shown) : shown_(shown) {
    f_ = std::fopen(path.c_str(), "rb");
    if (f_ == nullptr)
      throw FileError(fmt::format("{}: cannot read: {}", shown, std::strerror(errno)));
    buf_.resize(1 << 16);
  }
  ~Tokens() { std::fclose(f_); }
  Tokens(const Tokens&) = delete;
  Tokens& operator=(const Tokens&) = delete;

  // The next token, or false at the end of the file.
  bool next(std::string& tok) {
    tok.clear();
    for (;;) {
      if (pos_ == len_ && !refill()) return !tok.empty();
      const char c = buf_[pos_++];
      if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
        if (!tok.empty()) return true;
      } else {
        tok.push_back(c);
      }
    }
  }
  // The next token; a missing one is a malformed file.
  std::string expect(std::string_view what) {
    std::string tok;
    if (!next(tok)) fail(fmt::format("the file ends inside {}", what));
    return tok;
  }
  // Skips to the $end of the current command.
  void skip_command(std::string_view what) {
    std::string tok;
    while (next(tok))
      if (tok == "$end") return;
    fail(fmt::format("the file ends inside {}", what));
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw FileError(fmt::format("{}: malformed VCD: {}", shown_, why));
  }

 private:
  bool refill() {
    len_ = std::fread(buf_.data(), 1, buf_.size(), f_);
    pos_ = 0;
    if (len_ == 0 && std::ferror(f_)) fail("read error");
    return len_ > 0;
  }
  std::string shown_;
  std::FILE* f_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, len_ = 0;
};

// Reads a $var command after its keyword.
VcdVar parse_var(Tokens& in, const std::vector<std::string>& scopes) {
  VcdVar v;
  v.scopes = scopes;
  v.type = in.expect("$var");
  const std::string width = in.expect("$var");
  char* end = nullptr;
  const unsigned long w = std::strtoul(width.c_str(), &end, 10);
  if (*end != '\0' || w == 0 || w > (1u << 24)) in.fail(fmt::format("bad width '{}'", width));
  v.width = static_cast<unsigned>(w);
  v.id = in.expect("$var");
  v.name = in.expect("$var");
  for (std::string tok = in.expect("$var"); tok != "$end"; tok = in.expect("$var")) v.range += tok;
  return v;
}

// Header commands other than $scope, $upscope, $var and $enddefinitions.
void skip_header_command(Tokens& in, const std::string& tok) {
  if (tok.empty() || tok[0] != '$') in.fail(fmt::format("unexpected '{}' in the header", tok));
  in.skip_command(tok);
}

// "$timescale 100ps $end" or "$timescale 100 ps $end" -> -10 (seconds = 10^exp).
int timescale_exponent(Tokens& in) {
  std::string text;
  for (std::string tok = in.expect("$timescale"); tok != "$end"; tok = in.expect("$timescale"))
    text += tok;
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  static const std::map<std::string, int> kUnits = {{"s", 0},   {"ms", -3},  {"us", -6},
                                                    {"ns", -9}, {"ps", -12}, {"fs", -15}};
  static const std::map<std::string, int> kMultipliers = {{"1", 0}, {"10", 1}, {"100", 2}};
  const auto u = kUnits.find(text.substr(digits));
  const auto m = kMultipliers.find(digits == 0 ? "1" : text.substr(0, digits));
  if (u == kUnits.end() || m == kMultipliers.end()) in.fail(fmt::format("timescale '{}'", text));
  return u->second + m->second;
}

fstVarType fst_var_type(const std::string& t) {
  static const std::map<std::string, fstVarType> kTypes = {
      {"event", FST_VT_VCD_EVENT},     {"integer", FST_VT_VCD_INTEGER},
      {"parameter", FST_VT_VCD_PARAMETER}, {"real", FST_VT_VCD_REAL},
      {"real_parameter", FST_VT_VCD_REAL_PARAMETER}, {"reg", FST_VT_VCD_REG},
      {"supply0", FST_VT_VCD_SUPPLY0}, {"supply1", FST_VT_VCD_SUPPLY1},
      {"time", FST_VT_VCD_TIME},       {"tri", FST_VT_VCD_TRI},
      {"triand", FST_VT_VCD_TRIAND},   {"trior", FST_VT_VCD_TRIOR},
      {"trireg", FST_VT_VCD_TRIREG},   {"tri0", FST_VT_VCD_TRI0},
      {"tri1", FST_VT_VCD_TRI1},       {"wand", FST_VT_VCD_WAND},
      {"wire", FST_VT_VCD_WIRE},       {"wor", FST_VT_VCD_WOR},
      {"realtime", FST_VT_VCD_REALTIME}};
  const auto it = kTypes.find(t);
  return it == kTypes.end() ? FST_VT_VCD_WIRE : it->second;
}

fstScopeType fst_scope_type(const std::string& t) {
  static const std::map<std::string, fstScopeType> kTypes = {
      {"module", FST_ST_VCD_MODULE}, {"task", FST_ST_VCD_TASK},   {"function", FST_ST_VCD_FUNCTION},
      {"begin", FST_ST_VCD_BEGIN},   {"fork", FST_ST_VCD_FORK},   {"struct", FST_ST_VCD_STRUCT},
      {"union", FST_ST_VCD_UNION},   {"interface", FST_ST_VCD_INTERFACE}};
  const auto it = kTypes.find(t);
  return it == kTypes.end() ? FST_ST_VCD_MODULE : it->second;
}

bool is_real(fstVarType t) {
  return t == FST_VT_VCD_REAL || t == FST_VT_VCD_REAL_PARAMETER || t == FST_VT_VCD_REALTIME;
}

// Closes an FST writer on every path.
struct FstWriter {
  void* ctx;
  ~FstWriter() {
    if (ctx != nullptr) fstWriterClose(ctx);
  }
};

// Scratch files of an FST conversion: hidden, beside the target, this process's.
std::string scratch_base_for(const std::string& base) {
  const fs::path p(base);
  return (p.parent_path() / fmt::format(".{}.{}.scratch", p.filename().string(), ::getpid()))
      .string();
}

}  // namespace

std::string strip_extension(const std::string& path, const std::string& ext) {
  if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
    return path.substr(0, path.size() - ext.size());
  return path;
}

// ---- VCD -----------------------------------------------------------------------

std::string VcdVar::full_name() const {
  std::string s;
  for (const std::string& sc : scopes) s += sc + ".";
  return s + name + range;
}

std::vector<VcdVar> read_vcd_header(const std::string& path) {
  Tokens in(path, path);
  std::vector<VcdVar> vars;
  std::vector<std::string> scopes;
  std::string tok;
  while (in.next(tok)) {
    if (tok == "$scope") {
      in.expect("$scope");
      scopes.push_back(in.expect("$scope"));
      in.skip_command("$scope");
    } else if (tok == "$upscope") {
      if (scopes.empty()) in.fail("$upscope without $scope");
      scopes.pop_back();
      in.skip_command("$upscope");
    } else if (tok == "$var") {
      vars.push_back(parse_var(in, scopes));
    } else if (tok == "$enddefinitions") {
      return vars;
    } else {
      skip_header_command(in, tok);
    }
  }
  in.fail("no $enddefinitions");
}

void convert_vcd_to_fst(const std::string& vcd_path, const std::string& fst_path,
                        const std::string& shown_path) {
  Tokens in(vcd_path, shown_path);
  const RemoveOnSignal hier_guard(fst_path + ".hier");  // fstapi's scratch file, removed on close
  FstWriter w{fstWriterCreate(fst_path.c_str(), 1)};
  if (w.ctx == nullptr)
    throw FileError(fmt::format("{}: cannot write: {}", shown_path, std::strerror(errno)));
  // Fixed header text: equal runs give identical files (fstapi would write the wall-clock date).
  fstWriterSetDate(w.ctx, "(none: reproducible output)");
  fstWriterSetVersion(w.ctx, "tpu-sim");
  fstWriterSetPackType(w.ctx, FST_WR_PT_LZ4);
  fstWriterSetFileType(w.ctx, FST_FT_VERILOG);

  struct Signal {
    fstHandle handle;
    unsigned width;
    bool real;
  };
  std::unordered_map<std::string, Signal> by_id;
  std::string tok;
  int depth = 0;
  bool defined = false;
  while (!defined && in.next(tok)) {
    if (tok == "$scope") {
      const std::string type = in.expect("$scope");
      const std::string name = in.expect("$scope");
      in.skip_command("$scope");
      fstWriterSetScope(w.ctx, fst_scope_type(type), name.c_str(), nullptr);
      ++depth;
    } else if (tok == "$upscope") {
      if (depth-- == 0) in.fail("$upscope without $scope");
      in.skip_command("$upscope");
      fstWriterSetUpscope(w.ctx);
    } else if (tok == "$var") {
      const VcdVar v = parse_var(in, {});
      const fstVarType type = fst_var_type(v.type);
      // As Verilator's FST writer names vectors: "pc [31:0]".
      const std::string name = v.range.empty() ? v.name : v.name + " " + v.range;
      const auto it = by_id.find(v.id);
      const fstHandle alias = it == by_id.end() ? 0 : it->second.handle;
      if (it != by_id.end() && it->second.width != v.width)
        in.fail(fmt::format("'{}' is declared with widths {} and {}", v.id, it->second.width, v.width));
      const fstHandle h =
          fstWriterCreateVar(w.ctx, type, FST_VD_IMPLICIT, v.width, name.c_str(), alias);
      if (it == by_id.end()) by_id.emplace(v.id, Signal{h, v.width, is_real(type)});
    } else if (tok == "$timescale") {
      fstWriterSetTimescale(w.ctx, timescale_exponent(in));
    } else if (tok == "$enddefinitions") {
      in.skip_command(tok);
      defined = true;
    } else {
      skip_header_command(in, tok);
    }
  }
  if (!defined) in.fail("no $enddefinitions");
  if (depth != 0) in.fail("unbalanced $scope");

  const auto signal = [&](const std::string& id) -> const Signal& {
    const auto it = by_id.find(id);
    if (it == by_id.end()) in.fail(fmt::format("a change of undeclared '{}'", id));
    return it->second;
  };
  std::string value, id;
  std::uint64_t last_time = 0;
  while (in.next(tok)) {
    const char c = tok[0];
    if (c == '#') {
      char* end = nullptr;
      const std::uint64_t t = std::strtoull(tok.c_str() + 1, &end, 10);
      if (*end != '\0' || tok.size() == 1) in.fail(fmt::format("bad time '{}'", tok));
      if (t < last_time) in.fail(fmt::format("time goes back to {}", t));
      last_time = t;
      fstWriterEmitTimeChange(w.ctx, t);
    } else if (c == '$') {
      // $dumpvars, $dumpall, $dumpon, $dumpoff open a block of changes that
      // ends in $end; $comment has text to skip.
      if (tok == "$comment") in.skip_command(tok);
    } else if (c == 'b' || c == 'B') {
      id = in.expect("a value change");
      const Signal& s = signal(id);
      value.assign(tok, 1, std::string::npos);
      if (value.empty() || value.size() > s.width)
        in.fail(fmt::format("value '{}' of '{}' does not fit {}", tok, id, plural(s.width, "bit")));
      for (char& b : value) {
        b = static_cast<char>(std::tolower(static_cast<unsigned char>(b)));
        if (b != '0' && b != '1' && b != 'x' && b != 'z') in.fail(fmt::format("bad value '{}'", tok));
      }
      // IEEE 1364: left-extend with 0, or with x or z when that is the leftmost bit.
      const char pad = value[0] == '1' ? '0' : value[0];
      value.insert(0, s.width - value.size(), pad);
      fstWriterEmitValueChange(w.ctx, s.handle, value.data());
    } else if (c == 'r' || c == 'R') {
      id = in.expect("a value change");
      const Signal& s = signal(id);
      char* end = nullptr;
      double d = std::strtod(tok.c_str() + 1, &end);
      if (*end != '\0') in.fail(fmt::format("bad real value '{}'", tok));
      if (!s.real) in.fail(fmt::format("a real value for '{}'", id));
      fstWriterEmitValueChange(w.ctx, s.handle, &d);
    } else if (std::strchr("01xXzZ", c) != nullptr) {
      const Signal& s = signal(tok.substr(1));
      const char b = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      // A scalar change of a vector sets all of it (left-extension, as above).
      value.assign(s.width, b == '1' ? '0' : b);
      value.back() = b;
      fstWriterEmitValueChange(w.ctx, s.handle, value.data());
    } else {
      in.fail(fmt::format("unexpected '{}'", tok));
    }
  }
  const bool seek_failed = fstWriterGetFseekFailed(w.ctx) != 0;
  fstWriterClose(w.ctx);
  w.ctx = nullptr;
  std::error_code ec;
  if (seek_failed || fs::file_size(fst_path, ec) == 0 || ec)
    throw FileError(fmt::format("{}: write failed", shown_path));
}

// ---- GTKWave save file of the RTL ----------------------------------------------

std::string rtl_save_file(const std::string& dumpfile, const std::vector<VcdVar>& vars) {
  const auto& kUnits = isa::kUnitNames;
  // tpu_core's instance: the shallowest scope with a controller in it
  // (Verilator nests it in a scope of the model's name, with the ports).
  std::vector<std::string> core;
  bool found = false;
  for (const VcdVar& v : vars)
    for (std::size_t i = 0; i < v.scopes.size(); ++i)
      if (v.scopes[i] == kUnits[0] && (!found || i < core.size())) {
        core.assign(v.scopes.begin(), v.scopes.begin() + static_cast<std::ptrdiff_t>(i));
        found = true;
      }
  const auto in_scope = [](const VcdVar& v, const std::vector<std::string>& scope) {
    return v.scopes == scope;
  };
  // Constants (Verilator declares parameters as wires; rtl/ names them in
  // CamelCase, signals in snake_case) and array elements are left to the
  // hierarchy browser.
  const auto listed = [](const VcdVar& v) {
    return v.type != "parameter" && !std::isupper(static_cast<unsigned char>(v.name[0])) &&
           v.name.find('[') == std::string::npos;
  };
  std::vector<model::GtkwSignal> signals;
  std::string clock;
  for (const VcdVar& v : vars)
    if (in_scope(v, core) && v.name == "clk_i") clock = v.full_name();
  for (const VcdVar& v : vars)
    if (in_scope(v, core) && listed(v) && v.name != "clk_i")
      signals.push_back({"tpu_core", v.full_name(), v.width});
  for (const std::string_view name : kUnits) {
    const std::string unit(name);
    std::vector<std::string> scope = core;
    scope.push_back(unit);
    for (const VcdVar& v : vars)
      if (in_scope(v, scope) && listed(v)) signals.push_back({unit, v.full_name(), v.width});
  }
  return model::gtkw_save_file(dumpfile, clock, signals);
}

// ---- the files of one waveform -------------------------------------------------

RtlWaveFiles::RtlWaveFiles(const std::string& vcd_path)
    : base_(strip_extension(vcd_path, ".vcd")),
      vcd_(is_special_file(vcd_path) ? vcd_path : base_ + ".vcd") {}

void RtlWaveFiles::finish() {
  if (vcd_.special()) {  // /dev/stdout, a FIFO: no place for a save file beside it
    vcd_.commit();
    return;
  }
  const std::vector<VcdVar> vars = read_vcd_header(vcd_.path());
  vcd_.commit();
  write_file_atomic(base_ + ".gtkw", rtl_save_file(base_ + ".vcd", vars));
}

FstFromVcd::FstFromVcd(const std::string& fst_path)
    : base_(strip_extension(fst_path, ".fst")),
      target_(is_special_file(fst_path) ? fst_path : base_ + ".fst"),
      // A special file's folder (/dev) is no place for scratch files.
      scratch_base_(scratch_base_for(
          is_special_file(target_) ? (fs::path(temp_folder()) / fs::path(base_).filename()).string()
                                   : base_)),
      scratch_vcd_(scratch_base_ + ".vcd"),
      guard_vcd_(scratch_vcd_),
      guard_gtkw_(scratch_base_ + ".gtkw") {
  // Fail now, naming the user's file, rather than in the engine naming a scratch file.
  const PendingFile probe(target_);
}

FstFromVcd::~FstFromVcd() { remove_scratch(); }

void FstFromVcd::remove_scratch() {
  std::error_code ec;
  fs::remove(scratch_vcd_, ec);
  fs::remove(scratch_base_ + ".gtkw", ec);
}

void FstFromVcd::finish() {
  PendingFile fst(target_);
  convert_vcd_to_fst(scratch_vcd_, fst.path(), fst.target());
  if (fst.special()) {  // /dev/stdout, a FIFO: no place for a save file beside it
    remove_scratch();
    fst.commit();
    return;
  }
  // The engine's save file, opening the FST instead of the scratch VCD.
  std::string save = read_file_text(scratch_base_ + ".gtkw");
  const std::size_t at = save.find("[dumpfile] ");
  if (at != std::string::npos) {
    const std::size_t eol = save.find('\n', at);
    save.replace(at, eol == std::string::npos ? std::string::npos : eol - at,
                 fmt::format("[dumpfile] \"{}\"", fs::absolute(fst.target()).string()));
  }
  remove_scratch();
  fst.commit();
  write_file_atomic(base_ + ".gtkw", save);
}

}  // namespace tpu::wave
