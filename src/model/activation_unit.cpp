#include "model/activation_unit.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#define TPU_SSE2_POOL 1
#endif

#include "model/integer_norm.h"

namespace tpu::model {
namespace {

// ACT's and VEC's activation flags are the same bits.
ActFunction function_of(const isa::Instruction& in) {
  if (in.has(isa::kFlagActRelu)) return ActFunction::Relu;
  if (in.has(isa::kFlagActSigmoid)) return ActFunction::Sigmoid;
  if (in.has(isa::kFlagActTanh)) return ActFunction::Tanh;
  return ActFunction::None;
}

}  // namespace

ActivationUnit::ActivationUnit(sc_module_name name, const ArchConfig& cfg, Memories& mem,
                               RunLog& log)
    : sc_module(name), cfg_(cfg), mem_(mem), log_(log), stats_(log.stats.units[std::string(isa::unit_name(isa::Unit::ActivationUnit))]),
      vec_values_(cfg.array_n), vec_b_held_(cfg.array_n) {
  SC_METHOD(tick);
  sensitive << clk.pos();
  dont_initialize();
}

void ActivationUnit::tick() {
  const Cycle now = current_cycle();
  // Cycles the fast path's clock skipped (none in the detailed path): no
  // command arrived in them.
  for (Cycle t = last_tick_ + 1; t < now && active(); ++t) step(t, nullptr);
  last_tick_ = now;
  busy.write(step(now, cmd.read().valid ? &cmd.read() : nullptr));
}

bool ActivationUnit::step(Cycle now, const UnitCommand* command) {
  if (command) {
    jobs_.push_back({*command, now});
    const isa::Instruction& in = command->instr;
    // The rows it writes: an SMAX's or LNRM's span its tokens' planes.
    const bool tokens = in.opcode == isa::Opcode::SMAX || in.opcode == isa::Opcode::LNRM;
    const auto rows = static_cast<std::uint64_t>(in.operands[2]);
    mem_.ub.prefault(static_cast<std::uint64_t>(in.operands[1]),
                     tokens ? command->conv.norm.span(rows) : rows);
    completions_.push_back(now + duration(cfg_, in, command->conv) - 1);
    ++stats_.instructions;
  }
  // This cycle's read (an ACC row of an ACT, or a window position of a POOL),
  // before this cycle's writes: a write is visible from the next cycle on.
  if (!jobs_.empty()) {
    switch (jobs_.front().cmd.instr.opcode) {
      case isa::Opcode::POOL: read_pool(now); break;
      case isa::Opcode::VEC: read_vec(now); break;
      case isa::Opcode::SMAX:
      case isa::Opcode::LNRM: read_norm(now); break;
      case isa::Opcode::GELU: read_gelu(now); break;
      default: read_act(now); break;
    }
  }
  // Writes leaving the pipeline this cycle.
  bool retired_now = false;
  while (!pipeline_.empty() && pipeline_.front().due == now) {
    PendingWrite& w = pipeline_.front();
    std::copy(w.data.begin(), w.data.end(), mem_.ub.row(w.ub_row));
    if (w.retire_seq >= 0) {
      log_.complete(static_cast<std::size_t>(w.retire_seq), now);
      completions_.pop_front();
      retired_now = true;
    }
    pipeline_.pop_front();
  }
  // Busy from an instruction's start to its completion cycle, as every unit.
  const bool busy_now = retired_now || active();
  if (busy_now) ++stats_.busy_cycles;
  return busy_now;
}

void ActivationUnit::read_act(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const Cycle i = now - job.start;
  const auto rows = static_cast<Cycle>(in.operands[2]);
  const std::int32_t* acc = mem_.acc.row(static_cast<std::uint64_t>(in.operands[0]) + i);
  PendingWrite w{now + cfg_.act_latency, static_cast<std::uint64_t>(in.operands[1]) + i,
                 std::vector<std::int8_t>(cfg_.array_n),
                 i + 1 == rows ? static_cast<std::int64_t>(job.cmd.seq) : -1};
  activate_row(acc, cfg_.array_n, job.cmd.requant, function_of(in), w.data.data());
  pipeline_.push_back(std::move(w));
  if (i + 1 == rows) jobs_.pop_front();
}

// Row i reads B's row (or B's one row, broadcast) at start + i and holds it,
// and A's row at start + i + 1; it is written A + 3 cycles after B's read,
// A + 2 after A's (V1, V2, then ACT's stages): v, exact in int32, is ACT's
// accumulator value. In cycle start + k the unit reads A's row k - 1 (k >= 1)
// and B's row k (k < rows).
void ActivationUnit::read_vec(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const isa::VecRegs& r = job.cmd.conv.vec;
  const Cycle k = now - job.start;
  const auto rows = static_cast<Cycle>(in.operands[2]);
  if (k >= 1) {
    const Cycle i = k - 1;
    const std::int8_t* a = mem_.ub.row(static_cast<std::uint64_t>(in.operands[0]) + i);
    PendingWrite w{now + act_write_latency(cfg_, isa::Opcode::VEC) - 1,
                   static_cast<std::uint64_t>(in.operands[1]) + i, std::vector<std::int8_t>(cfg_.array_n),
                   i + 1 == rows ? static_cast<std::int64_t>(job.cmd.seq) : -1};
    std::int32_t* v = vec_values_.data();
    const std::int8_t* b = vec_b_held_.data();
    for (std::size_t j = 0; j < cfg_.array_n; ++j) v[j] = vec_combine(a[j], b[j], r);
    activate_row(v, cfg_.array_n, job.cmd.requant, function_of(in), w.data.data());
    pipeline_.push_back(std::move(w));
  }
  if (k < rows) {
    const std::int8_t* b = mem_.ub.row(std::uint64_t{r.b_row} + (r.broadcast ? 0 : k));
    std::copy(b, b + cfg_.array_n, vec_b_held_.begin());
  } else {
    jobs_.pop_front();
  }
}

// Window position p of output pixel i is read at start + i * K + p (K window
// positions, row-major); the pixel is written A + 1 cycles after its last
// read (AC, then ACT's stages).
void ActivationUnit::read_pool(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const isa::ConvGeometry& g = job.cmd.conv;
  const std::uint64_t k = g.window(), t = now - job.start, i = t / k, p = t % k;
  const auto rows = static_cast<std::uint64_t>(in.operands[2]);
  const bool average = in.has(isa::kFlagPoolAverage);
  const std::size_t n = cfg_.array_n;
  if (p == 0) {
    if (average)
      pool_acc_.assign(n, 0);
    else
      pool_max_.resize(n);  // written by the window's first position inside the map
    pool_any_ = false;
  }
  const std::int64_t r = g.input_row(i, static_cast<std::uint32_t>(p / g.win_w),
                                     static_cast<std::uint32_t>(p % g.win_w));
  if (r >= 0) {
    const std::int8_t* x = mem_.ub.row(static_cast<std::uint64_t>(in.operands[0]) +
                                       static_cast<std::uint64_t>(r));
    // Three loops without a branch inside; the running max of int8 values
    // is an int8, 16 lanes to an SSE2 register (the sum needs 32 bits).
    if (average) {
      std::int32_t* acc = pool_acc_.data();
      const std::int32_t pad = g.pad;
      for (std::size_t j = 0; j < n; ++j) acc[j] += x[j] - pad;  // padding adds pad - pad = 0
    } else if (pool_any_) {
      std::int8_t* m = pool_max_.data();
      std::size_t j = 0;
#ifdef TPU_SSE2_POOL
      // SSE2 has no signed byte max (PMAXSB is SSE4.1): a ^ 0x80 maps int8
      // onto uint8 in order (a + 128), so PMAXUB of the flipped bytes,
      // flipped back, is the signed max.
      const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
      for (; j + 16 <= n; j += 16) {
        const __m128i a = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + j)), flip);
        const __m128i b = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + j)), flip);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(m + j), _mm_xor_si128(_mm_max_epu8(a, b), flip));
      }
