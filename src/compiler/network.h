// Quantized networks on the TPU: the network IR (layers, tensors and their
// shapes, infer_network in graph.cpp), the plans the network compiler makes
// of them (a plan type per mapping) and the compiler's entry. The runtime
// that runs plans is apart (runtime/run_network.h).
//
// Two mappings (docs/quantization.md, "How layers map to the TPU"):
// - On chip (compile_on_chip.cpp): the whole network as one program. Tensors
//   live in the unified buffer as planes (channel group, sample, pixel; one
//   row each), allocated by liveness; convolutions read their input maps with
//   MMC.C (depthwise with diagonal tiles), pools run in the activation unit
//   (POOL), adds go through the array with diagonal tiles, biases and input
//   zero points enter through a constant plane generated on chip.
// - With host steps (segment_compiler.cpp): dense and conv2d are GEMMs on
//   the array (a conv's rows are output pixels of its im2col, laid out by the
//   host); a program runs a chain of layers whose input needs no
//   rearrangement, and the host does im2col, max-pool and flatten between
//   programs. Biases enter through constant input lanes (quant.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/gemm.h"
#include "compiler/quant.h"
#include "config/arch_config.h"
#include "isa/program.h"

namespace tpu::compiler {

enum class LayerKind {
  Dense, Conv2d, MaxPool2d, Flatten, AvgPool2d, GlobalAvgPool2d, Add, Concat, Mul, Affine, Upsample,
  // --- attention (docs/quantization.md, "Softmax and attention") ---
  Softmax, MatMul,
  // Transformer layers on the activation unit (docs/quantization.md, "Transformer layers").
  LayerNorm, Gelu,
  // Constant tokens in front of a token sequence and a constant per position
  // (ViT's class token and positional embedding: docs/quantization.md,
  // "Constant tokens and positions").
  TokenBias,
};
// "dense", "conv2d", "maxpool2d", "flatten", "avgpool2d", "global_avgpool2d", "add", "concat",
// "mul", "affine", "upsample", "softmax", "matmul", "layernorm", "gelu", "token_bias"
const char* layer_kind_name(LayerKind kind);

struct Layer {
  LayerKind kind = LayerKind::Dense;
  std::string name;
  // Dense: K x Nout; Conv2d: KH x KW x Cin x Cout (HWIO). Row-major int8,
  // symmetric (zero point 0) at weight_scale.
  std::vector<std::size_t> weight_shape;
  std::vector<std::int8_t> weights;
  // Nout (Cout) int32 at scale input_scale * weight_scale; empty: all zero.
  std::vector<std::int32_t> bias;
  double weight_scale = 1.0;
  // Output: int8 at `output` after requantization and `act`, or the raw int32
  // accumulators (scale input_scale * weight_scale; last layer only).
  bool int32_output = false;
  QuantParams output;
  model::ActFunction act = model::ActFunction::None;
  // Conv2d: kernel from weight_shape, stride and padding. MaxPool2d and
  // AvgPool2d: window (kernel_h x kernel_w), stride and padding.
  unsigned kernel_h = 1, kernel_w = 1;
  unsigned stride_h = 1, stride_w = 1;
  unsigned pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  // Upsample (nearest): the integer factors are stride_h and stride_w
  // (docs/quantization.md, "Nearest upsampling"); the output keeps the
  // input's quantization.
  // Conv2d: 1, or the input channels (depthwise: weights KH x KW x 1 x C).
  unsigned groups = 1;
  // AvgPool2d, GlobalAvgPool2d: the output keeps the input's quantization
  // (`output` is ignored). Add and the pools take no int32 output.
  bool output_is_input = false;
  // The tensors the layer reads, as tensor ids: 0 is the network input, i + 1
  // the output of layer i (the indices of infer_network's result). Empty:
  // the previous tensor (i for layer i). Add reads two, concat two or more
  // (along the channels, docs/quantization.md), dense one or more (its K rows
  // the inputs' features in order: docs/quantization.md, "Recurrent layers"),
  // every other layer one.
  std::vector<std::size_t> inputs;
  // Dense: -1, or the pixel (row-major) of its first input, an HxWxC map, that
  // it reads (that pixel's C channels are its first K rows): one time step of a
  // sequence held as a 1 x L x D map.
  std::int64_t pixel = -1;
  // Affine (on the vector unit): y = act(alpha * x + beta) in real terms
  // (docs/quantization.md, "Layers on the vector unit"). Mul reads two
  // tensors: the same shape, or a map and a 1 x 1 x C vector (the second).
  double alpha = 1.0, beta = 0.0;
  // Softmax: over the last axis (each pixel's channels), with SMAX; the
  // output is fixed at kSoftmaxOutput (attention.h), `output` not read.
  // MatMul of two activations A (an H x W x K map: H*W tokens of K features)
  // and B, symmetric (zero point 0): with transpose_b B is H' x W' x K and the
  // output H x W x (H'*W') (A B^T); without, B is H' x W' x C with H'*W' = K
  // and the output H x W x C (A B). `alpha` scales the product (attention's
  // 1/sqrt(dk)); docs/quantization.md, "MatMul of two activations".
  bool transpose_b = false;
  // LayerNorm (LNRM, without the affine gamma/beta: docs/quantization.md,
  // "Transformer layers"): the variance's epsilon; the token is the last axis
  // (a map's pixel, or a 1-D tensor whole).
  double eps = 1e-5;
  // TokenBias: an H x W x C map's H*W pixels as tokens; the output is
  // 1 x (prefix_tokens + H*W) x C: prefix_tokens tokens of zeros in front, then
  // `bias` (one int32 per output token and channel, row-major, at the input's
  // scale) added and the sum requantized to `output`.
  unsigned prefix_tokens = 0;
};


// Conv2d or dense weights as a K x Nout matrix: row k, column o.
inline std::int8_t weight_at(const Layer& l, std::uint64_t k, std::uint64_t o) {
  return l.weights[k * l.weight_shape.back() + o];
}

// A conv2d's or dense layer's folded bias per output: b - z_in * (the sum of
// the weights feeding it), wrapped to int32 (docs/quantization.md); both
// network compilers' (quant.cpp).
std::vector<std::int64_t> folded_bias(const Layer& l, std::int32_t zin);
// The same for a dense layer of several inputs: part j is `rows` K rows read
// at zero point `zin` (in order; docs/quantization.md, "Recurrent layers").
struct KPart {
  std::uint64_t rows = 0;
  std::int32_t zin = 0;
};
std::vector<std::int64_t> folded_bias(const Layer& l, const std::vector<KPart>& parts);

struct Network {
  std::string name;
  std::vector<std::size_t> input_shape;  // one sample: {features} or {H, W, C}
  QuantParams input;
  std::vector<Layer> layers;
};

// Tensor ids of layer i's inputs (Layer::inputs, or {i} when it is empty).
std::vector<std::size_t> layer_inputs(const Network& net, std::size_t i);
// True when every layer reads the previous tensor (the network is a chain).
bool is_chain(const Network& net);

// One sample's tensor between layers.
struct TensorInfo {
  std::vector<std::size_t> shape;  // {features} or {H, W, C}
  QuantParams quant;               // for int32: scale = input_scale * weight_scale, zero point 0
  bool int32 = false;
};

// infos[0] is the network input, infos[i + 1] the output of layer i. Checks
// every layer (shapes, sizes, quantization parameters); throws CompileError.
// With `check_unread` false, a layer whose output no later layer reads is
// allowed (a prefix of a network).
std::vector<TensorInfo> infer_network(const Network& net, bool check_unread = true);

// A batch of tensors, sample-major, C order: int8 values (or int32).
struct Tensor {
  std::vector<std::size_t> shape;  // {batch, ...}
  bool int32 = false;
  std::vector<std::int32_t> data;
  std::size_t batch() const { return shape.empty() ? 0 : shape[0]; }
};

// The requantization of an average pooling layer from input `in` to `out`:
// real multiplier in.scale / (window * out.scale). Throws CompileError naming `what`.
model::Requant avgpool_requant(const Layer& pool, const TensorInfo& in, const TensorInfo& out,
                               const std::string& what);

// What every program of a network plan has, whichever compiler made it:
// its code and weights, the layers it runs, the units (samples, or rows of
// its first layer) it processes chunk by chunk, and its output's place.
struct ProgramPlan {
  std::vector<std::size_t> layers;  // network layer indices run by this program, in order
  isa::Program program;
  std::string assembly;
  std::vector<std::int8_t> weights;  // weight memory image, tiles x N x N
  std::uint64_t weight_tiles_used = 0;
  std::uint64_t host_rows_used = 0;
  // The network layer each instruction is charged to (per pc).
  std::vector<std::size_t> instruction_layer;
  // Chunks: `chunk_units` units (samples, or rows of the first layer) per
  // chunk, `units` in all.
  bool unit_is_sample = false;
  std::uint64_t units = 0, chunk_units = 0;
  // Output: the last layer's, from host row out_host_row (int8, or int32 as
  // four host rows per accumulator row).
  std::uint64_t out_host_row = 0;
  bool out_int32 = false;
  std::vector<std::size_t> out_shape;  // one sample
  std::uint64_t array_n = 0;
};

// A program of the host-step compiler (segment_compiler.cpp): a chain of
// GEMM layers, its host memory in GEMM rows.
struct SegmentPlan : ProgramPlan {
  // Input: the first layer's GEMM rows, in host memory from row 0, chunk by
  // chunk, K tile by K tile (like compile_gemm); rows_per_unit_in rows per
  // unit; pixel-major inside a chunk when unit_is_sample and the first layer is
  // a conv2d. Lanes past K hold the constant `host_lane_values` (0 if absent).
  std::uint64_t in_k = 0, in_k_tiles = 0, rows_per_unit_in = 1;
  std::vector<std::pair<std::uint64_t, std::int8_t>> host_lane_values;  // (lane >= K, value)
  // The constant block: rows of `const_lane_values` at host row const_host_row.
  std::uint64_t const_host_row = 0, const_rows = 0;
  std::vector<std::int8_t> const_lane_values;
  // Output: the last layer's rows, column tile by column tile, at out_host_row.
  std::uint64_t out_rows = 0, out_cols = 0, out_col_tiles = 0;
};

// The on-chip compiler's program (compile_on_chip.cpp): the whole network,
// its tensors laid out as planes: chunk by chunk (samples c*chunk_units ..),
// channel group g (N channels, one per lane) by sample n by pixel p, one row
// each: row (g*bc + n)*P + p of the chunk for a chunk of bc samples. The
// input is at host row 0 (chunk c at c * chunk_units * in_groups *
// in_pixels) or, with in_im2col, the im2col of layer `in_im2col_layer` (its
// K tiles as groups, its output pixels as pixels); the output at
// out_host_row, its channels out_channels of the map it is a view of.
struct OnChipPlan : ProgramPlan {
  std::uint64_t in_groups = 0, in_pixels = 0;
  bool in_im2col = false;
  std::size_t in_im2col_layer = 0;
  std::uint64_t out_groups = 0, out_pixels = 0, out_channels = 0;
  // Constant rows the host writes with the input, from host row
  // host_constants_row (N int8 each): a token_bias's bias as int8 digit
  // planes (docs/quantization.md, "Constant tokens and positions").
  std::vector<std::int8_t> host_constants;
  std::uint64_t host_constants_row = 0;
  std::string summary;  // what the compiler chose, for the plan printout
};

// What the network does, step by step: a host operation on layer `layer`, or
// program `segment`.
struct NetworkStep {
  bool on_host = false;
  std::size_t layer = 0;
  std::size_t segment = 0;
};

// A compiled network: its steps and what the compiler that made it needs
// to run them, the programs of the host-step compiler (`segment_plans`) or the
// one program of the on-chip compiler (`on_chip_plan`).
struct NetworkPlan {
  Network net;
  std::vector<TensorInfo> infos;
  std::uint64_t batch = 0;
  std::vector<NetworkStep> steps;
  std::vector<SegmentPlan> segment_plans;  // compile_segments: a program per chain of layers
  std::optional<OnChipPlan> on_chip_plan;  // compile_on_chip: the whole network, program 0
  std::vector<std::optional<std::size_t>> layer_segment;  // per layer: its program, or host
  // The programs, whichever compiler made them.
  std::size_t program_count() const { return on_chip_plan ? 1 : segment_plans.size(); }
  const ProgramPlan& program(std::size_t k) const {
    if (on_chip_plan) return *on_chip_plan;
    return segment_plans.at(k);
  }
};

// How compile_network maps a network:
// - OnChip: one program for the whole network (compile_on_chip.cpp): every
//   layer on the TPU, feature maps kept in the unified buffer, convolutions
//   by MMC.C, pooling by POOL, adds through the array; the host only lays out
//   the input (possibly as the first layer's im2col) and reads the output.
// - Segments: the host-step compiler (a program per chain of layers that
//   need no rearrangement, im2col, max-pool and flatten on the host between
//   programs); for chains of dense, conv2d, unpadded max-pool and flatten.
// - Auto: OnChip when the network fits (weights in weight memory, one
//   sample's live maps in the unified buffer), else Segments.
enum class CompileMode { Auto, OnChip, Segments };

// Compiles `net` for a batch of `batch` samples. Throws CompileError.
NetworkPlan compile_network(const Network& net, std::uint64_t batch, const ArchConfig& cfg,
                            CompileMode mode = CompileMode::Auto);
// The two mappings (compile_network's OnChip and Segments).
NetworkPlan compile_on_chip(const Network& net, std::uint64_t batch, const ArchConfig& cfg);
NetworkPlan compile_segments(const Network& net, std::uint64_t batch, const ArchConfig& cfg);

}  // namespace tpu::compiler
