// Fuzz target: the whole-network-on-chip compiler (compile_on_chip.cpp,
// onchip_schedule.cpp, graph.cpp) end to end.
//
// The input bytes describe a small random network, read by a byte reader that
// gives 0 once the input is exhausted (so every input, the empty one too, is
// a network): the array size N (4 or 8, preset small4 or small8 with small
// host and weight memories, sometimes a small unified buffer and accumulator
// memory so that the batch runs in chunks, sometimes other memory and unit
// timings), a batch of 1 to 4, the input (an H x W x C map with H, W in 1..7
// and C in 1..11, or a vector of 1..20 features) and 1 to 6 layers: conv2d
// (1..3 x 1..3 kernels, strides 1..2, padding up to the kernel less one on
// each side, 1..11 output channels, or depthwise), max- and average pooling
// (1..3 windows, strides 1..2, padding below the window), global average
// pooling (one in four a nearest upsampling by 1..3 x 1..3 instead), add (of
// the current tensor and an earlier one of its shape, or of
// itself), concat (one add in 16 instead: the current tensor and one or two
// earlier ones, or itself, along the channels), flatten and dense; a conv2d
// or pool may read an earlier tensor instead of the current one (a branch,
// which a later add or concat must join); one flatten of a map in four is an
// attention layer instead: a token_bias (0..3 prefix tokens, biases up to
// +-2^20 input steps: up to 65 passes) or a matmul of two activations
// (transposed: the current map times a 1 x 1 conv2d of it with zero point 0,
// Q K^T; not transposed: a map of H*W features, the current one or an
// earlier, times a 1 x 1 conv2d of the current H x W map, P V). Scales,
// zero points, activations (none, relu; sigmoid and tanh for dense and conv),
// bias ranges, weight and input value ranges and int32 output of the last
// dense or conv layer come from the bytes; the values themselves from a PRNG
// seeded by four of them, so inputs stay short.
//
// A network infer_network rejects is uninteresting. One it accepts is
// compiled with CompileMode::OnChip, which may only refuse it with a one-line
// message saying that it does not fit (unified buffer, accumulators, host or
// weight memory) or that a flattened map feeds something else than a dense
// layer (an on-chip limitation: compile_network's Auto mode then takes the
// host steps) or that a matmul's or token_bias's map is spilled to host memory
// (not implemented on chip), and is otherwise run on the SystemC model and checked:
// - one program, no fault, halted within the cycle limit;
// - the output equals compiler::reference_network bit for bit (shape, int32
//   flag, every element);
// - the per-layer cycles add up to the program's cycles, each layer's at
//   least its MMC rows.
// Networks whose layers need more than kMaxArrayMacs array MACs are skipped,
// to keep each execution fast. A failed check prints the network; with
// FUZZ_NET_PRINT set in the environment, every network is printed
// (FUZZ_NET_PRINT=1 fuzz_net FILE shows what an input means).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/layer_reference.h"
#include "compiler/network.h"
#include "compiler/quant.h"
#include "config/arch_config.h"
#include "fuzz_check.h"
#include "model/memories.h"
#include "model/tpu.h"
#include "runtime/run_network.h"

namespace {

using namespace tpu;
using compiler::Layer;
using compiler::LayerKind;
using compiler::Network;
using compiler::QuantParams;
using compiler::Tensor;
using compiler::TensorInfo;
using model::ActFunction;

constexpr std::uint64_t kMaxArrayMacs = 250'000;
constexpr model::Cycle kMaxCycles = 2'000'000;
constexpr std::size_t kMaxLayers = 6;

// The fuzz input, byte by byte; 0 once it is exhausted.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  // lo..hi (inclusive), from one byte.
  unsigned range(unsigned lo, unsigned hi) { return lo + u8() % (hi - lo + 1); }
  std::int32_t zero_point() { return static_cast<std::int32_t>(u8()) - 128; }
  // 0.001 .. 1, log-uniform.
  double scale() { return std::pow(10.0, -3.0 * u8() / 255.0); }
  // 2^(lo .. hi)
  double power_of_two(int lo, int hi) { return std::ldexp(1.0, lo + static_cast<int>(range(0, hi - lo))); }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | u8();
    return v;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

std::size_t element_count(const std::vector<std::size_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1}, std::multiplies<>());
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

