// The transformer layers on the activation unit (docs/quantization.md,
// "Transformer layers"): layernorm and gelu compiled on chip at N = 4 (tokens
// of one and of several UB rows, of 6 and 3 values (NGEO's width), maps and 1-D tensors, several input zero
// points), simulated and compared bit for bit with the C++ int8 reference;
// the reference against float LayerNorm and GELU on the dequantized inputs
// (within two output steps); the graph's and the compiler's errors. And the
// attention layers the array computes (docs/quantization.md, "MatMul of two
// activations", "Constant tokens and positions"): matmul through run-time
// weight tiles (the host route's WHM, HWT, RW) and token_bias, at N = 4 and 8,
// bit for bit against the C++ reference on the detailed and the fast path,
// with the same cycles on both.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "compiler/layer_reference.h"
#include "compiler/network.h"
#include "config/arch_config.h"
#include "model/tpu.h"
#include "runtime/run_network.h"
#include "support/on_chip_check.h"

namespace {

using namespace tpu;
using compiler::Layer;
using compiler::LayerKind;
using compiler::Network;
using compiler::Tensor;
using test::random_input;

Layer norm_layer(LayerKind kind, std::vector<std::size_t> inputs, compiler::QuantParams out) {
  Layer l;
  l.kind = kind;
  l.inputs = std::move(inputs);
  l.output = out;
  l.eps = 1e-3;
  return l;
}

// input -> layernorm -> gelu (the output), and a gelu of the input added in
// (the add on the array, so the layers' outputs are read by later layers).
Network norm_net(std::vector<std::size_t> shape, std::int32_t zin) {
  Network net;
  net.name = "norm";
  net.input_shape = std::move(shape);
  net.input = {0.04, zin};
  net.layers.push_back(norm_layer(LayerKind::LayerNorm, {0}, {3.0 / 127, 3}));
  net.layers.push_back(norm_layer(LayerKind::Gelu, {1}, {2.0 / 127, -60}));
  net.layers.push_back(norm_layer(LayerKind::Gelu, {0}, {0.02, -100}));
  Layer add;
  add.kind = LayerKind::Add;
  add.inputs = {2, 3};
  add.output = {0.03, -20};
  net.layers.push_back(add);
  for (std::size_t i = 0; i < net.layers.size(); ++i) net.layers[i].name = "l" + std::to_string(i);
  return net;
}

// A 1x1 conv (a dense layer per token) of `in` from c channels to cout, output zero point 0:
// the symmetric second operand of a matmul (docs/quantization.md, "MatMul of two activations").
Layer symmetric_conv(std::size_t in, std::size_t c, std::size_t cout, double in_scale, std::mt19937& rng) {
  Layer l;
  l.kind = LayerKind::Conv2d;
  l.name = "b";
  l.inputs = {in};
  l.weight_shape = {1, 1, c, cout};
  l.kernel_h = l.kernel_w = 1;
  std::uniform_int_distribution<int> w(-127, 127);
  for (std::size_t k = 0; k < c * cout; ++k) l.weights.push_back(static_cast<std::int8_t>(w(rng)));
  l.weight_scale = 0.01;
  // The products' spread: about sqrt(c) * 74 * 73 at in_scale * weight_scale; +-127 at 3 sigma.
  l.output = {in_scale * l.weight_scale * std::sqrt(static_cast<double>(c)) * 74.0 * 73.0 * 3.0 / 127.0, 0};
  return l;
}

// A (the input, 1 x L x k, zero point za) times B (a symmetric 1x1 conv of A):
// with transpose_b B has k channels and the output is L x L; without, A's k = L
// features are B's L tokens and the output is L x cb.
Network matmul_net(std::size_t tokens, std::size_t k, std::size_t cb, bool transpose, std::int32_t za,
                   std::mt19937& rng) {
  Network net;
  net.name = "mm";
  net.input_shape = {1, tokens, k};
  net.input = {0.03, za};
  net.layers.push_back(symmetric_conv(0, k, transpose ? k : cb, net.input.scale, rng));
  Layer mm;
  mm.kind = LayerKind::MatMul;
  mm.name = "mm";
  mm.inputs = {0, 1};
  mm.transpose_b = transpose;
  mm.alpha = 0.25;
  // Provisional (the test sets it from the products): |acc| about sqrt(k) * sqrt(74^2 + za^2) * 42
  // at s_a s_b; +-127 output steps at 3 sigma.
  const double acc_scale = net.input.scale * net.layers[0].output.scale;
  mm.output = {mm.alpha * acc_scale * std::sqrt(static_cast<double>(k) * (74.0 * 74.0 + za * za)) * 42.0 * 3.0 / 127.0,
               5};
  net.layers.push_back(mm);
  return net;
}

// Runs the network's on-chip plan on the detailed and the fast path: both
// give the reference's output bit for bit, and the same cycles.
// Returns the plan.
compiler::NetworkPlan check_both_paths(const Network& net, const Tensor& x, const ArchConfig& cfg) {
  compiler::NetworkPlan plan = compiler::compile_network(net, x.batch(), cfg, compiler::CompileMode::OnChip);
  REQUIRE(plan.on_chip_plan);
  const Tensor want = compiler::reference_network(net, x);
  std::vector<std::uint64_t> cycles;
  for (const model::Detail detail : {model::Detail::Detailed, model::Detail::Fast}) {
    INFO((detail == model::Detail::Fast ? "fast" : "detailed") << " path");
    model::RunOptions opts;
    opts.detail = detail;
    const compiler::NetworkRun run = compiler::run_network(
        plan, x, cfg, [&](std::size_t, const compiler::ProgramPlan& p, model::Memories& mem) {
          return model::run_program(cfg, p.program, mem, opts);
        });
    REQUIRE_FALSE(run.fault);
    CHECK(run.output.shape == want.shape);
    std::size_t bad = 0;
    for (std::size_t e = 0; e < want.data.size(); ++e) bad += run.output.data[e] != want.data[e];
    CHECK(bad == 0);
    std::uint64_t c = 0;
    for (const auto& log : run.logs) c += log.stats.cycles;
    cycles.push_back(c);
  }
  CHECK(cycles[0] == cycles[1]);
  // Not a saturated output: most values inside the int8 range.
  std::size_t clipped = 0;
  for (std::int32_t v : want.data) clipped += v == -128 || v == 127;
  CHECK(clipped * 4 < want.data.size());
  return plan;
}

// The cycles of the plan's program on the fast path.
std::uint64_t run_cycles(const compiler::NetworkPlan& plan, const Tensor& x, const ArchConfig& cfg) {
  const compiler::NetworkRun run = compiler::run_network(
      plan, x, cfg, [&](std::size_t, const compiler::ProgramPlan& p, model::Memories& mem) {
        return model::run_program(cfg, p.program, mem);
      });
  std::uint64_t c = 0;
  for (const auto& log : run.logs) c += log.stats.cycles;
  return c;
}

std::size_t count_opcode(const compiler::NetworkPlan& plan, isa::Opcode op) {
  std::size_t k = 0;
  for (const auto& in : plan.program(0).program.code) k += in.opcode == op;
  return k;
}

double gelu(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }

}  // namespace

