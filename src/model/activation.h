// Requantization and activation functions of the activation unit (isa.md,
// ACT). The sigmoid and tanh tables come from one generator that every model
// uses; the RTL's table is generated from it too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "isa/instruction.h"

namespace tpu::model {

struct Requant {
  std::int32_t multiplier = 1;  // M
  std::uint32_t shift = 0;      // S, 0..62
  std::int8_t zero_point = 0;   // Z
};

enum class ActFunction : std::uint8_t { None, Relu, Sigmoid, Tanh };

// The functions' names as the tools, model files and sweeps spell them, in
// ActFunction's order; act_function_list() for messages ("none, relu, ...").
inline constexpr std::array<std::string_view, 4> kActFunctionNames = {"none", "relu", "sigmoid", "tanh"};
std::string act_function_list();
constexpr std::string_view act_function_name(ActFunction f) {
  return kActFunctionNames[static_cast<std::size_t>(f)];
}
// The function named `name` (exactly as above), or nothing.
std::optional<ActFunction> parse_act_function(std::string_view name);

// q(a) = sat8(((a * M + r) >> S) + Z), r = S ? 1 << (S - 1) : 0, 64-bit,
// arithmetic shift.
std::int8_t requantize(std::int32_t acc, const Requant& q);

// One row of the activation unit: out[j] = activate(requantize(acc[j], q), f,
// q.zero_point) for j < n, the same bits as the scalar functions, with
// AVX-512 where the CPU has it, else AVX2 where it has that (the fast path's
// ACT, VEC and average POOL rows; docs/performance.md). TPU_ACT_KERNEL=scalar
// in the environment keeps the scalar loop, TPU_ACT_KERNEL=avx2 the AVX2 one
// on an AVX-512 CPU.
void activate_row(const std::int32_t* acc, std::size_t n, const Requant& q, ActFunction f, std::int8_t* out);
// The same with a given kernel (the tests run each one this CPU has); a
// kernel this CPU lacks falls back to the scalar loop.
enum class ActKernel : std::uint8_t { Scalar, Avx512, Avx2 };
bool act_kernel_available(ActKernel k);
void activate_row(ActKernel k, const std::int32_t* acc, std::size_t n, const Requant& q, ActFunction f,
                  std::int8_t* out);

// VEC's value v of one lane before requantization (docs/isa.md, VEC): the
// operands less their zero points, scaled by the factors and combined. Exact
// in int32: at most 2 * 32768 * 255 in magnitude.
std::int32_t vec_combine(std::int8_t a, std::int8_t b, const isa::VecRegs& r);

// f(y) for a requantized y; ReLU clamps at the zero point.
std::int8_t activate(std::int8_t y, ActFunction f, std::int8_t zero_point);

// 256-entry tables indexed by y + 128: round(127 * f(y / 16)), rounding half
// away from zero.
const std::array<std::int8_t, 256>& sigmoid_table();
const std::array<std::int8_t, 256>& tanh_table();

}  // namespace tpu::model