// Int8 values in one of a few ranges: full (-127..127 as the docs' weights,
// or -128..127), small, or extremes only.
std::vector<std::int8_t> values(std::size_t count, unsigned mode, std::mt19937& rng) {
  std::vector<std::int8_t> v(count);
  std::uniform_int_distribution<int> full(-127, 127), all(-128, 127), small(-2, 2), pick(0, 2);
  const int extremes[] = {-128, -127, 127};
  for (auto& x : v) {
    int y;
    switch (mode) {
      case 5: y = small(rng); break;
      case 6: y = extremes[pick(rng)]; break;
      case 7: y = all(rng); break;
      default: y = full(rng); break;
    }
    x = static_cast<std::int8_t>(y);
  }
  return v;
}

// The network and everything needed to rebuild and describe it.
struct Case {
  ArchConfig cfg;
  std::uint64_t batch = 1;
  Network net;
  Tensor input;
  unsigned input_mode = 0;
};

std::string describe(const Case& c) {
  std::ostringstream o;
  o.precision(17);
  const ArchConfig& g = c.cfg;
  o << "\n  config " << g.preset << " N=" << g.array_n << " host_rows=" << g.host_rows
    << " weight_tiles=" << g.weight_tiles << " ub_rows=" << g.ub_rows << " acc_rows=" << g.acc_rows
    << " fifo_depth=" << g.fifo_depth << " host_latency=" << g.host_latency
    << " host_bytes_per_cycle=" << g.host_bytes_per_cycle << " weight_latency=" << g.weight_latency
    << " weight_bytes_per_cycle=" << g.weight_bytes_per_cycle << " act_latency=" << g.act_latency;
  o << "\n  batch " << c.batch << ", input " << shape_text(c.net.input_shape) << " scale "
    << c.net.input.scale << " zp " << c.net.input.zero_point << ", values "
    << (c.input_mode == 4 ? "all the zero point" : c.input_mode == 6 ? "-128, -127, 127" : "-128..127");
  for (std::size_t i = 0; i < c.net.layers.size(); ++i) {
    const Layer& l = c.net.layers[i];
    o << "\n  layer " << i << " (tensor " << i + 1 << "): " << compiler::layer_kind_name(l.kind);
    o << " inputs";
    for (std::size_t t : compiler::layer_inputs(c.net, i)) o << " " << t;
    switch (l.kind) {
      case LayerKind::Dense:
      case LayerKind::Conv2d: {
        o << " weights " << shape_text(l.weight_shape) << " scale " << l.weight_scale;
        if (l.kind == LayerKind::Conv2d)
          o << " stride " << l.stride_h << "," << l.stride_w << " pad t" << l.pad_top << " b"
            << l.pad_bottom << " l" << l.pad_left << " r" << l.pad_right << " groups " << l.groups;
        int lo = 0, hi = 0;
        for (auto w : l.weights) lo = std::min<int>(lo, w), hi = std::max<int>(hi, w);
        o << " w in [" << lo << "," << hi << "]";
        if (l.bias.empty()) {
          o << " no bias";
        } else {
          std::int32_t blo = l.bias[0], bhi = l.bias[0];
          for (auto b : l.bias) blo = std::min(blo, b), bhi = std::max(bhi, b);
          o << " bias in [" << blo << "," << bhi << "]";
        }
        o << " act " << model::act_function_name(l.act);
        if (l.int32_output) o << " int32 output";
        else o << " out scale " << l.output.scale << " zp " << l.output.zero_point;
        break;
      }
      case LayerKind::MaxPool2d:
      case LayerKind::AvgPool2d:
        o << " window " << l.kernel_h << "x" << l.kernel_w << " stride " << l.stride_h << ","
          << l.stride_w << " pad t" << l.pad_top << " b" << l.pad_bottom << " l" << l.pad_left
          << " r" << l.pad_right;
        [[fallthrough]];
      case LayerKind::GlobalAvgPool2d:
        if (l.kind != LayerKind::MaxPool2d) {
          if (l.output_is_input) o << " output = input quantization";
          else o << " out scale " << l.output.scale << " zp " << l.output.zero_point;
        }
        break;
      case LayerKind::Add:
        o << " act " << model::act_function_name(l.act) << " out scale " << l.output.scale << " zp "
          << l.output.zero_point;
        break;
      case LayerKind::Concat:
        o << " out scale " << l.output.scale << " zp " << l.output.zero_point;
        break;
      case LayerKind::Affine:
        o << " alpha " << l.alpha << " beta " << l.beta;
        [[fallthrough]];
      case LayerKind::Mul:
        o << " act " << model::act_function_name(l.act) << " out scale " << l.output.scale << " zp " << l.output.zero_point;
        break;
      case LayerKind::Upsample:
        o << " factors " << l.stride_h << "x" << l.stride_w;
        break;
      case LayerKind::MatMul:
        o << (l.transpose_b ? " transposed" : " not transposed") << " alpha " << l.alpha << " out scale "
          << l.output.scale << " zp " << l.output.zero_point;
        break;
      case LayerKind::TokenBias: {
        std::int32_t blo = l.bias[0], bhi = l.bias[0];
        for (auto b : l.bias) blo = std::min(blo, b), bhi = std::max(bhi, b);
        o << " prefix_tokens " << l.prefix_tokens << " bias in [" << blo << "," << bhi << "] out scale "
          << l.output.scale << " zp " << l.output.zero_point;
        break;
      }
      case LayerKind::Flatten:
      case LayerKind::Softmax:
      case LayerKind::LayerNorm:
      case LayerKind::Gelu: break;
    }
  }
  return o.str();
}

