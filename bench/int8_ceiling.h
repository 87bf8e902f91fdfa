// The host's int8 multiply-accumulate ceiling, measured: the rate the best
// int8 dot-product instruction this CPU has reaches in a loop with nothing
// else to do, on every core at once. tpu-bench reports each engine's MAC/s
// as a fraction of it, measured in the same run (docs/performance.md). A
// burst taken while another process holds a core measures less than the
// CPU can do, so tpu-bench takes the best of several bursts before and
// after its measurements: a loaded run's fractions are then conservative.
#pragma once

#include <string>

namespace tpu::bench {

struct Int8Ceiling {
  std::string instruction;  // "VPDPBUSD (AVX-512 VNNI)", "VPMADDUBSW (AVX2)" or "" (none measured)
  unsigned threads = 0;
  double macs_per_s = 0;  // all threads together
  unsigned bursts = 1;    // measurements this is the best of
};

// Runs the loop on `threads` threads for about `seconds`.
Int8Ceiling measure_int8_ceiling(unsigned threads, double seconds);

// The best of `bursts` measurements of `seconds` each.
Int8Ceiling best_int8_ceiling(unsigned threads, double seconds, unsigned bursts);

// The better of two measurements (their bursts added).
Int8Ceiling better_ceiling(const Int8Ceiling& a, const Int8Ceiling& b);

}  // namespace tpu::bench
