// What every fuzz target shares: a property check that stops the fuzzer with
// a message (libFuzzer then saves the input as a crash), and the checks on
// the one-line error messages every tool prints.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

// Aborts with `what` when `cond` is false; libFuzzer reports it as a crash.
#define FUZZ_CHECK(cond, what)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: property failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                              \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

namespace tpu::fuzz {

// Error messages are printed as one line after "tool: error: ".
inline bool one_line(std::string_view message) {
  return !message.empty() && message.find('\n') == std::string_view::npos;
}

}  // namespace tpu::fuzz
