#include "model/int8_gemm.h"

#include "model/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TPU_X86_KERNELS 1
#endif

namespace tpu::model {
namespace {

std::size_t round_up(std::size_t a, std::size_t b) { return (a + b - 1) / b * b; }

// Adds (or stores) one block of results; `tmp` holds mr x nr sums with row
// stride nr, of which columns j0 .. j0 + cols - 1 exist.
inline void write_block(const std::int32_t* tmp, std::size_t mr, std::size_t nr, std::size_t cols,
                        const std::int32_t* correction, std::int32_t* c, std::size_t n,
                        bool overwrite) {
  for (std::size_t r = 0; r < mr; ++r) {
    std::int32_t* out = c + r * n;
    for (std::size_t j = 0; j < cols; ++j) {
      const auto v = static_cast<std::uint32_t>(tmp[r * nr + j]) -
                     (correction ? static_cast<std::uint32_t>(correction[j]) : 0u);
      out[j] = static_cast<std::int32_t>(overwrite ? v : static_cast<std::uint32_t>(out[j]) + v);
    }
  }
}

// Columns j >= n_used of W are zero, so their sums are zero: an overwrite
// stores 0 there, an accumulation leaves them as they are.
inline void clear_unused_columns(std::size_t rows, const PackedWeights& w, std::int32_t* c,
                                 bool overwrite) {
  if (!overwrite || w.n_used == w.n) return;
  for (std::size_t i = 0; i < rows; ++i)
    std::fill(c + i * w.n + w.n_used, c + (i + 1) * w.n, 0);
}

// ---- scalar -----------------------------------------------------------------

void gemm_scalar(const std::int8_t* const* x, std::size_t rows, const PackedWeights& w,
                 std::int32_t* c, bool overwrite) {
  const std::size_t n = w.n;
  const std::int8_t* wt = w.bytes.data();
  std::vector<std::int32_t> tmp(n);
  for (std::size_t i = 0; i < rows; ++i) {
    std::fill(tmp.begin(), tmp.end(), 0);
    for (std::size_t k = 0; k < n; ++k) {
      const std::int32_t xv = x[i][k];
      if (xv == 0) continue;
      const std::int8_t* wr = wt + k * n;
      for (std::size_t j = 0; j < n; ++j) tmp[j] += xv * wr[j];
    }
    write_block(tmp.data(), 1, n, n, nullptr, c + i * n, n, overwrite);
  }
}

#ifdef TPU_X86_KERNELS

// ---- avx2: VPMADDWD on int16 pairs --------------------------------------------
// Packed: for each block of 16 columns, for each pair p of rows of W (k = 2p,
// 2p + 1), 16 int16 pairs (W[2p][j], W[2p+1][j]): 64 bytes.

constexpr std::size_t kAvx2Nr = 16, kAvx2Mr = 4;

template <std::size_t MR>
__attribute__((target("avx2"))) void avx2_block(const std::int16_t* xs, std::size_t kp,
                                                const std::int16_t* wp, std::size_t pairs,
                                                std::int32_t* tmp) {
  __m256i acc[MR][2];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (std::size_t p = 0; p < pairs; ++p) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + p * 32));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + p * 32 + 16));
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r) {
      std::int32_t pair;
      std::memcpy(&pair, xs + r * kp + 2 * p, sizeof pair);
      const __m256i xb = _mm256_set1_epi32(pair);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(xb, w0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(xb, w1));
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tmp + r * kAvx2Nr), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tmp + r * kAvx2Nr + 8), acc[r][1]);
  }
}

