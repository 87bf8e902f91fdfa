// Lowering of a token_bias (docs/quantization.md, "Constant tokens and
// positions": ViT's class token and positions). The bias is per token and
// channel, which a weight tile (per channel) cannot carry, so it enters as
// constant rows: b'[p][c] = b[p][c] - z_x for the input's tokens (the zero
// point folded in), b[p][c] for the prefix tokens, written as int8 digit
// planes, b' = r + 127 * (q_1 + ... + q_m), |r| <= 126, |q_j| <= 127. The host
// writes the planes with the input (OnChipPlan::host_constants), one RHM
// loads them into the unified buffer at the program's start, and per output
// group and job the array adds, into the accumulators of each sample's
// k + H*W output tokens: plane r through the identity tile (overwriting),
// the input's H*W tokens through the same tile at token k on, and the planes
// q_j through 127 times the identity. Then ACT with s_x / s_y.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {
namespace {

// Passes of 127 a bias of magnitude up to 127 * 127 * kMaxQuotientPlanes
// needs at most; more is refused (2 million at the input's scale: a constant
// 2 million input steps from zero).
constexpr std::uint64_t kMaxQuotientPlanes = 128;

}  // namespace

void OnChip::place_token_bias(std::size_t i) {
  const Layer& l = net_.layers[i];
  const std::size_t in = layer_inputs(net_, i)[0];
  const TensorInfo& out = infos_[i + 1];
  const std::uint64_t tokens = out.shape[1], c = out.shape[2], groups = ceil_div(c, n_);
  const std::int64_t zx = infos_[in].quant.zero_point;
  std::vector<std::int64_t> b(tokens * c);
  std::int64_t most = 0;
  for (std::uint64_t p = 0; p < tokens; ++p)
    for (std::uint64_t ch = 0; ch < c; ++ch) {
      b[p * c + ch] = std::int64_t{l.bias[p * c + ch]} - (p >= l.prefix_tokens ? zx : 0);
      most = std::max<std::int64_t>(most, std::llabs(b[p * c + ch] / 127));
    }
  const std::uint64_t m = ceil_div(static_cast<std::uint64_t>(most), 127);
  if (m > kMaxQuotientPlanes)
    throw CompileError(fmt::format("{}: a bias of {} input steps needs {} passes on chip, at most {} are lowered",
                                   layer_label(l, i), most * 127, m + 1, kMaxQuotientPlanes + 1));
  TokenConstants tc;
  tc.layer = i;
  tc.planes = 1 + m;
  tc.rows = groups * tc.planes * tokens;
  tc.host = host_constants_.size() / n_;  // relative to host_constants_row_ until allocate_host
  host_constants_.resize(host_constants_.size() + tc.rows * n_, 0);
  std::int8_t* rows = host_constants_.data() + tc.host * n_;
  for (std::uint64_t p = 0; p < tokens; ++p)
    for (std::uint64_t ch = 0; ch < c; ++ch) {
      const std::int64_t v = b[p * c + ch];
      std::int64_t q = v / 127;
      const std::int64_t r = v - 127 * q;
      const std::uint64_t g = ch / n_, lane = ch % n_;
      rows[((g * tc.planes) * tokens + p) * n_ + lane] = static_cast<std::int8_t>(r);
      for (std::uint64_t j = 1; j <= m; ++j) {
        const std::int64_t d = std::clamp<std::int64_t>(q, -127, 127);
        rows[((g * tc.planes + j) * tokens + p) * n_ + lane] = static_cast<std::int8_t>(d);
        q -= d;
      }
    }
  token_constants_.push_back(tc);
}

// The RHMs of the constant rows, at the program's start.
void OnChip::lower_token_constants() {
  for (const TokenConstants& tc : token_constants_) {
    Op op;
    op.opcode = isa::Opcode::RHM;
    op.a = static_cast<std::int64_t>(tc.host);
    op.b = static_cast<std::int64_t>(tc.ub);
    op.c = static_cast<std::int64_t>(tc.rows);
    op.layer = tc.layer;
    push(op);
  }
}

void OnChip::lower_token_bias(std::size_t i, std::uint64_t bc) {
  const Layer& l = net_.layers[i];
  const std::size_t in = layer_inputs(net_, i)[0];
  const Place& xp = places_[base_of(in)];
  const Place& yp = places_[i + 1];
  if (xp.host || yp.host)
    throw CompileError(fmt::format("{}: a token_bias of a map spilled to host memory is not implemented on chip",
                                   layer_label(l, i)));
  const auto tc = std::find_if(token_constants_.begin(), token_constants_.end(),
                               [&](const TokenConstants& t) { return t.layer == i; });
  if (tc == token_constants_.end()) throw CompileError("internal error: a token_bias without its constants");
  const std::uint64_t k = l.prefix_tokens, tokens = yp.pixels;
  // The identity and 127 times it.
  std::vector<std::uint64_t> diag;
  for (const std::int8_t d : {std::int8_t{1}, std::int8_t{127}}) {
    std::vector<std::int8_t> t(n_ * n_, 0);
    for (std::uint64_t j = 0; j < n_; ++j) t[j * n_ + j] = d;
    diag.push_back(tile(std::move(t)));
  }
  const std::uint64_t per = samples_per_piece(tokens);
  for (std::uint64_t go = 0; go < yp.groups; ++go)
    for (const Job& job : jobs(tokens, 1, bc)) {
      const std::uint64_t n_end = job.n0 + job.samples;
      const std::uint64_t p0 = job.band.p0, pixels = job.band.pixels_or(tokens);
      const std::uint64_t acc = next_acc(job.samples * pixels);
      const auto pass = [&](std::uint64_t ub, std::uint64_t acc_row, std::uint64_t rows, std::uint8_t flags,
                            std::uint64_t t) {
        Op op;
        op.opcode = isa::Opcode::MMC;
        op.flags = flags;
        op.a = static_cast<std::int64_t>(ub);
        op.b = static_cast<std::int64_t>(acc_row);
        op.c = static_cast<std::int64_t>(rows);
        op.tile = t;
        op.layer = i;
        push(op);
      };
      const auto plane_row = [&](std::uint64_t j) { return tc->ub + (go * tc->planes + j) * tokens + p0; };
      // r, then the input's tokens, through the identity.
      for (std::uint64_t n = job.n0; n < n_end; ++n)
        pass(plane_row(0), acc + (n - job.n0) * pixels, pixels,
             (n == job.n0 ? isa::kFlagMmcSwitch : 0) | isa::kFlagMmcOverwrite, diag[0]);
      const std::uint64_t first = std::max(p0, k);
      if (first < p0 + pixels)
        for (std::uint64_t n = job.n0; n < n_end; ++n)
          pass(plane(in, go, n, bc) + (first - k), acc + (n - job.n0) * pixels + (first - p0), p0 + pixels - first,
               0, diag[0]);
      // The quotient planes through 127 times the identity.
      for (std::uint64_t j = 1; j < tc->planes; ++j)
        for (std::uint64_t n = job.n0; n < n_end; ++n)
          pass(plane_row(j), acc + (n - job.n0) * pixels, pixels,
               j == 1 && n == job.n0 ? isa::kFlagMmcSwitch : 0, diag[1]);
      for (std::uint64_t a = job.n0; a < n_end; a += per)
        activate(i, go, a, std::min(n_end, a + per) - 1, acc + (a - job.n0) * pixels, bc, job.band);
    }
}

}  // namespace tpu::compiler::onchip
