// Diagnostics in the GCC/Clang form: "file:line:col: error: message", then
// the source line and a caret under the column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpu::assembler {

struct SourceLoc {
  int line = 0;  // 1-based
  int col = 0;   // 1-based, in bytes
};

struct Diagnostic {
  SourceLoc loc;
  std::string message;
};

// Renders one diagnostic; `source` is the whole file text.
std::string format_diagnostic(std::string_view filename, std::string_view source,
                              const Diagnostic& d);
std::string format_diagnostics(std::string_view filename, std::string_view source,
                               const std::vector<Diagnostic>& diags);

}  // namespace tpu::assembler
