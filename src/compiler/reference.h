// The reference GEMM that checks the simulator: Eigen's int32 matrix product
// and a requantization/activation written from docs/isa.md independently of
// the model's (128-bit floor division instead of shifts, long double instead
// of the model's tables).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/gemm.h"

namespace tpu::compiler {

// C = A . B in int32 (two's-complement wrap), then, when spec has a
// requantization, q and f per element. Row-major M x Nout.
std::vector<std::int32_t> reference_gemm(const MatrixI8& a, const MatrixI8& b,
                                         const GemmSpec& spec);

std::int8_t reference_requantize(std::int32_t acc, const model::Requant& q);
std::int8_t reference_activate(std::int8_t y, model::ActFunction f, std::int8_t zero_point);

}  // namespace tpu::compiler