ArchConfig make_config(Bytes& in) {
  const std::uint8_t c = in.u8();
  const unsigned n = (c & 1) ? 8 : 4;
  ArchConfig cfg = preset_config(n == 8 ? "small8" : "small4");
  // Small host and weight memories: the model allocates them for every run.
  cfg.host_rows = 1u << 13;
  cfg.weight_tiles = 1u << 11;
  if ((c >> 1 & 3) == 3) {  // a small unified buffer and accumulator memory: chunks
    cfg.ub_rows = 16 + 8u * in.u8();
    cfg.acc_rows = 8 + 2u * in.u8();
  }
  if ((c >> 3 & 3) == 3) {  // other timings
    cfg.fifo_depth = in.range(1, 6);
    cfg.act_latency = in.range(1, 8);
    cfg.host_latency = in.range(0, 30);
    cfg.host_bytes_per_cycle = in.range(1, 32);
    cfg.weight_latency = in.range(0, 30);
    cfg.weight_bytes_per_cycle = in.range(1, 64);
  }
  validate(cfg);
  return cfg;
}

// The int8 output quantization of a dense or conv2d layer (not sigmoid or
// tanh) whose accumulators spread over about +-spread: mostly a scale that maps
// them to about +-50 times 2^-4..2^4, sometimes any scale.
QuantParams gemm_output(Bytes& in, double in_scale, double weight_scale, double spread) {
  QuantParams q;
  const std::uint8_t m = in.u8();
  q.scale = m % 4 == 3 ? in.scale() : in_scale * weight_scale * spread / 50.0 * in.power_of_two(-4, 4);
  q.zero_point = in.zero_point();
  return q;
}

// A dense or conv2d layer reading `x`; weight_shape set by the caller.
void fill_gemm(Layer& l, Bytes& in, std::mt19937& rng, const TensorInfo& x, bool last) {
  const std::size_t count = element_count(l.weight_shape);
  const std::size_t nout = l.weight_shape.back();
  const std::size_t k = count / nout;
  l.weights = values(count, in.range(0, 7), rng);
  const double spread = 128.0 * 73.0 * std::sqrt(static_cast<double>(k));
  switch (in.u8() % 5) {
    case 0: break;  // no bias
    case 1:
    case 2:
    case 3: {
      std::uniform_real_distribution<double> d(-spread, spread);
      l.bias.resize(nout);
      for (auto& b : l.bias) b = static_cast<std::int32_t>(std::lround(d(rng)));
      break;
    }
    case 4: {  // large: several constant passes
      std::uniform_int_distribution<std::int32_t> d(-(1 << 21), 1 << 21);
      l.bias.resize(nout);
      for (auto& b : l.bias) b = d(rng);
      break;
    }
  }
  const std::uint8_t a = in.u8();
  l.act = a % 8 == 6 ? ActFunction::Sigmoid : a % 8 == 7 ? ActFunction::Tanh
        : a % 2 ? ActFunction::Relu : ActFunction::None;
  if (l.act == ActFunction::Sigmoid || l.act == ActFunction::Tanh) {
    // The tables read y / 16: a spread of about +-64 (+-4 on the table).
    l.weight_scale = in.u8() % 4 == 3 ? in.scale() : 4.0 / (spread * x.quant.scale) * in.power_of_two(-2, 2);
    l.output = {compiler::kSigmoidTanhOutputScale, 0};
  } else {
    l.weight_scale = in.scale();
    l.output = gemm_output(in, x.quant.scale, l.weight_scale, spread);
    if (last && l.act == ActFunction::None && in.u8() % 4 == 0) l.int32_output = true;
  }
}

