#include "asm/diagnostics.h"

#include <fmt/format.h>

namespace tpu::assembler {
namespace {

std::string_view nth_line(std::string_view source, int line) {
  std::size_t start = 0;
  for (int i = 1; i < line; ++i) {
    const std::size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
  }
  std::size_t end = source.find('\n', start);
  if (end == std::string_view::npos) end = source.size();
  std::string_view s = source.substr(start, end - start);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

}  // namespace

std::string format_diagnostic(std::string_view filename, std::string_view source,
                              const Diagnostic& d) {
  const std::string_view text = nth_line(source, d.loc.line);
  // Keep tabs in the caret line so the caret lines up under the source.
  std::string pad;
  for (int i = 0; i + 1 < d.loc.col && static_cast<std::size_t>(i) < text.size(); ++i)
    pad += text[static_cast<std::size_t>(i)] == '\t' ? '\t' : ' ';
  return fmt::format("{}:{}:{}: error: {}\n{}\n{}^\n", filename, d.loc.line, d.loc.col, d.message,
                     text, pad);
}

std::string format_diagnostics(std::string_view filename, std::string_view source,
                               const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const Diagnostic& d : diags) out += format_diagnostic(filename, source, d);
  return out;
}

}  // namespace tpu::assembler
