#include "int8_ceiling.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TPU_X86_CEILING 1
#endif

namespace tpu::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Twelve independent accumulators: enough to hide the instruction's latency
// (4-5 cycles) on two pipes. Each step is 12 instructions; the result is
// returned so that the loop is not removed.
constexpr int kChains = 12;

#ifdef TPU_X86_CEILING
// VPDPBUSD: 64 unsigned x signed byte products summed into 16 int32 lanes.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) std::int64_t vnni_loop(std::uint64_t steps) {
  __m512i acc[kChains];
  for (auto& a : acc) a = _mm512_setzero_si512();
  const __m512i x = _mm512_set1_epi8(3), w = _mm512_set1_epi8(-2);
  for (std::uint64_t i = 0; i < steps; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], x, w);
  }
  __m512i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  alignas(64) std::int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  return lanes[0];
}

// VPMADDUBSW: 32 unsigned x signed byte products summed in pairs into 16
// int16 lanes (the add that a full dot product also needs is not counted).
__attribute__((target("avx2"))) std::int64_t avx2_loop(std::uint64_t steps) {
  __m256i acc[kChains];
  for (auto& a : acc) a = _mm256_setzero_si256();
  const __m256i x = _mm256_set1_epi8(3), w = _mm256_set1_epi8(-2);
  for (std::uint64_t i = 0; i < steps; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(x, w));
  }
  __m256i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_epi16(sum, acc[c]);
  alignas(32) std::int16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  return lanes[0];
}
#endif

}  // namespace

Int8Ceiling measure_int8_ceiling(unsigned threads, double seconds) {
  Int8Ceiling c;
  c.threads = std::max(threads, 1u);
  std::int64_t (*loop)(std::uint64_t) = nullptr;
  double macs_per_step = 0;
#ifdef TPU_X86_CEILING
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni")) {
    c.instruction = "VPDPBUSD (AVX-512 VNNI)";
    loop = vnni_loop;
    macs_per_step = kChains * 64.0;
  } else if (__builtin_cpu_supports("avx2")) {
    c.instruction = "VPMADDUBSW (AVX2)";
    loop = avx2_loop;
    macs_per_step = kChains * 32.0;
  }
#endif
  if (!loop) return c;
  // Each thread runs batches of steps until its time is up and counts them.
  constexpr std::uint64_t kBatch = 1 << 16;
  std::vector<std::uint64_t> steps(c.threads, 0);
  std::vector<std::int64_t> sink(c.threads, 0);
  const auto work = [&](unsigned t) {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    do {
      sink[t] += loop(kBatch);
      steps[t] += kBatch;
    } while (Clock::now() < end);
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < c.threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (std::thread& t : pool) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::uint64_t total = 0;
  for (std::uint64_t s : steps) total += s;
  c.macs_per_s = static_cast<double>(total) * macs_per_step / elapsed;
  return c;
}

Int8Ceiling best_int8_ceiling(unsigned threads, double seconds, unsigned bursts) {
  Int8Ceiling best = measure_int8_ceiling(threads, seconds);
  for (unsigned i = 1; i < bursts; ++i) best = better_ceiling(best, measure_int8_ceiling(threads, seconds));
  return best;
}

Int8Ceiling better_ceiling(const Int8Ceiling& a, const Int8Ceiling& b) {
  Int8Ceiling c = a.macs_per_s >= b.macs_per_s ? a : b;
  c.bursts = a.bursts + b.bursts;
  return c;
}

}  // namespace tpu::bench
