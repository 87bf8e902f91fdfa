#include "model/activation.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TPU_X86_ACT 1
#endif

namespace tpu::model {
namespace {

template <typename F>
std::array<std::int8_t, 256> make_table(F f) {
  std::array<std::int8_t, 256> t{};
  for (int y = -128; y <= 127; ++y)
    t[static_cast<std::size_t>(y + 128)] =
        static_cast<std::int8_t>(std::round(127.0 * f(static_cast<double>(y) / 16.0)));
  return t;
}

// f on a requantized row, one loop per function (the compiler vectorizes
// ReLU's).
void apply_function(std::int8_t* y, std::size_t n, ActFunction f, std::int8_t zero_point) {
  switch (f) {
    case ActFunction::None:
      return;
    case ActFunction::Relu:
      for (std::size_t i = 0; i < n; ++i) y[i] = std::max(y[i], zero_point);
      return;
    case ActFunction::Sigmoid:
    case ActFunction::Tanh: {
      const auto& table = f == ActFunction::Sigmoid ? sigmoid_table() : tanh_table();
      for (std::size_t i = 0; i < n; ++i) y[i] = table[static_cast<std::size_t>(y[i] + 128)];
      return;
    }
  }
}

void activate_scalar(const std::int32_t* acc, std::size_t n, const Requant& q, ActFunction f, std::int8_t* out) {
  for (std::size_t j = 0; j < n; ++j) out[j] = activate(requantize(acc[j], q), f, q.zero_point);
}

#ifdef TPU_X86_ACT
// Eight lanes at a time in 64 bits: VPMULDQ multiplies the sign-extended
// int32s exactly, VPSRAQ is the arithmetic shift, VPMOVSQB saturates to int8
// as the clamp does; the function is applied after, on the int8 row.
__attribute__((target("avx512f"))) void activate_avx512(const std::int32_t* acc, std::size_t n,
                                                        const Requant& q, ActFunction f, std::int8_t* out) {
  const __m512i mult = _mm512_set1_epi64(q.multiplier);
  const __m512i round = _mm512_set1_epi64(q.shift ? std::int64_t{1} << (q.shift - 1) : 0);
  const __m512i zero_point = _mm512_set1_epi64(q.zero_point);
  const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(q.shift));
  // The zero-masking forms (all eight lanes): the plain intrinsics pass an
  // undefined vector that GCC 12 reports as maybe used uninitialized.
  const __mmask8 all = 0xff;
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m512i a =
        _mm512_maskz_cvtepi32_epi64(all, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)));
    const __m512i product = _mm512_maskz_mul_epi32(all, a, mult);
    const __m512i scaled = _mm512_maskz_sra_epi64(all, _mm512_add_epi64(product, round), shift);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + j),
                     _mm512_maskz_cvtsepi64_epi8(all, _mm512_add_epi64(scaled, zero_point)));
  }
  for (; j < n; ++j) out[j] = requantize(acc[j], q);
  apply_function(out, n, f, q.zero_point);
}
#endif

}  // namespace

bool act_kernel_available(ActKernel k) {
#ifdef TPU_X86_ACT
  if (k == ActKernel::Avx512) return __builtin_cpu_supports("avx512f");
#endif
  return k == ActKernel::Scalar;
}

void activate_row(ActKernel k, const std::int32_t* acc, std::size_t n, const Requant& q, ActFunction f,
                  std::int8_t* out) {
#ifdef TPU_X86_ACT
  if (k == ActKernel::Avx512) return activate_avx512(acc, n, q, f, out);
#endif
  (void)k;
  activate_scalar(acc, n, q, f, out);
}

void activate_row(const std::int32_t* acc, std::size_t n, const Requant& q, ActFunction f, std::int8_t* out) {
  static const ActKernel best = [] {
    const char* env = std::getenv("TPU_ACT_KERNEL");
    const bool scalar = env && std::string_view(env) == "scalar";
    return !scalar && act_kernel_available(ActKernel::Avx512) ? ActKernel::Avx512 : ActKernel::Scalar;
  }();
  activate_row(best, acc, n, q, f, out);
}

std::optional<ActFunction> parse_act_function(std::string_view name) {
  for (std::size_t i = 0; i < kActFunctionNames.size(); ++i)
    if (kActFunctionNames[i] == name) return static_cast<ActFunction>(i);
  return std::nullopt;
}

std::string act_function_list() {
  std::string list;
  for (const std::string_view name : kActFunctionNames) list += (list.empty() ? "" : ", ") + std::string(name);
  return list;
}

std::int8_t requantize(std::int32_t acc, const Requant& q) {
  const std::int64_t rounding = q.shift ? std::int64_t{1} << (q.shift - 1) : 0;
  const std::int64_t scaled = (std::int64_t{acc} * q.multiplier + rounding) >> q.shift;
  return static_cast<std::int8_t>(std::clamp<std::int64_t>(scaled + q.zero_point, -128, 127));
}

std::int32_t vec_combine(std::int8_t a, std::int8_t b, const isa::VecRegs& r) {
  const std::int32_t xa = a - r.za, xb = b - r.zb;
  const std::int32_t ya = r.da * xa, yb = r.db * xb;
  switch (r.op) {
    case isa::VecOperation::Add: return ya + yb;
    case isa::VecOperation::Sub: return ya - yb;
    case isa::VecOperation::Mul: return xa * xb;
    case isa::VecOperation::Max: return std::max(ya, yb);
    case isa::VecOperation::Min: return std::min(ya, yb);
  }
  return 0;
}

std::int8_t activate(std::int8_t y, ActFunction f, std::int8_t zero_point) {
  switch (f) {
    case ActFunction::None: return y;
    case ActFunction::Relu: return std::max(y, zero_point);
    case ActFunction::Sigmoid: return sigmoid_table()[static_cast<std::size_t>(y + 128)];
    case ActFunction::Tanh: return tanh_table()[static_cast<std::size_t>(y + 128)];
  }
  return y;
}

const std::array<std::int8_t, 256>& sigmoid_table() {
  static const auto t = make_table([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  return t;
}

const std::array<std::int8_t, 256>& tanh_table() {
  static const auto t = make_table([](double x) { return std::tanh(x); });
  return t;
}

}  // namespace tpu::model