TEST_CASE("layernorm and gelu run on chip as the reference", "[layers][transformer]") {
  const ArchConfig cfg = preset_config("small4");
  std::mt19937 rng(29);
  using Case = std::pair<std::vector<std::size_t>, std::int32_t>;
  for (const auto& [shape, zin] : std::vector<Case>{{{1, 5, 4}, 0}, {{1, 7, 12}, -9}, {{1, 4, 6}, 2}, {{2, 3, 3}, -1}, {{3, 2, 8}, 40}, {{16}, 5}}) {
    INFO("shape " << shape.size() << "-D, C " << shape.back() << ", input zero point " << zin);
    const Network net = norm_net(shape, zin);
    const Tensor x = random_input(net, 3, rng);
    test::check_on_chip_matches_reference(net, x, cfg);
  }
}

TEST_CASE("the reference's layernorm and gelu are within two output steps of float", "[layers][transformer]") {
  std::mt19937 rng(7);
  const Network net = norm_net({1, 6, 32}, 11);
  const Tensor x = random_input(net, 4, rng);
  const std::vector<Tensor> all = compiler::reference_network_all(net, x);
  const double s = net.input.scale;
  const auto& ln = net.layers[0].output;
  const auto& ge = net.layers[2].output;
  double worst_ln = 0, worst_ge = 0;
  for (std::size_t t = 0; t < x.data.size() / 32; ++t) {
    double mean = 0, var = 0;
    for (std::size_t k = 0; k < 32; ++k) mean += s * (x.data[t * 32 + k] - 11);
    mean /= 32;
    for (std::size_t k = 0; k < 32; ++k) var += std::pow(s * (x.data[t * 32 + k] - 11) - mean, 2);
    var /= 32;
    for (std::size_t k = 0; k < 32; ++k) {
      const std::size_t e = t * 32 + k;
      const double xf = s * (x.data[e] - 11);
      const double want_ln = std::clamp((xf - mean) / std::sqrt(var + 1e-3), ln.scale * (-128 - ln.zero_point),
                                        ln.scale * (127 - ln.zero_point));
      worst_ln = std::max(worst_ln, std::fabs(ln.scale * (all[0].data[e] - ln.zero_point) - want_ln) / ln.scale);
      const double want_ge = std::clamp(gelu(xf), ge.scale * (-128 - ge.zero_point), ge.scale * (127 - ge.zero_point));
      worst_ge = std::max(worst_ge, std::fabs(ge.scale * (all[2].data[e] - ge.zero_point) - want_ge) / ge.scale);
    }
  }
  INFO("LayerNorm " << worst_ln << " steps, GELU " << worst_ge << " steps");
  CHECK(worst_ln <= 2.0);
  CHECK(worst_ge <= 2.0);
}