// A token_bias reading map `x` (docs/quantization.md, "Constant tokens and
// positions"): biases up to about +-2^(bits) input steps, the output scale
// putting the sum at about +-50 times 2^-2..2^2, sometimes any scale.
void fill_token_bias(Layer& l, Bytes& in, std::mt19937& rng, const TensorInfo& x) {
  l.kind = LayerKind::TokenBias;
  l.prefix_tokens = in.range(0, 3);
  const std::size_t tokens = l.prefix_tokens + x.shape[0] * x.shape[1];
  const int bits = static_cast<int>(in.range(0, 20));
  std::uniform_int_distribution<std::int32_t> d(-(1 << bits), 1 << bits);
  l.bias.resize(tokens * x.shape[2]);
  for (auto& b : l.bias) b = d(rng);
  const double spread = 128.0 + std::ldexp(1.0, bits);
  l.output = {in.u8() % 4 == 3 ? in.scale() : x.quant.scale * spread / 50.0 * in.power_of_two(-2, 2),
              in.zero_point()};
}

// The second operand of a matmul: a 1 x 1 conv2d of map `x` (tensor `src`)
// to `cout` channels, zero point 0 (symmetric, as a matmul's B must be).
Layer matmul_operand(Bytes& in, std::mt19937& rng, const TensorInfo& x, std::size_t src, std::size_t cout,
                     const std::string& name) {
  Layer b;
  b.name = name;
  b.kind = LayerKind::Conv2d;
  b.inputs = {src};
  b.weight_shape = {1, 1, x.shape[2], cout};
  fill_gemm(b, in, rng, x, false);
  b.act = ActFunction::None;
  b.output = gemm_output(in, x.quant.scale, b.weight_scale, 128.0 * 73.0 * std::sqrt(double(x.shape[2])));
  b.output.zero_point = 0;
  return b;
}