#endif
      for (; j < n; ++j) m[j] = std::max(m[j], x[j]);
    } else {
      std::copy(x, x + n, pool_max_.data());
    }
    pool_any_ = true;
  }
  if (p + 1 < k) return;
  PendingWrite w{now + act_write_latency(cfg_, isa::Opcode::POOL), static_cast<std::uint64_t>(in.operands[1]) + i,
                 std::vector<std::int8_t>(n),
                 i + 1 == rows ? static_cast<std::int64_t>(job.cmd.seq) : -1};
  if (average)
    activate_row(pool_acc_.data(), n, job.cmd.requant, ActFunction::None, w.data.data());
  else if (pool_any_)
    std::copy(pool_max_.begin(), pool_max_.end(), w.data.begin());
  else
    std::fill(w.data.begin(), w.data.end(), g.pad);  // every position in the padding
  pipeline_.push_back(std::move(w));
  if (i + 1 == rows) jobs_.pop_front();
}

ActivationUnit::PendingWrite ActivationUnit::row_write(Cycle now, std::uint64_t ub_row, bool last) const {
  return {now + act_write_latency(cfg_, jobs_.front().cmd.instr.opcode), ub_row, std::vector<std::int8_t>(cfg_.array_n),
          last ? static_cast<std::int64_t>(jobs_.front().cmd.seq) : -1};
}