__attribute__((target("avx2"))) void gemm_avx2(const std::int8_t* const* x, std::size_t rows,
                                               const PackedWeights& w, std::int32_t* c,
                                               bool overwrite) {
  const std::size_t n = w.n, ku = w.k_used, kp = round_up(ku, 2), pairs = kp / 2;
  const auto* wp = reinterpret_cast<const std::int16_t*>(w.bytes.data());
  // Every element written once: the used inputs, then the pair's padding
  // (without clearing the whole buffer first, which was a memset of up to
  // rows * kp int16s per call).
  thread_local std::vector<std::int16_t> xs;
  xs.resize(rows * kp);
  for (std::size_t i = 0; i < rows; ++i) {
    std::int16_t* xi = xs.data() + i * kp;
    for (std::size_t k = 0; k < ku; ++k) xi[k] = x[i][k];
    for (std::size_t k = ku; k < kp; ++k) xi[k] = 0;
  }
  alignas(32) std::int32_t tmp[kAvx2Mr * kAvx2Nr];
  clear_unused_columns(rows, w, c, overwrite);
  for (std::size_t j0 = 0; j0 < w.n_used; j0 += kAvx2Nr) {
    const std::int16_t* wb = wp + (j0 / kAvx2Nr) * pairs * 32;
    const std::size_t cols = std::min(kAvx2Nr, w.n_used - j0);
    std::size_t i = 0;
    for (; i + kAvx2Mr <= rows; i += kAvx2Mr) {
      avx2_block<kAvx2Mr>(xs.data() + i * kp, kp, wb, pairs, tmp);
      write_block(tmp, kAvx2Mr, kAvx2Nr, cols, nullptr, c + i * n + j0, n, overwrite);
    }
    for (; i < rows; ++i) {
      avx2_block<1>(xs.data() + i * kp, kp, wb, pairs, tmp);
      write_block(tmp, 1, kAvx2Nr, cols, nullptr, c + i * n + j0, n, overwrite);
    }
  }
}

// ---- diagonal tiles: lane by lane, 8 int32 lanes per AVX2 step ---------------------
// c[i][j] (+)= x_i[j] * d[j] for j < n_used, with int32 wrap-around (VPMULLD
// and VPADDD keep the low 32 bits, as the PEs' additions do); the columns
// from n_used on are zero sums.

__attribute__((target("avx2"))) void gemm_diagonal(const std::int8_t* const* x, std::size_t rows,
                                                   const PackedWeights& w, std::int32_t* c, bool overwrite) {
  const std::size_t n = w.n, nu = w.n_used, vec = nu / 8 * 8;
  const std::int32_t* d = w.diag.data();
  clear_unused_columns(rows, w, c, overwrite);
  for (std::size_t i = 0; i < rows; ++i) {
    const std::int8_t* xi = x[i];
    std::int32_t* ci = c + i * n;
    std::size_t j = 0;
    for (; j < vec; j += 8) {
      std::int64_t bytes8;
      std::memcpy(&bytes8, xi + j, sizeof bytes8);
      const __m256i xv = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(bytes8));
      __m256i v = _mm256_mullo_epi32(xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + j)));
      if (!overwrite) v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ci + j)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ci + j), v);
    }
    for (; j < nu; ++j) {
      const auto v = static_cast<std::uint32_t>(xi[j] * d[j]);
      ci[j] = static_cast<std::int32_t>(overwrite ? v : static_cast<std::uint32_t>(ci[j]) + v);
    }
  }
}

// ---- avx512vnni: VPDPBUSD -------------------------------------------------------
// Packed: for each block of 32 columns, for each quad q of rows of W
// (k = 4q .. 4q + 3), 32 columns of 4 bytes (W[4q][j] .. W[4q+3][j]): 128 bytes.

constexpr std::size_t kVnniNr = 32, kVnniMr = 8;

#define TPU_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))

// MR rows x 32 columns: the sums, less the +128 offset's correction, stored
// into (or added to) C's columns j0 .. j0 + 31 under the masks (the columns
// that exist).
template <std::size_t MR>
TPU_VNNI_TARGET void vnni_block(const std::uint8_t* xu, std::size_t kp, const std::int8_t* wp,
                                std::size_t quads, __m512i corr0, __m512i corr1, __mmask16 m0,
                                __mmask16 m1, std::int32_t* c, std::size_t n, bool overwrite) {
  __m512i acc[MR][2];
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (std::size_t q = 0; q < quads; ++q) {
    const __m512i w0 = _mm512_loadu_si512(wp + q * 128);
    const __m512i w1 = _mm512_loadu_si512(wp + q * 128 + 64);
#pragma GCC unroll 8
    for (std::size_t r = 0; r < MR; ++r) {
      std::int32_t quad;
      std::memcpy(&quad, xu + r * kp + 4 * q, sizeof quad);
      const __m512i xb = _mm512_set1_epi32(quad);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], xb, w0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], xb, w1);
    }
  }
