// The memories' storage (model/memories.h): zeroed without being touched,
// copies and comparisons that visit only the touched pages, and tpuv1's
// 8 GiB weight memory at the cost of what a run writes.
//
// Expected values come from the writes the tests make (a position written
// holds its value, every other one reads zero) and from the kernel's own
// account of the process's resident memory (/proc/self/statm), not from
// touched_runs().
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <vector>

#include "config/arch_config.h"
#include "model/memories.h"

using namespace tpu;

namespace {

// Resident memory of this process in bytes (statm's second field, pages).
std::uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

bool pagemap_readable() { return std::ifstream("/proc/self/pagemap").good(); }

constexpr std::size_t kHugePage = std::size_t{2} << 20;

// Positions to write in a memory of `size` elements: both ends, the middle and
// a few random ones, far apart.
std::vector<std::size_t> positions(std::size_t size, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::size_t> p = {0, size / 2, size - 1};
  for (int i = 0; i < 5; ++i) p.push_back(rng() % size);
  return p;
}

}  // namespace

TEST_CASE("tpuv1's 8 GiB weight memory costs only what is touched", "[memories]") {
  const ArchConfig cfg = preset_config("tpuv1");
  REQUIRE(cfg.weight_tiles * cfg.array_n * cfg.array_n == 8ull << 30);
  const std::uint64_t before = resident_bytes();
  model::Memories mem(cfg);
  const std::size_t tile = cfg.array_n * cfg.array_n;
  const std::vector<std::size_t> at = positions(mem.weights.data().size(), 1);
  for (std::size_t i = 0; i < at.size(); ++i) mem.weights.data()[at[i]] = static_cast<std::int8_t>(i + 1);
  // A copy, the way tpu-sim keeps the initial memories for a second engine.
  const model::Memories copy = mem;
  for (std::size_t i = 0; i < at.size(); ++i) {
    CAPTURE(at[i]);
    CHECK(copy.weights.data()[at[i]] == static_cast<std::int8_t>(i + 1));
    // The element after each write (zero unless it is another write).
    const std::size_t next = (at[i] + 1) % copy.weights.data().size();
    bool written = false;
    for (std::size_t p : at) written = written || p == next;
    if (!written) CHECK(copy.weights.data()[next] == 0);
  }
  CHECK(copy.weights.data()[3 * tile + 17] == 0);
  CHECK(mem.weights.same_contents(copy.weights));
  // Two memories of this size, eight writes each: at most a few huge pages
  // each (the kernel may back a touched page with 2 MiB), not gigabytes.
  const std::uint64_t grown = resident_bytes() - before;
  INFO("resident memory grew by " << grown << " bytes");
  if (pagemap_readable()) CHECK(grown < 64ull << 20);
}

TEST_CASE("A copy and a comparison visit the touched pages of either memory", "[memories]") {
  // Large enough to be a mapping (>= 1 MiB), int32 elements, a width that
  // does not divide a page.
  model::RowMemory<std::int32_t> a(1u << 16, 12);
  REQUIRE(a.data().size() * sizeof(std::int32_t) >= (std::size_t{1} << 20));
  if (pagemap_readable()) CHECK(a.touched_runs().empty());
  for (std::int32_t v : {a.data()[0], a.data()[a.data().size() / 3], a.data()[a.data().size() - 1]}) CHECK(v == 0);

  const std::vector<std::size_t> at = positions(a.data().size(), 2);
  for (std::size_t i = 0; i < at.size(); ++i) a.data()[at[i]] = -1 - static_cast<std::int32_t>(i);
  model::RowMemory<std::int32_t> b = a;
  CHECK(a.same_contents(b));
  CHECK_FALSE(a.first_difference(b).has_value());
  for (std::size_t i = 0; i < at.size(); ++i) CHECK(b.data()[at[i]] == a.data()[at[i]]);

  // Every written position lies in a touched run, and the runs are few.
  const auto runs = a.touched_runs();
  std::size_t touched = 0;
  for (const auto& [first, count] : runs) touched += count;
  for (std::size_t p : at) {
    bool inside = false;
    for (const auto& [first, count] : runs) inside = inside || (p >= first && p < first + count);
    CHECK(inside);
  }
  if (pagemap_readable()) CHECK(touched * sizeof(std::int32_t) <= at.size() * kHugePage);

  // A difference in a page only one side touched, found from either side,
  // and the first of two.
  const std::size_t late = a.data().size() - 5, early = 1000;
  SECTION("in b only") {
    b.data()[late] = 7;
    CHECK(a.first_difference(b) == late);
    CHECK(b.first_difference(a) == late);
    b.data()[early] = 9;
    CHECK(a.first_difference(b) == early);
  }
  SECTION("in a only") {
    a.data()[early] = 3;
    CHECK(b.first_difference(a) == early);
    CHECK_FALSE(a.same_contents(b));
  }
  SECTION("a zero written where the other memory is untouched is no difference") {
    REQUIRE(a.data()[late] == 0);
    b.data()[late] = 0;
    CHECK(a.same_contents(b));
    CHECK(b.same_contents(a));
  }
}

TEST_CASE("Small memories compare and copy whole", "[memories]") {
  model::RowMemory<std::int8_t> a(16, 8);
  CHECK(a.touched_runs() == std::vector<std::pair<std::size_t, std::size_t>>{{0, 128}});
  a.data()[127] = 5;
  model::RowMemory<std::int8_t> b = a;
  CHECK(b.data()[127] == 5);
  CHECK(a.same_contents(b));
  b.data()[3] = -2;
  CHECK(a.first_difference(b) == 3);
  CHECK_FALSE(a.same_contents(model::RowMemory<std::int8_t>(8, 16)));  // same bytes, other shape
}
