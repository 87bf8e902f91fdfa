#include "onnx/net_fit.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "onnx/quantize_float.h"

namespace tpu::onnximport {
namespace {

using compiler::CompileError;

// The plan, or nothing when the compiler refuses.
std::optional<compiler::NetworkPlan> try_compile(const compiler::Network& net, std::uint64_t batch,
                                                 const ArchConfig& cfg) {
  try {
    return compiler::compile_network(net, batch, cfg);
  } catch (const CompileError&) {
    return std::nullopt;
  }
}

const ArchParam& param(std::string_view name) {
  for (const ArchParam& p : arch_params())
    if (p.name == name) return p;
  throw std::logic_error(fmt::format("no configuration field {}", name));
}

// What the plan uses of a memory whose use it records; 0 otherwise.
std::uint64_t plan_use(const compiler::NetworkPlan& plan, std::string_view field) {
  std::uint64_t use = 0;
  for (std::size_t k = 0; k < plan.program_count(); ++k) {
    const compiler::ProgramPlan& seg = plan.program(k);
    if (field == "weight_tiles") use = std::max(use, seg.weight_tiles_used);
    if (field == "host_rows") use = std::max(use, seg.host_rows_used);
  }
  return use;
}

std::string bytes_text(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30));
  if (bytes >= (std::uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{} B", bytes);
}

}  // namespace

std::optional<FitAdvice> advise_fit(const compiler::Network& net, std::uint64_t batch, const ArchConfig& cfg) {
  const std::uint64_t n = cfg.array_n;
  const std::array<std::pair<const char*, std::uint64_t>, 4> fields = {
      {{"weight_tiles", n * n}, {"acc_rows", 4 * n}, {"ub_rows", n}, {"host_rows", n}}};
  for (const auto& [name, unit] : fields) {
    const ArchParam& p = param(name);
    const std::uint64_t have = cfg.*p.member;
    if (have >= p.max) continue;
    ArchConfig trial = cfg;
    const auto compiles_with = [&](std::uint64_t v) {
      trial.*p.member = v;
      return try_compile(net, batch, trial);
    };
    const std::optional<compiler::NetworkPlan> largest = compiles_with(p.max);
    if (!largest) continue;
    // The memory the plan uses is the answer when it compiles; else the
    // smallest value by doubling, then bisection.
    std::uint64_t need = plan_use(*largest, name);
    if (need <= have || !compiles_with(need)) {
      std::uint64_t lo = have, hi = std::min(p.max, std::max(have * 2, have + 1));
      while (hi < p.max && !compiles_with(hi)) lo = hi, hi = std::min(p.max, hi * 2);
      while (hi - lo > 1) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        (compiles_with(mid) ? hi : lo) = mid;
      }
      need = hi;
    }
    return FitAdvice{name, have, need, unit};
  }
  return std::nullopt;
}

std::string fit_message(const std::string& reason, const FitAdvice& a) {
  return fmt::format("{}; {} = {} ({}) is too small: the network needs {} >= {} ({}): --config FILE with "
                     "{{\"{}\": {}}}",
                     reason, a.field, a.have, bytes_text(a.have * a.bytes_per_unit), a.field, a.need,
                     bytes_text(a.need * a.bytes_per_unit), a.field, a.need);
}

compiler::NetworkPlan compile_with_fit_advice(const compiler::Network& net, std::uint64_t batch,
                                              const ArchConfig& cfg) {
  try {
    return compiler::compile_network(net, batch, cfg);
  } catch (const CompileError& e) {
    const std::optional<FitAdvice> advice = advise_fit(net, batch, cfg);
    if (!advice) throw;
    throw CompileError(fit_message(e.what(), *advice));
  }
}

namespace {

// Every activation range [0, 1]: zero point -128, the largest zero-point
// correction.
compiler::Network placeholder_quantized(const FloatNet& net) {
  Range r;
  r.add(0.0f);
  r.add(1.0f);
  return quantize_float(net, std::vector<Range>(net.layers.size() + 1, r));
}

// Takes the biases and zero points out of `net` (the fewest bias passes and
// no constant plane; a token_bias's are zeros) and puts them back: no copy of
// the weights.
class WithoutBiases {
 public:
  explicit WithoutBiases(compiler::Network& net) : net_(net), biases_(net.layers.size()) {
    zeros_.push_back(std::exchange(net.input.zero_point, 0));
    for (std::size_t i = 0; i < net.layers.size(); ++i) {
      biases_[i].swap(net.layers[i].bias);
      // A token_bias's bias is its constant tokens, one per token and channel: zeros take
      // the fewest passes.
      if (net.layers[i].kind == compiler::LayerKind::TokenBias) net.layers[i].bias.assign(biases_[i].size(), 0);
      zeros_.push_back(std::exchange(net.layers[i].output.zero_point, 0));
    }
  }
  ~WithoutBiases() {
    net_.input.zero_point = zeros_[0];
    for (std::size_t i = 0; i < net_.layers.size(); ++i) {
      biases_[i].swap(net_.layers[i].bias);
      net_.layers[i].output.zero_point = zeros_[i + 1];
    }
  }
  WithoutBiases(const WithoutBiases&) = delete;
  WithoutBiases& operator=(const WithoutBiases&) = delete;

 private:
  compiler::Network& net_;
  std::vector<std::vector<std::int32_t>> biases_;
  std::vector<std::int32_t> zeros_;
};

}  // namespace

void check_fit_before_calibration(const FloatNet& fnet, std::uint64_t batch, const ArchConfig& cfg) {
  compiler::Network net;
  try {
    net = placeholder_quantized(fnet);
  } catch (const CompileError&) {
    return;  // no verdict: the calibrated quantization says what is wrong
  }
  std::string lower_reason;
  try {
    const WithoutBiases lower(net);
    compiler::compile_network(net, batch, cfg);
    return;
  } catch (const CompileError& e) {
    lower_reason = e.what();
  }
  // The reason and the advice from the same network, so that their sizes agree.
  std::string reason = lower_reason;
  try {
    compiler::compile_network(net, batch, cfg);
  } catch (const CompileError& e) {
    reason = e.what();
  }
  const std::optional<FitAdvice> advice = advise_fit(net, batch, cfg);
  if (!advice) throw CompileError(reason);
  throw CompileError(fit_message(reason, *advice));
}

}  // namespace tpu::onnximport