// Token t's row g is read at start + 3Gt + g (pass 1), + G (pass 2) and + 2G
// (pass 3, which writes it A + 8 cycles later); the per-token scalars pass from
// one pass to the next (docs/quantization.md, "Integer softmax, LayerNorm and
// GELU"). Only the token's first D values count; the lanes past them are
// written q(0).
void ActivationUnit::read_norm(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const isa::NormRegs& r = job.cmd.conv.norm;
  const bool softmax = in.opcode == isa::Opcode::SMAX;
  const std::uint64_t g_rows = r.groups, k = (now - job.start) % (3 * g_rows);
  const std::uint64_t t = (now - job.start) / (3 * g_rows), pass = k / g_rows, g = k % g_rows;
  const auto tokens = static_cast<std::uint64_t>(in.operands[2]);
  const std::size_t n = cfg_.array_n;
  const std::uint64_t offset = g * r.stride + t;
  const std::int8_t* x = mem_.ub.row(static_cast<std::uint64_t>(in.operands[0]) + offset);
  // The token's D values: this row's lanes below `used` (D >= 1: lane 0 of row 0 is one).
  const std::uint64_t d = r.token_values(n);
  const std::size_t used = static_cast<std::size_t>(std::min<std::uint64_t>(n, d > g * n ? d - g * n : 0));
  if (pass == 0) {
    if (g == 0) norm_first_ = softmax ? x[0] : 0;
    for (std::size_t j = 0; j < used; ++j)
      norm_first_ = softmax ? std::max<std::int64_t>(norm_first_, x[j]) : norm_first_ + x[j];
    return;
  }
  // LNRM's mean, from pass 1's sum, for passes 2 and 3.
  const std::int64_t mean = softmax ? 0 : layernorm_mean(norm_first_, d);
  const auto exp_of = [&](std::int8_t v) {
    return norm_exp((std::int64_t{v} - norm_first_) * (std::int64_t{1} << r.shift), r);
  };
  if (pass == 1) {
    if (g == 0) norm_second_ = 0;
    for (std::size_t j = 0; j < used; ++j) {
      const std::int64_t y = layernorm_dev(x[j], mean);
      norm_second_ += softmax ? exp_of(x[j]) : y * y;
    }
    return;
  }
  if (g == 0)
    norm_recip_ = softmax ? softmax_recip(norm_second_) : layernorm_recip(norm_second_, r.k0);
  const bool last = t + 1 == tokens && g + 1 == g_rows;
  PendingWrite w = row_write(now, static_cast<std::uint64_t>(in.operands[1]) + offset, last);
  std::int32_t* v = vec_values_.data();
  for (std::size_t j = 0; j < used; ++j)
    v[j] = softmax ? softmax_value(exp_of(x[j]), norm_recip_)
                   : layernorm_value(layernorm_dev(x[j], mean), norm_recip_);
  std::fill(v + used, v + n, 0);  // lanes past D: q(0)
  activate_row(v, n, job.cmd.requant, ActFunction::None, w.data.data());
  pipeline_.push_back(std::move(w));
  if (last) jobs_.pop_front();
}

// Row i is read at start + i and written A + 6 cycles later.
void ActivationUnit::read_gelu(Cycle now) {
  const Job& job = jobs_.front();
  const isa::Instruction& in = job.cmd.instr;
  const Cycle i = now - job.start;
  const bool last = i + 1 == static_cast<Cycle>(in.operands[2]);
  const std::int8_t* x = mem_.ub.row(static_cast<std::uint64_t>(in.operands[0]) + i);
  PendingWrite w = row_write(now, static_cast<std::uint64_t>(in.operands[1]) + i, last);
  for (std::size_t j = 0; j < cfg_.array_n; ++j)
    w.data[j] = requantize_wide(gelu_value(x[j], job.cmd.conv.norm), job.cmd.requant);
  pipeline_.push_back(std::move(w));
  if (last) jobs_.pop_front();
}

}  // namespace tpu::model
