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

// AVX2 has VPMULDQ but neither VPSRAQ nor VPMOVSQB. Four lanes at a time in
// 64 bits: the arithmetic shift is the logical one of x ^ m, then ^ m again,
// with m = (x < 0 ? all ones : 0) (VPCMPGTQ) -- for x >= 0 the two agree, for
// x < 0, ~x = -x - 1 >= 0 and floor(x / 2^S) = ~floor(~x / 2^S); the clamp is
// VPCMPGTQ and a blend against -128 and 127 in 64 bits; the clamped values
// then fit 32 bits and are gathered and packed (the saturating packs change
// nothing in [-128, 127]).
__attribute__((target("avx2"))) inline __m256i requant4_avx2(__m128i acc4, __m256i mult, __m256i round,
                                                             __m128i shift, __m256i zero_point, __m256i lo,
                                                             __m256i hi) {
  const __m256i a = _mm256_cvtepi32_epi64(acc4);
  const __m256i x = _mm256_add_epi64(_mm256_mul_epi32(a, mult), round);
  const __m256i m = _mm256_cmpgt_epi64(_mm256_setzero_si256(), x);
  const __m256i shifted = _mm256_xor_si256(_mm256_srl_epi64(_mm256_xor_si256(x, m), shift), m);
  __m256i y = _mm256_add_epi64(shifted, zero_point);
  y = _mm256_blendv_epi8(y, hi, _mm256_cmpgt_epi64(y, hi));
  y = _mm256_blendv_epi8(y, lo, _mm256_cmpgt_epi64(lo, y));
  return y;
}

__attribute__((target("avx2"))) void activate_avx2(const std::int32_t* acc, std::size_t n, const Requant& q,
                                                   ActFunction f, std::int8_t* out) {
  const __m256i mult = _mm256_set1_epi64x(q.multiplier);
  const __m256i round = _mm256_set1_epi64x(q.shift ? std::int64_t{1} << (q.shift - 1) : 0);
  const __m256i zero_point = _mm256_set1_epi64x(q.zero_point);
  // ReLU after the clamp to [-128, 127] is the clamp to [Z, 127] (Z <= 127).
  const bool relu = f == ActFunction::Relu;
  const __m256i lo = _mm256_set1_epi64x(relu ? q.zero_point : -128), hi = _mm256_set1_epi64x(127);
  const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(q.shift));
  // The low 32 bits of the four 64-bit lanes into the low 128 bits.
  const __m256i gather = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  std::size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j));
    const __m256i y0 = requant4_avx2(_mm256_castsi256_si128(v), mult, round, shift, zero_point, lo, hi);
    const __m256i y1 = requant4_avx2(_mm256_extracti128_si256(v, 1), mult, round, shift, zero_point, lo, hi);
    const __m128i w0 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(y0, gather));
    const __m128i w1 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(y1, gather));
    const __m128i w16 = _mm_packs_epi32(w0, w1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + j), _mm_packs_epi16(w16, w16));
  }
  if (relu) {
    for (; j < n; ++j) out[j] = activate(requantize(acc[j], q), f, q.zero_point);
    return;
  }
  for (; j < n; ++j) out[j] = requantize(acc[j], q);
  apply_function(out, n, f, q.zero_point);
}
#endif

}  // namespace

bool act_kernel_available(ActKernel k) {
#ifdef TPU_X86_ACT
  if (k == ActKernel::Avx512) return __builtin_cpu_supports("avx512f");
  if (k == ActKernel::Avx2) return __builtin_cpu_supports("avx2");
#endif
  return k == ActKernel::Scalar;
}

void activate_row(ActKernel k, const std::int32_t* acc, std::size_t n, const Requant& q, ActFunction f,
                  std::int8_t* out) {
#ifdef TPU_X86_ACT
  if (k == ActKernel::Avx512 && act_kernel_available(k)) return activate_avx512(acc, n, q, f, out);
  if (k == ActKernel::Avx2 && act_kernel_available(k)) return activate_avx2(acc, n, q, f, out);
#endif
  (void)k;
  activate_scalar(acc, n, q, f, out);
}

void activate_row(const std::int32_t* acc, std::size_t n, const Requant& q, ActFunction f, std::int8_t* out) {
  static const ActKernel best = [] {
    const char* env = std::getenv("TPU_ACT_KERNEL");
    const std::string_view want = env ? env : "";
    if (want == "scalar") return ActKernel::Scalar;
    if (want != "avx2" && act_kernel_available(ActKernel::Avx512)) return ActKernel::Avx512;
    return act_kernel_available(ActKernel::Avx2) ? ActKernel::Avx2 : ActKernel::Scalar;
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
