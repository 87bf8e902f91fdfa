// The test tiers (docs/development.md, "Test tiers") inside a test program.
// Under the sanitizers (TPU_SANITIZED, set by tests/CMakeLists.txt for the
// programs that use this) the default tier runs reduced forms of the
// heaviest test cases; TPU_TEST_FULL=1 in the environment (tools/setup.sh
// test-all sets it) runs them whole there too. The plain build always runs
// them whole.
#pragma once

#include <cstdlib>
#include <cstring>

namespace tpu::test {

inline bool reduced_tier() {
  const char* full = std::getenv("TPU_TEST_FULL");
  return TPU_SANITIZED && (full == nullptr || std::strcmp(full, "1") != 0);
}

}  // namespace tpu::test