TEST_CASE("the graph and the compiler check layernorm and gelu", "[layers][transformer]") {
  Network net = norm_net({1, 3, 8}, 0);
  net.layers[0].eps = -1;
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("layer 'l0': LayerNorm epsilon -1 is not >= 0"));
  net = norm_net({1, 3, 8}, 0);
  net.layers[1].act = model::ActFunction::Relu;
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("layer 'l1': a gelu has no activation"));
  net = norm_net({1, 3, 8}, 0);
  net.layers[2].int32_output = true;
  CHECK_THROWS_WITH(compiler::infer_network(net), Catch::Contains("layer 'l2': a gelu has int8 output"));
  net = norm_net({1, 3, 8}, 0);
  net.input.scale = 1e-7;  // even at pre-shift 0, GELU's k1 = 1 / (|a| S'^2) is past 2^30
  net.layers[0].eps = 0;   // (and the LayerNorm's k0 fits)
  CHECK_THROWS_WITH(compiler::infer_network(net),
                    Catch::Contains("layer 'l2': input scale 1e-07 is too small for the integer GELU"));
}

TEST_CASE("matmul of two activations runs on chip as the reference, on both paths and both routes",
          "[layers][attention][matmul]") {
  std::mt19937 rng(31);
  struct Case {
    unsigned n;
    std::size_t tokens, k, cb;
    bool transpose;
    std::int32_t za;
    std::size_t batch;
  };
  // L and k not multiples of N, one and several contraction groups and output
  // groups, A's zero point 0, negative, -128 (two correction passes) and positive.
  for (const Case& c : std::vector<Case>{{4, 5, 3, 0, true, -9, 3},
                                         {4, 9, 10, 0, true, 0, 2},
                                         {4, 6, 6, 7, false, -128, 3},
                                         {4, 3, 3, 2, false, 100, 1},
                                         {8, 11, 13, 0, true, -128, 2},
                                         {8, 10, 10, 9, false, 27, 3},
                                         {8, 4, 20, 0, true, 64, 4}}) {
    INFO("N " << c.n << ", L " << c.tokens << ", k " << c.k << ", cb " << c.cb << ", transpose_b " << c.transpose
              << ", z_a " << c.za << ", batch " << c.batch);
    const ArchConfig cfg = preset_config("small" + std::to_string(c.n));
    Network net = matmul_net(c.tokens, c.k, c.cb, c.transpose, c.za, rng);
    const Tensor x = random_input(net, c.batch, rng);
    // The output scale from the products' largest magnitude (B from the reference, the sums here):
    // about +-127 output steps, whatever the zero point does to the spread.
    const Tensor b = compiler::reference_network_all(net, x)[0];
    const std::size_t cols = c.transpose ? c.tokens : c.cb, bc = c.transpose ? c.k : c.cb;
    double most = 1;
    for (std::size_t s = 0; s < c.batch; ++s)
      for (std::size_t i = 0; i < c.tokens; ++i)
        for (std::size_t j = 0; j < cols; ++j) {
          double acc = 0;
          for (std::size_t f = 0; f < c.k; ++f)
            acc += (x.data[(s * c.tokens + i) * c.k + f] - c.za) *
                   double(c.transpose ? b.data[(s * c.tokens + j) * bc + f] : b.data[(s * c.tokens + f) * bc + j]);
          most = std::max(most, std::fabs(acc));
        }
    net.layers[1].output.scale = net.layers[1].alpha * net.input.scale * net.layers[0].output.scale * most / 127.0;
    const compiler::NetworkPlan plan = check_both_paths(net, x, cfg);
    const std::uint64_t host_cycles = run_cycles(plan, x, cfg);
    // The host route: one WHM and HWT (.T with transpose_b) per sample, output group and
    // contraction group, each tile's RW after it; no RWU (tpuv1's presets have no ub_weight_path).
    const std::size_t n = c.n, k_groups = (c.k + n - 1) / n;
    std::size_t hwt = 0;
    for (const auto& in : plan.program(0).program.code)
      if (in.opcode == isa::Opcode::HWT) {
        ++hwt;
        CHECK(in.has(isa::kFlagHwtTranspose) == c.transpose);
      }
    CHECK(hwt == c.batch * ((cols + n - 1) / n) * k_groups);
    CHECK(count_opcode(plan, isa::Opcode::RWU) == 0);
    // The on-chip route (ub_weight_path): the same tiles by RWU, no host trip, and fewer cycles.
    ArchConfig uwp = cfg;
    uwp.ub_weight_path = 1;
    const compiler::NetworkPlan on_chip = check_both_paths(net, x, uwp);
    std::size_t rwu = 0;
    for (const auto& in : on_chip.program(0).program.code)
      if (in.opcode == isa::Opcode::RWU) {
        ++rwu;
        CHECK(in.has(isa::kFlagRwuTranspose) == c.transpose);
      }
    CHECK(rwu == hwt);
    CHECK(count_opcode(on_chip, isa::Opcode::HWT) == 0);
    const std::uint64_t uwp_cycles = run_cycles(on_chip, x, uwp);
    INFO("host route " << host_cycles << " cycles, ub_weight_path " << uwp_cycles);
    CHECK(uwp_cycles < host_cycles);
  }
}

