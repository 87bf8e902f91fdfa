// The RTL core's memory ports (docs/microarchitecture.md, "RTL"): how many
// host rows and weight tile rows a build's ports move in a cycle. tpu-gen
// config-pkg writes them into each build's configuration package; the engine
// checks a run's bandwidths against them.
//
// The RTL core takes the channels' latencies and bandwidths as inputs at run
// time; its ports move up to this many host rows (N bytes) and weight tile
// rows a cycle, so a build runs any bandwidth up to that many rows' bytes. A
// build for configuration `c` is made wide enough for c's own bandwidths and
// for at least two rows (co-simulation draws bandwidths above N), the weight
// port for at most a tile's N rows (any Bw >= N * N streams a tile in one cycle).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/math.h"
#include "config/arch_config.h"

namespace tpu::rtl {

inline std::uint64_t host_rows_per_cycle(const ArchConfig& c) {
  return std::max<std::uint64_t>(2, ceil_div(c.host_bytes_per_cycle, c.array_n));
}
inline std::uint64_t weight_rows_per_cycle(const ArchConfig& c) {
  return std::min<std::uint64_t>(c.array_n,
                                 std::max<std::uint64_t>(2, ceil_div(c.weight_bytes_per_cycle, c.array_n)));
}
// The weight bandwidth the RTL core is given: Bw, or N * N when larger (the
// same timing: a tile streams in one cycle).
inline std::uint64_t core_weight_bytes_per_cycle(const ArchConfig& c) {
  return std::min(c.weight_bytes_per_cycle, c.array_n * c.array_n);
}

}  // namespace tpu::rtl
