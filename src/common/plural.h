// Number agreement for the counts in messages: "1 operand" but "2 operands"
// and "0 operands", "row 5" but "rows 5..7". Every message that prints a
// count next to a noun goes through these, so none says "1 operands".
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace tpu {

// `one` if n is 1, else `many`: the word (a noun, a verb) that agrees with n.
template <typename Int>
constexpr std::string_view agree(Int n, std::string_view one, std::string_view many) {
  static_assert(std::is_integral_v<Int> && !std::is_same_v<Int, bool>, "a count");
  return n == 1 ? one : many;
}

// n and the noun that agrees with it: plural(1, "operand") is "1 operand",
// plural(2, "operand") "2 operands". `one` is the singular; the plural adds
// an "s" unless `many` is given.
template <typename Int>
std::string plural(Int n, std::string_view one) {
  return fmt::format("{} {}{}", n, one, agree(n, "", "s"));
}
template <typename Int>
std::string plural(Int n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, agree(n, one, many));
}

// The `count` items from `first` on: plural_range(5, 1, "row") is "row 5",
// plural_range(5, 3, "row") "rows 5..7". The plural adds an "s" to `one`.
inline std::string plural_range(std::uint64_t first, std::uint64_t count, std::string_view one) {
  if (count == 1) return fmt::format("{} {}", one, first);
  return fmt::format("{}s {}..{}", one, first, first + count - 1);
}

}  // namespace tpu
