// Integer helpers shared by the model, the compilers and the tools.
#pragma once

#include <cstdint>

namespace tpu {

// ceil(a / b) for b > 0, without overflow for any a.
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

}  // namespace tpu