TEST_CASE("token_bias runs on chip as the reference, on both paths", "[layers][attention][token_bias]") {
  std::mt19937 rng(32);
  struct Case {
    unsigned n;
    std::vector<std::size_t> shape;  // H x W x C
    unsigned prefix;
    std::int32_t zx, bias_max;
    std::size_t batch;
  };
  // C under, at and over N; 0, 1 and 3 prefix tokens; biases within one digit (|b| < 127), of
  // one pass of 127 and of several (up to 10^6: 63 passes); zero points 0, negative, -128.
  for (const Case& c : std::vector<Case>{{4, {2, 3, 3}, 1, -9, 100, 3},
                                         {4, {1, 5, 4}, 0, 0, 9000, 2},
                                         {4, {3, 2, 10}, 3, -128, 1000000, 2},
                                         {8, {2, 2, 11}, 1, 20, 40000, 3},
                                         {8, {4, 4, 8}, 2, 5, 300, 1}}) {
    INFO("N " << c.n << ", C " << c.shape[2] << ", prefix " << c.prefix << ", z_x " << c.zx << ", |b| up to "
              << c.bias_max);
    Network net;
    net.name = "tb";
    net.input_shape = c.shape;
    net.input = {0.05, c.zx};
    Layer tb;
    tb.kind = LayerKind::TokenBias;
    tb.name = "tb";
    tb.inputs = {0};
    tb.prefix_tokens = c.prefix;
    const std::size_t tokens = c.prefix + c.shape[0] * c.shape[1];
    std::uniform_int_distribution<std::int32_t> b(-c.bias_max, c.bias_max);
    for (std::size_t e = 0; e < tokens * c.shape[2]; ++e) tb.bias.push_back(b(rng));
    // The sums' spread: the bias's and about 74 input steps.
    tb.output = {net.input.scale * (c.bias_max / 1.7 + 74.0) * 2.0 / 127.0, -3};
    net.layers.push_back(tb);
    const ArchConfig cfg = preset_config("small" + std::to_string(c.n));
    const Tensor x = random_input(net, c.batch, rng);
    check_both_paths(net, x, cfg);
  }
}

