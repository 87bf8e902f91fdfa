// The GEMM compiler: tiles C[M x Nout] = A[M x K] . B[K x Nout] (int8 inputs,
// int32 accumulation) onto an N x N array.
//
// K is split into ceil(K/N) weight tiles accumulated in the accumulators, Nout
// into ceil(Nout/N) column tiles, and M into chunks that fit the unified
// buffer and accumulators. A chunk of A is double-buffered in the UB (the
// next chunk loads while this one computes), column tiles alternate between
// two accumulator regions (one drains while the next computes), and every RW
// is issued as far ahead as the weight FIFO allows, so the next tile loads
// while the current one computes. Output is raw int32 (WHM.A) or, with a
// requantization, int8 after ACT.
//
// Memory images (all in rows of N bytes unless said otherwise):
//   host:    A, chunk by chunk: for chunk c, k-tile t, row i: one row of A's
//            columns t*N .. t*N+N-1 (zero-padded); then C: for column tile
//            u and row m, one row (int8) or 4 rows (int32 LE) at
//            c_host_row + (u*M + m) * rows_per_c_row.
//   weights: tile u*Kt + t holds B[t*N .. t*N+N-1][u*N .. u*N+N-1], zero-padded.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/arch_config.h"
#include "isa/program.h"
#include "model/activation.h"

namespace tpu::compiler {

class CompileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Row-major int8 matrix.
struct MatrixI8 {
  std::size_t rows = 0, cols = 0;
  std::vector<std::int8_t> data;
  std::int8_t at(std::size_t r, std::size_t c) const { return data[r * cols + c]; }
};

struct GemmSpec {
  std::optional<model::Requant> requant;           // none: int32 output
  model::ActFunction act = model::ActFunction::None;  // with requant only
};

// "M,S,Z" (as --requant and a sweep's "requant" give it) -> Requant, each
// field range-checked against its SETQ field. Throws std::invalid_argument
// with a one-line reason ("expected M,S,Z, e.g. 93,9,-3", "QMUL = ... is
// outside ...") that the caller prefixes with where the text came from.
model::Requant parse_requant(const std::string& text);

struct GemmPlan {
  isa::Program program;
  std::vector<std::int8_t> host;     // host memory image, host_rows_used x N
  std::vector<std::int8_t> weights;  // weight memory image, tiles x N x N
  std::uint64_t host_rows_used = 0;
  std::uint64_t weight_tiles_used = 0;
  std::uint64_t m = 0, k = 0, n_out = 0;
  std::uint64_t chunk_rows = 0;  // M rows per chunk
  std::uint64_t c_host_row = 0;  // first host row of C
  bool int8_output = false;
  std::string assembly;  // the program as commented assembly text
};

// Throws CompileError when the shapes are empty or do not fit the memories.
GemmPlan compile_gemm(const MatrixI8& a, const MatrixI8& b, const GemmSpec& spec,
                      const ArchConfig& cfg);

// C read back from a final host memory image (rows x N int8, row-major).
// Returns int32 values; for int8 output each is the int8 result.
std::vector<std::int32_t> extract_result(const GemmPlan& plan, const std::int8_t* host,
                                         std::uint64_t array_n);

}  // namespace tpu::compiler