// Reads the network; false when the bytes make one infer_network rejects.
bool make_case(Bytes& in, Case& c) {
  c.cfg = make_config(in);
  std::mt19937 rng(in.u32());
  c.batch = in.range(1, 4);
  Network& net = c.net;
  net.name = "fuzz";
  if (in.u8() % 8 == 7) {
    net.input_shape = {in.range(1, 20)};
  } else {
    const std::size_t h = in.range(1, 7), w = in.range(1, 7), ch = in.range(1, 11);
    net.input_shape = {h, w, ch};
  }
  net.input = {in.scale(), in.zero_point()};
  c.input_mode = in.range(0, 7);
  const std::size_t layers = in.range(1, kMaxLayers);
  std::vector<TensorInfo> infos = compiler::infer_network(net, false);
  std::vector<bool> read(1, false);

  for (std::size_t i = 0; i < layers; ++i) {
    const bool last = i + 1 == layers;
    const std::size_t cur = net.layers.size();  // the current tensor's id
    Layer l;
    l.name = "l" + std::to_string(cur);
    const std::uint8_t kind = in.u8() % 8;
    // A conv2d or pool may branch off an earlier map.
    std::size_t src = cur;
    if (kind <= 4 && in.u8() % 8 == 0) {
      std::vector<std::size_t> maps;
      for (std::size_t t = 0; t < cur; ++t)
        if (infos[t].shape.size() == 3) maps.push_back(t);
      if (!maps.empty()) src = maps[in.u8() % maps.size()];
    }
    const bool is_map = infos[src].shape.size() == 3;
    if (!is_map && kind <= 4) src = cur;  // a vector: dense (below) instead of a map layer
    const TensorInfo& x = infos[src];
    if (src != cur) l.inputs = {src};

    if (is_map && (kind == 0 || kind == 1)) {
      l.kind = LayerKind::Conv2d;
      const auto h = static_cast<unsigned>(x.shape[0]), w = static_cast<unsigned>(x.shape[1]);
      const std::size_t ch = x.shape[2];
      l.kernel_h = std::min(in.range(1, 3), h);
      l.kernel_w = std::min(in.range(1, 3), w);
      l.stride_h = in.range(1, 2);
      l.stride_w = in.range(1, 2);
      l.pad_top = in.range(0, l.kernel_h - 1);
      l.pad_bottom = in.range(0, l.kernel_h - 1);
      l.pad_left = in.range(0, l.kernel_w - 1);
      l.pad_right = in.range(0, l.kernel_w - 1);
      if (kind == 1) {  // depthwise
        l.groups = static_cast<unsigned>(ch);
        l.weight_shape = {l.kernel_h, l.kernel_w, 1, ch};
      } else {
        l.weight_shape = {l.kernel_h, l.kernel_w, ch, in.range(1, 11)};
      }
      fill_gemm(l, in, rng, x, last);
    } else if (is_map && (kind == 2 || kind == 3)) {
      l.kind = kind == 2 ? LayerKind::MaxPool2d : LayerKind::AvgPool2d;
      l.kernel_h = std::min(in.range(1, 3), static_cast<unsigned>(x.shape[0]));
      l.kernel_w = std::min(in.range(1, 3), static_cast<unsigned>(x.shape[1]));
      l.stride_h = in.range(1, 2);
      l.stride_w = in.range(1, 2);
      l.pad_top = in.range(0, l.kernel_h - 1);
      l.pad_bottom = in.range(0, l.kernel_h - 1);
      l.pad_left = in.range(0, l.kernel_w - 1);
      l.pad_right = in.range(0, l.kernel_w - 1);
    } else if (is_map && kind == 4) {
      l.kind = LayerKind::GlobalAvgPool2d;
      if (in.u8() % 4 == 3) {  // one in four: nearest upsampling instead
        l.kind = LayerKind::Upsample;
        l.stride_h = in.range(1, 3);
        l.stride_w = in.range(1, 3);
      }
    } else if (kind == 5) {
      l.kind = LayerKind::Add;
      l.inputs.clear();
      // An earlier tensor of the current one's shape, preferring one no
      // layer reads yet (a branch to join); or the current one itself.
      std::vector<std::size_t> same, unread;
      for (std::size_t t = 0; t < cur; ++t)
        if (infos[t].shape == infos[cur].shape && !infos[t].int32) {
          same.push_back(t);
          if (!read[t]) unread.push_back(t);
        }
      const std::uint8_t p = in.u8();
      if (p % 16 == 14) {
        // A layer of the vector unit instead: an affine of the current tensor
        // (random alpha, beta, function), or a mul of it by a tensor of its
        // shape or, for a map, by an earlier 1 x 1 x C vector (broadcast).
        const std::uint8_t v = in.u8();
        const ActFunction acts[] = {ActFunction::None, ActFunction::Relu, ActFunction::Sigmoid, ActFunction::Tanh};
        l.act = acts[v / 2 % 4];
        l.inputs = {cur};
        if (v % 2) {
          l.kind = LayerKind::Affine;
          l.alpha = (static_cast<double>(in.u8()) - 128.0) / 32.0;
          l.beta = (static_cast<double>(in.u8()) - 128.0) / 16.0;
          const double span = std::fabs(l.alpha) * infos[cur].quant.scale * 255.0 + std::fabs(l.beta) + 1e-3;
          l.output = {in.u8() % 4 == 3 ? in.scale() : span / 255.0 * in.power_of_two(-1, 1), in.zero_point()};
        } else {
          l.kind = LayerKind::Mul;
          std::vector<std::size_t> fits, vectors;
          const auto& s = infos[cur].shape;
          for (std::size_t t = 0; t <= cur; ++t) {
            const auto& u = infos[t].shape;
            if (infos[t].int32) continue;
            if (u == s) fits.push_back(t);
            else if (s.size() == 3 && u.size() == 3 && u[0] == 1 && u[1] == 1 && u[2] == s[2]) vectors.push_back(t);
          }
          // A broadcast vector when there is one, every other time.
          const bool bc = !vectors.empty() && in.u8() % 2;
          const std::size_t other = bc ? vectors[in.u8() % vectors.size()] : fits[in.u8() % fits.size()];
          l.inputs.push_back(other);
          const double prod = infos[cur].quant.scale * infos[other].quant.scale * 255.0 * 255.0 / 4.0;
          l.output = {in.u8() % 4 == 3 ? in.scale() : prod / 255.0 * in.power_of_two(-2, 2), in.zero_point()};
        }
        net.layers.push_back(std::move(l));
        try {
          infos = compiler::infer_network(net, false);
        } catch (const compiler::CompileError&) {
          return false;
        }
        for (std::size_t t : compiler::layer_inputs(net, cur)) read[t] = true;
        read.push_back(false);
        continue;
      }
      if (p % 16 == 15) {
        // A concat along the last axis instead: the current tensor and one or
        // two earlier ones (or itself) whose other dimensions match.
        l.kind = LayerKind::Concat;
        std::vector<std::size_t> fits;
        for (std::size_t t = 0; t <= cur; ++t) {
          const auto& s = infos[t].shape;
          if (!infos[t].int32 && s.size() == infos[cur].shape.size() &&
              std::equal(s.begin(), s.end() - 1, infos[cur].shape.begin()))
            fits.push_back(t);
        }
        const std::size_t parts = in.range(2, 3);
        l.inputs = {cur};
        double hi = infos[cur].quant.scale;
        for (std::size_t k = 1; k < parts; ++k) {
          const std::size_t t = fits[in.u8() % fits.size()];
          l.inputs.insert(in.u8() & 1 ? l.inputs.end() : l.inputs.begin(), t);
          hi = std::max(hi, infos[t].quant.scale);
        }
        l.output = {in.u8() % 4 == 3 ? in.scale() : hi * in.power_of_two(-2, 2), in.zero_point()};
        net.layers.push_back(std::move(l));
        try {
          infos = compiler::infer_network(net, false);
        } catch (const compiler::CompileError&) {
          return false;
        }
        for (std::size_t t : compiler::layer_inputs(net, cur)) read[t] = true;
        read.push_back(false);
        continue;
      }
      std::size_t other = cur;
      if (!unread.empty() && p % 4 != 3) other = unread[p / 4 % unread.size()];
      else if (!same.empty() && p % 8 != 7) other = same[p / 8 % same.size()];
      const bool swap = in.u8() & 1;
      l.inputs = swap ? std::vector<std::size_t>{other, cur} : std::vector<std::size_t>{cur, other};
      l.act = in.u8() & 1 ? ActFunction::Relu : ActFunction::None;
      const double hi = std::max(infos[cur].quant.scale, infos[other].quant.scale);
      l.output = {in.u8() % 4 == 3 ? in.scale() : hi * in.power_of_two(-2, 2), in.zero_point()};
    } else if (is_map && (kind == 6 || kind == 7) && in.u8() % 4 == 3) {
      const TensorInfo& c_info = infos[cur];
      if (in.u8() % 2 || c_info.shape.size() != 3 || c_info.int32) {
        fill_token_bias(l, in, rng, x);
      } else {
        // A matmul: B a 1 x 1 conv2d of the current map (pushed first), A the
        // current map (transposed) or a map of H*W features (not).
        const std::size_t tokens = c_info.shape[0] * c_info.shape[1];
        std::vector<std::size_t> as;
        for (std::size_t t = 0; t <= cur; ++t)
          if (infos[t].shape.size() == 3 && !infos[t].int32 && infos[t].shape[2] == tokens) as.push_back(t);
        l.kind = LayerKind::MatMul;
        l.transpose_b = as.empty() || in.u8() % 2;
        const std::size_t a = l.transpose_b ? cur : as[in.u8() % as.size()];
        const std::size_t cout = l.transpose_b ? c_info.shape[2] : in.range(1, 11);
        net.layers.push_back(matmul_operand(in, rng, c_info, cur, cout, "l" + std::to_string(cur)));
        try {
          infos = compiler::infer_network(net, false);
        } catch (const compiler::CompileError&) {
          return false;
        }
        read[cur] = true;
        read.push_back(false);
        const std::size_t b = cur + 1;
        l.name = "l" + std::to_string(b);
        l.inputs = {a, b};
        l.alpha = in.power_of_two(-3, 1);
        const double k = static_cast<double>(infos[a].shape[2]);
        const double spread = 128.0 * 64.0 * std::sqrt(k);
        l.output = {in.u8() % 4 == 3 ? in.scale()
                                     : l.alpha * infos[a].quant.scale * infos[b].quant.scale * spread / 50.0 *
                                           in.power_of_two(-3, 3),
                    in.zero_point()};
        net.layers.push_back(std::move(l));
        try {
          infos = compiler::infer_network(net, false);
        } catch (const compiler::CompileError&) {
          return false;
        }
        for (std::size_t t : compiler::layer_inputs(net, b)) read[t] = true;
        read.push_back(false);
        continue;
      }
    } else if (kind == 6 || (is_map && kind == 7)) {
      l.kind = LayerKind::Flatten;
    } else {
      l.kind = LayerKind::Dense;
      l.weight_shape = {x.shape[0], in.range(1, 20)};
      fill_gemm(l, in, rng, x, last);
    }
    if (l.kind == LayerKind::AvgPool2d || l.kind == LayerKind::GlobalAvgPool2d) {
      if (in.u8() % 2) {
        l.output_is_input = true;
      } else {
        l.output = {in.u8() % 4 == 3 ? in.scale() : x.quant.scale * in.power_of_two(-3, 3), in.zero_point()};
      }
    }
    net.layers.push_back(std::move(l));
    try {
      infos = compiler::infer_network(net, false);
    } catch (const compiler::CompileError&) {
      return false;
    }
    for (std::size_t t : compiler::layer_inputs(net, cur)) read[t] = true;
    read.push_back(false);
  }
  try {
    compiler::infer_network(net);
  } catch (const compiler::CompileError&) {
    return false;
  }

  c.input.shape = {c.batch};
  c.input.shape.insert(c.input.shape.end(), net.input_shape.begin(), net.input_shape.end());
  c.input.data.resize(element_count(c.input.shape));
  if (c.input_mode == 4) {  // all at the zero point: a real zero everywhere
    std::fill(c.input.data.begin(), c.input.data.end(), net.input.zero_point);
  } else {
    const std::vector<std::int8_t> v = values(c.input.data.size(), c.input_mode == 6 ? 6 : 7, rng);
    std::copy(v.begin(), v.end(), c.input.data.begin());
  }
  return true;
}

