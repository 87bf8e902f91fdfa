// The host's int8 multiply-accumulate ceiling, measured: the rate the best
// int8 dot-product instruction this CPU has reaches in a loop with nothing
// else to do, on every core at once. tpu-bench reports each engine's MAC/s
// as a fraction of it, measured in the same run (docs/performance.md), so a
// loaded or slower machine lowers both.
#pragma once

#include <string>

namespace tpu::bench {

struct Int8Ceiling {
  std::string instruction;  // "VPDPBUSD (AVX-512 VNNI)", "VPMADDUBSW (AVX2)" or "" (none measured)
  unsigned threads = 0;
  double macs_per_s = 0;  // all threads together
};

// Runs the loop on `threads` threads for about `seconds`.
Int8Ceiling measure_int8_ceiling(unsigned threads, double seconds);

}  // namespace tpu::bench