#pragma GCC unroll 8
  for (std::size_t r = 0; r < MR; ++r) {
    std::int32_t* out = c + r * n;
    __m512i v0 = _mm512_sub_epi32(acc[r][0], corr0), v1 = _mm512_sub_epi32(acc[r][1], corr1);
    if (!overwrite) {
      v0 = _mm512_add_epi32(v0, _mm512_maskz_loadu_epi32(m0, out));
      v1 = _mm512_add_epi32(v1, _mm512_maskz_loadu_epi32(m1, out + 16));
    }
    _mm512_mask_storeu_epi32(out, m0, v0);
    _mm512_mask_storeu_epi32(out + 16, m1, v1);
  }
}

// Rows are taken in panels of kVnniPanel: a panel's x + 128 (16 KiB at
// most) stays in the L1 cache while it meets every column block's weights.
constexpr std::size_t kVnniPanel = 64;

TPU_VNNI_TARGET void gemm_vnni(const std::int8_t* const* x, std::size_t rows,
                               const PackedWeights& w, std::int32_t* c, bool overwrite) {
  const std::size_t n = w.n, ku = w.k_used, kp = round_up(ku, 4), quads = kp / 4;
  clear_unused_columns(rows, w, c, overwrite);
  if (w.n_used == 0) return;
  alignas(64) std::uint8_t xu[kVnniPanel * 256];  // n <= 256 (the ISA's limit)
  std::vector<std::uint8_t> big;                  // for a larger n
  std::uint8_t* xp = xu;
  if (kVnniPanel * kp > sizeof xu) {
    big.resize(kVnniPanel * kp);
    xp = big.data();
  }
  for (std::size_t i0 = 0; i0 < rows; i0 += kVnniPanel) {
    const std::size_t pr = std::min(kVnniPanel, rows - i0);
    // x + 128 as unsigned bytes; the padding multiplies zero weights.
    for (std::size_t i = 0; i < pr; ++i) {
      std::uint8_t* out = xp + i * kp;
      const std::int8_t* in = x[i0 + i];
      for (std::size_t k = 0; k < ku; ++k)
        out[k] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(in[k]) ^ 0x80u);
      std::fill(out + ku, out + kp, std::uint8_t{0});
    }
    std::int32_t* cp = c + i0 * n;
    for (std::size_t j0 = 0; j0 < w.n_used; j0 += kVnniNr) {
      const std::int8_t* wb = w.bytes.data() + (j0 / kVnniNr) * quads * 128;
      const std::size_t cols = std::min(kVnniNr, w.n_used - j0);
      const auto m0 = static_cast<__mmask16>(cols >= 16 ? 0xffffu : (1u << cols) - 1u);
      const auto m1 = static_cast<__mmask16>(cols >= 32 ? 0xffffu : cols <= 16 ? 0u : (1u << (cols - 16)) - 1u);
      const __m512i corr0 = _mm512_loadu_si512(w.colsum.data() + j0);
      const __m512i corr1 = _mm512_loadu_si512(w.colsum.data() + j0 + 16);
      std::size_t i = 0;
      for (; i + kVnniMr <= pr; i += kVnniMr)
        vnni_block<kVnniMr>(xp + i * kp, kp, wb, quads, corr0, corr1, m0, m1, cp + i * n + j0, n, overwrite);
      for (; i + 4 <= pr; i += 4)
        vnni_block<4>(xp + i * kp, kp, wb, quads, corr0, corr1, m0, m1, cp + i * n + j0, n, overwrite);
      for (; i < pr; ++i)
        vnni_block<1>(xp + i * kp, kp, wb, quads, corr0, corr1, m0, m1, cp + i * n + j0, n, overwrite);
    }
  }
}

