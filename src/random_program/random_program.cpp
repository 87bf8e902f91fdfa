// tpu-cosim's machines and memory contents (random_program.h): the memory
// channels' timing and the windows' values, each from a stream of its own,
// apart from the program's.
#include "random_program/random_program.h"

#include <algorithm>
#include <random>
#include <type_traits>

namespace tpu::testing {

ArchConfig random_timing(const ArchConfig& cfg, std::uint64_t host_max, std::uint64_t weight_max,
                         std::uint64_t seed) {
  // A stream of its own, apart from the program's and the memories'.
  std::mt19937_64 rng(seed ^ 0x7469'6d69'6e67ull);
  const auto pick = [&](std::uint64_t own, std::uint64_t lo, std::uint64_t hi) {
    own = std::clamp(own, lo, hi);
    switch (std::uniform_int_distribution<int>(0, 7)(rng)) {
      case 0: return own;
      case 1: return lo;
      case 2: return hi;
      default: return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
    }
  };
  ArchConfig out = cfg;
  const std::uint64_t narrow = std::max<std::uint64_t>(1, cfg.array_n / 4);
  out.host_latency = pick(cfg.host_latency, 0, std::max<std::uint64_t>(8, 2 * cfg.host_latency));
  out.host_bytes_per_cycle = pick(cfg.host_bytes_per_cycle, std::min(narrow, host_max), host_max);
  out.weight_latency = pick(cfg.weight_latency, 0, std::max<std::uint64_t>(8, 2 * cfg.weight_latency));
  out.weight_bytes_per_cycle = pick(cfg.weight_bytes_per_cycle, std::min(narrow, weight_max), weight_max);
  // Drawn last: the draws above are those of the seeds before HWT.
  out.host_layout_cycles = pick(cfg.host_layout_cycles, 0, 8);
  // After those: ub_weight_path on in three programs of four (RWU runs).
  out.ub_weight_path = std::uniform_int_distribution<int>(0, 3)(rng) != 0 ? 1 : 0;
  return out;
}

void random_memories(model::Memories& mem, std::uint64_t seed, const Windows& w) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  const auto fill = [&](auto* data, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i)
      data[i] = static_cast<std::remove_reference_t<decltype(data[0])>>(rng());
  };
  fill(mem.host.data().data(), w.host_rows * mem.host.width());
  fill(mem.weights.data().data(), w.weight_tiles * mem.weights.width());
  fill(mem.ub.data().data(), w.ub_rows * mem.ub.width());
  // Small accumulators, so that requantized values are not all saturated.
  for (std::size_t i = 0; i < w.acc_rows * mem.acc.width(); ++i)
    mem.acc.data()[i] = static_cast<std::int32_t>(rng() % 20001) - 10000;
}

}  // namespace tpu::testing