// The array MACs of the network's layers (MMC rows times N x N), roughly.
std::uint64_t array_macs(const Case& c) {
  const std::vector<TensorInfo> infos = compiler::infer_network(c.net);
  const std::uint64_t n = c.cfg.array_n, b = c.batch;
  std::uint64_t macs = 0;
  for (std::size_t i = 0; i < c.net.layers.size(); ++i) {
    const Layer& l = c.net.layers[i];
    const TensorInfo& x = infos[compiler::layer_inputs(c.net, i)[0]];
    const TensorInfo& y = infos[i + 1];
    switch (l.kind) {
      case LayerKind::Dense:
        macs += b * ceil_div(l.weight_shape[0], n) * ceil_div(l.weight_shape[1], n) * n * n;
        break;
      case LayerKind::Conv2d: {
        const std::uint64_t rows = b * y.shape[0] * y.shape[1] * l.kernel_h * l.kernel_w;
        macs += rows * ceil_div(x.shape[2], n) * (l.groups == 1 ? ceil_div(y.shape[2], n) : 1) * n * n;
        break;
      }
      case LayerKind::Add: {  // a map's pixels, or a vector (one row per sample)
        const std::uint64_t pixels = y.shape.size() == 3 ? y.shape[0] * y.shape[1] : 1;
        macs += 2 * b * pixels * ceil_div(y.shape.back(), n) * n * n;
        break;
      }
      case LayerKind::Concat: {  // per output group, a pass per overlapping input plane
        const std::uint64_t pixels = y.shape.size() == 3 ? y.shape[0] * y.shape[1] : 1;
        std::uint64_t planes = ceil_div(y.shape.back(), n);
        for (std::size_t t : compiler::layer_inputs(c.net, i)) planes += ceil_div(infos[t].shape.back(), n);
        macs += b * pixels * planes * n * n;
        break;
      }
      case LayerKind::MatMul:  // A's tokens by its K tiles by the output tiles
        macs += b * x.shape[0] * x.shape[1] * ceil_div(x.shape[2], n) * ceil_div(y.shape[2], n) * n * n;
        break;
      case LayerKind::TokenBias: {  // per output group: the identity, the input and every digit plane
        std::int64_t hi = 0;
        for (std::int32_t v : l.bias) hi = std::max<std::int64_t>(hi, std::abs(static_cast<std::int64_t>(v)) + 128);
        const std::uint64_t planes = 2 + static_cast<std::uint64_t>(hi / (127 * 127) + 1);
        macs += b * y.shape[1] * planes * ceil_div(y.shape[2], n) * n * n;
        break;
      }
      default: break;
    }
  }
  return macs;
}