#endif  // TPU_X86_KERNELS

}  // namespace

const char* gemm_kernel_name(GemmKernel k) {
  switch (k) {
    case GemmKernel::Scalar:
      return "scalar";
    case GemmKernel::Avx2:
      return "avx2";
    case GemmKernel::Avx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

bool gemm_kernel_available(GemmKernel k) {
  switch (k) {
    case GemmKernel::Scalar:
      return true;
#ifdef TPU_X86_KERNELS
    case GemmKernel::Avx2:
      return __builtin_cpu_supports("avx2");
    case GemmKernel::Avx512Vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vnni");
#else
    default:
      return false;
#endif
  }
  return false;
}

GemmKernel best_gemm_kernel() {
  static const GemmKernel best = [] {
    if (const char* env = std::getenv("TPU_GEMM_KERNEL")) {
      for (GemmKernel k : {GemmKernel::Scalar, GemmKernel::Avx2, GemmKernel::Avx512Vnni})
        if (std::string_view(env) == gemm_kernel_name(k) && gemm_kernel_available(k)) return k;
    }
    for (GemmKernel k : {GemmKernel::Avx512Vnni, GemmKernel::Avx2})
      if (gemm_kernel_available(k)) return k;
    return GemmKernel::Scalar;
  }();
  return best;
}

PackedWeights pack_weights(const std::int8_t* w, std::size_t n, GemmKernel kernel) {
  PackedWeights p;
  p.kernel = kernel;
  p.n = n;
  // The used extent: one past the last row and the last column holding a
  // nonzero weight (each row scanned back from its end, 8 bytes at a time).
  for (std::size_t k = 0; k < n; ++k) {
    const std::int8_t* row = w + k * n;
    std::size_t j = n;
    for (; j >= 8; j -= 8) {
      std::uint64_t word;
      std::memcpy(&word, row + j - 8, sizeof word);
      if (word != 0) break;
    }
    while (j > 0 && row[j - 1] == 0) --j;
    if (j > 0) {
      p.k_used = k + 1;
      p.n_used = std::max(p.n_used, j);
    }
  }
  const std::size_t ku = p.k_used, nu = p.n_used;
  // Diagonal: only W[k][k] nonzero (then k_used = n_used). A dense tile fails
  // the check at its first row with an off-diagonal weight.
#ifdef TPU_X86_KERNELS
  if (kernel != GemmKernel::Scalar && ku == nu && ku > 0) {
    bool diagonal = true;
    for (std::size_t k = 0; k < ku && diagonal; ++k) {
      const std::int8_t* row = w + k * n;
      diagonal = std::all_of(row, row + k, [](std::int8_t v) { return v == 0; }) &&
                 std::all_of(row + k + 1, row + nu, [](std::int8_t v) { return v == 0; });
    }
    if (diagonal) {
      p.diagonal = true;
      p.diag.resize(nu);
      for (std::size_t j = 0; j < nu; ++j) p.diag[j] = w[j * n + j];
      return p;
    }
  }
#endif
  switch (kernel) {
    case GemmKernel::Scalar:
      p.bytes.assign(w, w + n * n);
      break;
    case GemmKernel::Avx2: {
      const std::size_t pairs = round_up(ku, 2) / 2, blocks = round_up(nu, 16) / 16;
      // Written in the packed order (int16 ((b * pairs + q) * 16 + jj) * 2 +
      // kk is w[2q + kk][16b + jj], zero outside the used extent): two rows'
      // 16 bytes interleaved into 32 contiguous int16s, where the loop in
      // row order before stored one int16 at a time at strides of 64 bytes.
      std::vector<std::int16_t> v(blocks * pairs * 32);
      std::int16_t* out = v.data();
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t j0 = b * 16, jn = std::min<std::size_t>(16, nu - j0);
        for (std::size_t q = 0; q < pairs; ++q, out += 32) {
          const std::int8_t* r0 = w + 2 * q * n + j0;  // 2q < ku
          const std::int8_t* r1 = 2 * q + 1 < ku ? w + (2 * q + 1) * n + j0 : nullptr;
          if (jn == 16 && r1) {  // a whole block of two rows
            for (std::size_t jj = 0; jj < 16; ++jj) {
              out[2 * jj] = r0[jj];
              out[2 * jj + 1] = r1[jj];
            }
            continue;
          }
          for (std::size_t jj = 0; jj < 16; ++jj) {
            out[2 * jj] = jj < jn ? r0[jj] : 0;
            out[2 * jj + 1] = jj < jn && r1 ? r1[jj] : 0;
          }
        }
      }
      p.bytes.resize(v.size() * 2);
      if (!v.empty()) std::memcpy(p.bytes.data(), v.data(), p.bytes.size());  // none for an all-zero tile
      break;
    }
    case GemmKernel::Avx512Vnni: {
      const std::size_t quads = round_up(ku, 4) / 4, blocks = round_up(nu, 32) / 32;
      // Written in the packed order (byte ((b * quads + q) * 32 + jj) * 4 + kk
      // is w[4q + kk][32b + jj], zero outside the used extent), and the column
      // sums row by row: both loops run over contiguous memory, where the
      // scatter in row order before wrote a byte at a time at strides of
      // 128 bytes (a pack per weight load; not measured on this branch's
      // machine, which has no AVX-512).
      p.bytes.resize(blocks * quads * 128);
      std::int8_t* out = p.bytes.data();
      for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t j0 = b * 32, jn = std::min<std::size_t>(32, nu - j0);
        for (std::size_t q = 0; q < quads; ++q) {
          const std::int8_t* rows[4];
          for (std::size_t kk = 0; kk < 4; ++kk) rows[kk] = 4 * q + kk < ku ? w + (4 * q + kk) * n + j0 : nullptr;
          if (jn == 32 && 4 * q + 3 < ku) {  // a whole block: interleave four rows
            for (std::size_t jj = 0; jj < 32; ++jj)
              for (std::size_t kk = 0; kk < 4; ++kk) out[jj * 4 + kk] = rows[kk][jj];
            out += 128;
            continue;
          }
          for (std::size_t jj = 0; jj < 32; ++jj, out += 4)
            for (std::size_t kk = 0; kk < 4; ++kk) out[kk] = jj < jn && rows[kk] ? rows[kk][jj] : 0;
        }
      }
      std::vector<std::int32_t> sums(blocks * 32, 0);
      for (std::size_t k = 0; k < ku; ++k)
        for (std::size_t j = 0; j < nu; ++j) sums[j] += w[k * n + j];
      p.colsum.resize(sums.size());
      for (std::size_t j = 0; j < sums.size(); ++j) p.colsum[j] = 128 * sums[j];
      break;
    }
  }
  return p;
}

