// The fast path's matrix unit: one MMC as a blocked int8 GEMM,
// C[rows x n] (+)= X[rows x n] . W[n x n], with int32 two's-complement
// wrap-around in the accumulation into C, exactly what the array's PEs
// compute (every partial sum of n int8 products fits in int32 for n <= 256,
// so only the addition to the accumulators can wrap).
//
// Kernels, chosen at run time by what the CPU supports (all give the same
// bits):
// - avx512vnni: VPDPBUSD on 16 int32 lanes, 8 rows x 32 columns per step.
//   VPDPBUSD multiplies unsigned by signed bytes, so X is offset by 128
//   (x ^ 0x80 = x + 128) and 128 * sum_k W[k][j] is subtracted at the end.
// - avx2: VPMADDWD on int16 pairs, 4 rows x 16 columns per step.
// - scalar: plain loops, for other CPUs and as the reference of the tests.
// Weights are packed once per tile (PackedWeights) and reused by every MMC
// that uses the tile.
//
// A tile whose last rows or columns are all zero (a layer with fewer inputs
// or outputs than the array has rows or columns: ResNet-18's 64-channel
// convolutions fill a sixteenth of tpuv1's tile) is multiplied only over its
// used extent: the products of the zero rows are zero, and a zero column's
// sums are zero, so the vector kernels skip them and give the same bits
// (docs/performance.md, "Tiles the array does not fill"). A diagonal tile
// (depthwise convolutions) is multiplied lane by lane (PackedWeights::diagonal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tpu::model {

enum class GemmKernel : std::uint8_t { Scalar, Avx2, Avx512Vnni };

const char* gemm_kernel_name(GemmKernel k);
bool gemm_kernel_available(GemmKernel k);
// The fastest kernel this CPU runs; TPU_GEMM_KERNEL=scalar|avx2|avx512vnni
// in the environment picks another (when available).
GemmKernel best_gemm_kernel();

// A weight tile W[k][j] (n x n, row-major) laid out for one kernel.
struct PackedWeights {
  GemmKernel kernel = GemmKernel::Scalar;
  std::size_t n = 0;
  // The used extent: rows k >= k_used and columns j >= n_used of W are
  // zero. The vector kernels pack and multiply only W[0..k_used)[0..n_used);
  // the scalar kernel, the tests' reference, packs and multiplies all of W.
  std::size_t k_used = 0, n_used = 0;
  std::vector<std::int8_t> bytes;    // kernel-specific layout
  std::vector<std::int32_t> colsum;  // avx512vnni: 128 * sum_k W[k][j]
  // A diagonal tile (W[k][j] = 0 for every k != j: each weight tile of a
  // depthwise convolution, docs/quantization.md) for a vector kernel: row i
  // of C is x_i[j] * W[j][j] lane by lane, so the kernels multiply the
  // n_used diagonal weights (in `diag`, as int32) instead of the n_used^2
  // extent. `bytes` is not packed then.
  bool diagonal = false;
  std::vector<std::int32_t> diag;
  // The MACs the kernel multiplies per row of X.
  std::size_t macs_per_row() const {
    return kernel == GemmKernel::Scalar ? n * n : diagonal ? n_used : k_used * n_used;
  }
};

PackedWeights pack_weights(const std::int8_t* w, std::size_t n, GemmKernel kernel);

// How one GEMM is split over threads. Rows are independent, so a large GEMM
// is cut into bands of whole 8-row blocks (the kernels' step), one band per
// thread; the threads are the process's WorkerPool (model/worker_pool.h),
// started once. A band is worth a thread from about 16 M MACs: some 100 us of
// work for the AVX-512 kernel.
struct GemmThreading {
  static constexpr std::size_t kDefaultMacsPerThread = std::size_t{16} << 20;
  // At most this many threads; 0: TPU_GEMM_THREADS from the environment if
  // set (1..64), else the CPU's count, and at most 8 either way.
  unsigned max_threads = 0;
  // One thread per this many MACs (at least 1). Tests set it to 1 to reach
  // the threaded split with small GEMMs.
  std::size_t macs_per_thread = kDefaultMacsPerThread;
  // Fast path: an MMC of at least this many MACs (of its tile's used extent)
  // is computed on a background thread from its start cycle, while the
  // simulation goes on (model/gemm_queue.h). Tests set it to 1.
  std::size_t async_macs = kDefaultMacsPerThread;
};

// The thread limit of max_threads = 0: TPU_GEMM_THREADS from the
// environment if set (1..64), else the CPU's count, at most 8; read once.
// The float calibration's kernels (src/onnx/float_kernels.h) use it too.
unsigned default_gemm_threads();

// The threads a GEMM of `macs` multiply-accumulates uses: macs /
// macs_per_thread, clamped to 1 .. the thread limit.
unsigned gemm_threads_for(std::size_t macs, const GemmThreading& threading);
// The same for `rows` x n x n: gemm_threads_for(rows * n * n, threading).
unsigned gemm_threads(std::size_t rows, std::size_t n, const GemmThreading& threading);

// Rows [first, first + count) of one thread's band.
struct RowBand {
  std::size_t first = 0;
  std::size_t count = 0;
};

// Rows 0 .. rows - 1 split into at most `threads` bands, in order, disjoint
// and together covering every row; every band but the last is a multiple of
// `step` rows (the kernels' row block), and all but the last are equal.
std::vector<RowBand> split_rows(std::size_t rows, unsigned threads, std::size_t step = 8);

// c[i * n + j] = (overwrite ? 0 : c[i * n + j]) + sum_k x[i * n + k] * W[k][j]
// for i < rows, with int32 wrap-around, split over threads as `threading`
// says (by the used extent's work, rows * k_used * n_used); the results are
// the same bits for any split.
void int8_gemm(const std::int8_t* x, std::size_t rows, const PackedWeights& w, std::int32_t* c,
               bool overwrite, const GemmThreading& threading = {});

// The same with row i of X at x_rows[i] (n bytes each): an MMC.C's rows,
// which the convolution geometry picks from the map and the padding row, are
// read where they are, by each thread for its own band, instead of being
// gathered first.
void int8_gemm_rows(const std::int8_t* const* x_rows, std::size_t rows, const PackedWeights& w,
                    std::int32_t* c, bool overwrite, const GemmThreading& threading = {});

// Where a run's host time goes into the GEMM kernels (tpu-bench's "matrix
// work" of a whole network, docs/performance.md): while profiling is on,
// every int8_gemm / int8_gemm_rows call counts its MACs (of the tile's used
// extent, as the kernels multiply) and the wall time during which at least
// one call was running (calls on the main and the background thread that
// overlap count once). Off by default; a call costs one relaxed atomic load
// then. Thread-safe.
struct GemmProfile {
  std::uint64_t calls = 0;
  double macs = 0;
  double busy_s = 0;  // wall time with at least one GEMM call running
};
void set_gemm_profiling(bool on);  // and clears the counts
GemmProfile gemm_profile();

}  // namespace tpu::model