// What compile_on_chip may say about a network infer_network accepts.
bool does_not_fit(const std::string& m) {
  return m.find("does not fit") != std::string::npos ||
         m.find("of host memory, there are") != std::string::npos ||
         m.find("weight memory has") != std::string::npos ||
         m.find("on chip, a flattened map can only feed dense layers") != std::string::npos ||
         // a matmul or token_bias of a map the compiler keeps in host memory
         m.find("spilled to host memory is not implemented on chip") != std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in(data, size);
  Case c;
  if (!make_case(in, c)) return 0;
  static const bool print = std::getenv("FUZZ_NET_PRINT") != nullptr;
  if (print) std::fprintf(stderr, "fuzz_net: %s\n", describe(c).c_str());
  if (const std::uint64_t macs = array_macs(c); macs > kMaxArrayMacs) {
    if (print) std::fprintf(stderr, "fuzz_net: skipped: %llu array MACs\n", static_cast<unsigned long long>(macs));
    return 0;
  }
  const ArchConfig& cfg = c.cfg;

  compiler::NetworkPlan plan;
  try {
    plan = compiler::compile_network(c.net, c.batch, cfg, compiler::CompileMode::OnChip);
  } catch (const compiler::CompileError& e) {
    const std::string m = e.what();
    FUZZ_CHECK(fuzz::one_line(m), m + describe(c));
    FUZZ_CHECK(does_not_fit(m), "compile_network refused a valid network: " + m + describe(c));
    if (print) std::fprintf(stderr, "fuzz_net: does not fit: %s\n", m.c_str());
    return 0;
  }
  FUZZ_CHECK(plan.on_chip_plan && plan.program_count() == 1 && plan.steps.size() == 1,
             "on chip: not one program" + describe(c));

  model::RunOptions opts;
  opts.max_cycles = kMaxCycles;
  const compiler::NetworkRun run = compiler::run_network(
      plan, c.input, cfg,
      [&](std::size_t, const compiler::ProgramPlan& seg, model::Memories& mem) {
        return model::run_program(cfg, seg.program, mem, opts);
      });
  FUZZ_CHECK(run.logs.size() == 1, "runs" + describe(c));
  const model::RunLog& log = run.logs.back();
  FUZZ_CHECK(!run.fault && log.halted && !log.fault,
             (log.fault ? log.fault->message() : std::string("did not halt within the cycle limit")) +
                 describe(c));

  const Tensor want = compiler::reference_network(c.net, c.input);
  const Tensor& got = run.output;
  FUZZ_CHECK(got.shape == want.shape,
             "output shape " + shape_text(got.shape) + ", reference " + shape_text(want.shape) + describe(c));
  FUZZ_CHECK(got.int32 == want.int32, "int32 flag" + describe(c));
  FUZZ_CHECK(got.data.size() == want.data.size(), "output size" + describe(c));
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < want.data.size(); ++i)
    if (got.data[i] != want.data[i] && mismatches++ == 0) first = i;
  FUZZ_CHECK(mismatches == 0, std::to_string(mismatches) + " of " + std::to_string(want.data.size()) +
                                  " output elements differ; element " + std::to_string(first) + " = " +
                                  std::to_string(mismatches ? got.data[first] : 0) + ", reference " +
                                  std::to_string(mismatches ? want.data[first] : 0) + describe(c));

  std::uint64_t layer_cycles = 0;
  for (std::size_t i = 0; i < run.layers.size(); ++i) {
    const compiler::LayerStats& ls = run.layers[i];
    layer_cycles += ls.cycles;
    FUZZ_CHECK(ls.cycles >= ls.mmc_rows, "layer " + std::to_string(i) + ": " + std::to_string(ls.cycles) +
                                             " cycles, " + std::to_string(ls.mmc_rows) + " MMC rows" + describe(c));
  }
  FUZZ_CHECK(layer_cycles == log.stats.cycles, "layer cycles " + std::to_string(layer_cycles) + ", program " +
                                                   std::to_string(log.stats.cycles) + describe(c));
  if (print)
    std::fprintf(stderr, "fuzz_net: ok: %llu cycles, chunks of %llu samples%s\n",
                 static_cast<unsigned long long>(log.stats.cycles),
                 static_cast<unsigned long long>(plan.on_chip_plan->chunk_units),
                 plan.on_chip_plan->in_im2col ? ", the host lays out the first conv's im2col" : "");
  return 0;
}