namespace {

void gemm_rows(const std::int8_t* const* x, std::size_t rows, const PackedWeights& w,
               std::int32_t* c, bool overwrite) {
#ifdef TPU_X86_KERNELS
  if (w.diagonal) return gemm_diagonal(x, rows, w, c, overwrite);
#endif
  switch (w.kernel) {
#ifdef TPU_X86_KERNELS
    case GemmKernel::Avx2:
      return gemm_avx2(x, rows, w, c, overwrite);
    case GemmKernel::Avx512Vnni:
      return gemm_vnni(x, rows, w, c, overwrite);
#endif
    default:
      return gemm_scalar(x, rows, w, c, overwrite);
  }
}

}  // namespace

unsigned default_gemm_threads() {
  static const unsigned kMax = [] {
    unsigned t = std::max(1u, std::thread::hardware_concurrency());
    if (const char* env = std::getenv("TPU_GEMM_THREADS")) {
      const long v = std::strtol(env, nullptr, 10);
      if (v >= 1) t = static_cast<unsigned>(std::min<long>(v, 64));
    }
    return std::min(t, 8u);
  }();
  return kMax;
}

unsigned gemm_threads_for(std::size_t macs, const GemmThreading& threading) {
  const unsigned limit = threading.max_threads ? threading.max_threads : default_gemm_threads();
  const std::size_t by_work = macs / std::max<std::size_t>(threading.macs_per_thread, 1);
  return static_cast<unsigned>(std::clamp<std::size_t>(by_work, 1, limit));
}