TEST_CASE("token_bias then a layer, the batch in chunks: every chunk reads the constants", "[layers][attention][token_bias]") {
  // The constants are loaded once; a later layer's map in the unified buffer
  // must not take their rows while a later chunk's token_bias still reads them.
  std::mt19937 rng(33);
  for (const std::int32_t bias_max : {100, 1 << 20}) {
    INFO("|b| up to " << bias_max);
    Network net;
    net.name = "tb_conv";
    net.input_shape = {3, 4, 5};
    net.input = {0.05, -128};
    Layer tb;
    tb.kind = LayerKind::TokenBias;
    tb.name = "tb";
    tb.inputs = {0};
    std::uniform_int_distribution<std::int32_t> b(-bias_max, bias_max);
    for (std::size_t e = 0; e < 12 * 5; ++e) tb.bias.push_back(b(rng));
    tb.output = {net.input.scale * (bias_max / 1.7 + 74.0) * 2.0 / 127.0, -3};
    net.layers.push_back(tb);
    net.layers.push_back(symmetric_conv(1, 5, 9, tb.output.scale, rng));
    const ArchConfig cfg = preset_config("small4");
    const Tensor x = random_input(net, 3, rng);
    const compiler::NetworkPlan plan = check_both_paths(net, x, cfg);
    CHECK(plan.on_chip_plan->chunk_units < 3);  // several chunks
  }
}

TEST_CASE("token_bias: a bias past 129 passes is refused on chip, naming the layer", "[layers][attention][token_bias]") {
  Network net;
  net.name = "tb";
  net.input_shape = {1, 2, 3};
  net.input = {0.05, 0};
  Layer tb;
  tb.kind = LayerKind::TokenBias;
  tb.name = "pos";
  tb.inputs = {0};
  tb.prefix_tokens = 1;
  tb.bias.assign(9, 5);
  tb.output = {0.1, 0};
  // 127 * 127 * 128 + 126 needs 1 + 128 passes: the most; 127 more needs 130.
  tb.bias[4] = 127 * 127 * 128 + 126;
  net.layers.push_back(tb);
  const ArchConfig cfg = preset_config("small4");
  CHECK_NOTHROW(compiler::compile_network(net, 1, cfg, compiler::CompileMode::OnChip));
  net.layers[0].bias[4] += 127;
  CHECK_THROWS_WITH(compiler::compile_network(net, 1, cfg, compiler::CompileMode::OnChip),
                    Catch::Contains("layer 'pos'") && Catch::Contains("needs 130 passes on chip, at most 129"));
}