unsigned gemm_threads(std::size_t rows, std::size_t n, const GemmThreading& threading) {
  return gemm_threads_for(rows * n * n, threading);
}

std::vector<RowBand> split_rows(std::size_t rows, unsigned threads, std::size_t step) {
  std::vector<RowBand> bands;
  if (rows == 0) return bands;
  threads = std::max(threads, 1u);
  step = std::max<std::size_t>(step, 1);
  // The rows one thread would take, rounded up to whole steps: never less
  // than ceil(rows / threads), so `threads` bands reach the last row.
  const std::size_t band = round_up((rows + threads - 1) / threads, step);
  for (std::size_t first = 0; first < rows; first += band)
    bands.push_back({first, std::min(band, rows - first)});
  return bands;
}

void int8_gemm(const std::int8_t* x, std::size_t rows, const PackedWeights& w, std::int32_t* c,
               bool overwrite, const GemmThreading& threading) {
  std::vector<const std::int8_t*> row_ptrs(rows);
  for (std::size_t i = 0; i < rows; ++i) row_ptrs[i] = x + i * w.n;
  int8_gemm_rows(row_ptrs.data(), rows, w, c, overwrite, threading);
}

namespace {

using ProfileClock = std::chrono::steady_clock;

// The profile's state: `running` calls in flight, the busy interval's start.
struct ProfileState {
  std::atomic<bool> on{false};
  std::mutex m;
  unsigned running = 0;
  ProfileClock::time_point since;
  GemmProfile counts;
};

ProfileState& profile_state() {
  static ProfileState s;
  return s;
}

// Counts one call from its construction to its destruction while profiling.
class ProfiledCall {
 public:
  explicit ProfiledCall(double macs) {
    ProfileState& s = profile_state();
    if (!s.on.load(std::memory_order_relaxed)) return;
    state_ = &s;
    const std::lock_guard<std::mutex> lock(s.m);
    if (s.running++ == 0) s.since = ProfileClock::now();
    ++s.counts.calls;
    s.counts.macs += macs;
  }
  ~ProfiledCall() {
    if (!state_) return;
    const std::lock_guard<std::mutex> lock(state_->m);
    if (--state_->running == 0)
      state_->counts.busy_s += std::chrono::duration<double>(ProfileClock::now() - state_->since).count();
  }
  ProfiledCall(const ProfiledCall&) = delete;
  ProfiledCall& operator=(const ProfiledCall&) = delete;

 private:
  ProfileState* state_ = nullptr;
};

}  // namespace

void set_gemm_profiling(bool on) {
  ProfileState& s = profile_state();
  const std::lock_guard<std::mutex> lock(s.m);
  s.counts = {};
  s.since = ProfileClock::now();  // a call in flight counts from here
  s.on.store(on, std::memory_order_relaxed);
}

GemmProfile gemm_profile() {
  ProfileState& s = profile_state();
  const std::lock_guard<std::mutex> lock(s.m);
  GemmProfile p = s.counts;
  if (s.running > 0) p.busy_s += std::chrono::duration<double>(ProfileClock::now() - s.since).count();
  return p;
}

void int8_gemm_rows(const std::int8_t* const* x, std::size_t rows, const PackedWeights& w,
                    std::int32_t* c, bool overwrite, const GemmThreading& threading) {
  if (rows == 0) return;
  const std::size_t n = w.n;
  // The scalar kernel multiplies the whole tile; the others its used extent
  // (or its diagonal).
  const std::size_t macs_per_row = w.macs_per_row();
  const ProfiledCall profiled(static_cast<double>(rows) * static_cast<double>(macs_per_row));
  const std::vector<RowBand> bands = split_rows(rows, gemm_threads_for(rows * macs_per_row, threading));
  WorkerPool::shared().run(bands.size(), [&](std::size_t b) {
    gemm_rows(x + bands[b].first, bands[b].count, w, c + bands[b].first * n, overwrite);
  });
}

}  // namespace tpu::model
