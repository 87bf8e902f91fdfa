// The network as a graph of layers: which tensors each layer reads, and the
// shape and quantization of every tensor (infer_network), with every check of
// a layer's definition against its inputs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/plural.h"
#include "compiler/attention.h"
#include "compiler/network.h"
#include "compiler/quant.h"
#include "compiler/norm_quant.h"
#include "compiler/shapes.h"

namespace tpu::compiler {
namespace {

void check_quant(const QuantParams& q, const std::string& what) {
  if (!(q.scale > 0.0) || !std::isfinite(q.scale))
    throw CompileError(fmt::format("{}: scale {} is not positive and finite", what, q.scale));
  if (q.zero_point < -128 || q.zero_point > 127)
    throw CompileError(fmt::format("{}: zero point {} is outside -128..127", what, q.zero_point));
}

void need_map(const TensorInfo& in, const std::string& what, const char* kind) {
  if (in.shape.size() != 3)
    throw CompileError(fmt::format("{}: {} needs an HxWxC input, got {}", what, kind,
                                   shape_text(in.shape)));
}

// The K rows a dense layer reads: its inputs' features in order, of the
// first input's pixel `l.pixel` only when it is set (docs/quantization.md,
// "Recurrent layers").
std::size_t dense_k(const Layer& l, const std::vector<std::size_t>& ids, const std::vector<TensorInfo>& infos,
                    const std::string& what) {
  std::size_t k = 0;
  for (std::size_t j = 0; j < ids.size(); ++j) {
    const TensorInfo& in = infos[ids[j]];
    if (j == 0 && l.pixel >= 0) {
      if (in.shape.size() != 3)
        throw CompileError(fmt::format("{}: a dense layer reading pixel {} needs an HxWxC input, got {}", what,
                                       l.pixel, shape_text(in.shape)));
      if (static_cast<std::uint64_t>(l.pixel) >= std::uint64_t{in.shape[0]} * in.shape[1])
        throw CompileError(fmt::format("{}: pixel {} is outside the {} input", what, l.pixel,
                                       shape_text(in.shape)));
      k += in.shape[2];
      continue;
    }
    if (in.shape.size() != 1)
      throw CompileError(fmt::format("{}: a dense layer needs a 1-D input (add a flatten), got {}",
                                     what, shape_text(in.shape)));
    k += in.shape[0];
  }
  return k;
}

// `dense_in`: a dense layer's K (dense_k); conv2d reads `cur`.
TensorInfo infer_gemm(const Layer& l, const TensorInfo& cur, std::size_t dense_in, const std::string& what) {
  TensorInfo out;
  const bool dense = l.kind == LayerKind::Dense;
  if (!dense) need_map(cur, what, "a conv2d layer");
  const std::size_t rank = dense ? 2 : 4;
  if (l.weight_shape.size() != rank)
    throw CompileError(fmt::format("{}: weights must be {} ({}), got shape {}", what,
                                   dense ? "2-D" : "4-D", dense ? "K x Nout" : "KH x KW x Cin x Cout",
                                   shape_text(l.weight_shape)));
  for (std::size_t d : l.weight_shape)
    if (d == 0) throw CompileError(fmt::format("{}: weights have a zero dimension", what));
  if (l.weights.size() != element_count(l.weight_shape))
    throw CompileError(fmt::format("{}: {} for shape {}", what, plural(l.weights.size(), "weight"),
                                   shape_text(l.weight_shape)));
  const std::size_t have = dense ? dense_in : cur.shape[2];
  if (!dense && l.groups != 1) {
    if (l.groups != have)
      throw CompileError(fmt::format(
          "{}: groups = {} but the input has {}: only 1 or the input channels (depthwise)", what,
          l.groups, plural(have, "channel")));
    if (l.weight_shape[2] != 1 || l.weight_shape[3] != have)
      throw CompileError(fmt::format(
          "{}: a depthwise convolution of {} needs weights KH x KW x 1 x {}, got {}", what,
          plural(have, "channel"), have, shape_text(l.weight_shape)));
  } else {
    const std::size_t k_in = dense ? l.weight_shape[0] : l.weight_shape[2];
    if (k_in != have)
      throw CompileError(fmt::format("{}: weights of shape {} expect {}, the input has {}", what,
                                     shape_text(l.weight_shape),
                                     plural(k_in, dense ? "input feature" : "input channel"), have));
  }
  const std::size_t n_out = l.weight_shape.back();
  if (!l.bias.empty() && l.bias.size() != n_out)
    throw CompileError(fmt::format("{}: {} for {}", what, plural(l.bias.size(), "bias", "biases"),
                                   plural(n_out, "output")));
  if (!(l.weight_scale > 0.0) || !std::isfinite(l.weight_scale))
    throw CompileError(fmt::format("{}: weight scale {} is not positive and finite", what,
                                   l.weight_scale));
  if (dense) {
    out.shape = {n_out};
  } else {
    if (l.kernel_h != l.weight_shape[0] || l.kernel_w != l.weight_shape[1])
      throw CompileError(fmt::format("{}: kernel {}x{} but weights of shape {}", what, l.kernel_h,
                                     l.kernel_w, shape_text(l.weight_shape)));
    if (l.stride_h == 0 || l.stride_w == 0)
      throw CompileError(fmt::format("{}: stride must be at least 1", what));
    const std::size_t oh = conv_out(cur.shape[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom);
    const std::size_t ow = conv_out(cur.shape[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right);
    if (oh == 0 || ow == 0)
      throw CompileError(fmt::format("{}: a {}x{} kernel does not fit the padded {}x{} input", what,
                                     l.kernel_h, l.kernel_w, cur.shape[0] + l.pad_top + l.pad_bottom,
                                     cur.shape[1] + l.pad_left + l.pad_right));
    out.shape = {oh, ow, n_out};
  }
  if (l.int32_output) {
    if (l.act != model::ActFunction::None)
      throw CompileError(fmt::format("{}: an activation needs int8 output", what));
    out.int32 = true;
    out.quant = {cur.quant.scale * l.weight_scale, 0};
  } else {
    if (l.act == model::ActFunction::Sigmoid || l.act == model::ActFunction::Tanh) {
      out.quant = {kSigmoidTanhOutputScale, 0};
    } else {
      check_quant(l.output, what + ": the output");
      out.quant = l.output;
    }
    layer_requant(cur.quant.scale, l.weight_scale, l.output, l.act);  // throws if impossible
  }
  return out;
}

TensorInfo infer_pool(const Layer& l, const TensorInfo& cur, const std::string& what) {
  need_map(cur, what, l.kind == LayerKind::MaxPool2d ? "max-pool" : "average pooling");
  TensorInfo out;
  if (l.kind == LayerKind::GlobalAvgPool2d) {
    out.shape = {1, 1, cur.shape[2]};
  } else {
    if (l.kernel_h == 0 || l.kernel_w == 0 || l.stride_h == 0 || l.stride_w == 0)
      throw CompileError(fmt::format("{}: pool size and stride must be at least 1", what));
    if (l.pad_top >= l.kernel_h || l.pad_bottom >= l.kernel_h || l.pad_left >= l.kernel_w ||
        l.pad_right >= l.kernel_w)
      throw CompileError(fmt::format(
          "{}: padding ({}, {}, {}, {}) must be smaller than the {}x{} window on every side", what,
          l.pad_top, l.pad_bottom, l.pad_left, l.pad_right, l.kernel_h, l.kernel_w));
    const std::size_t oh = conv_out(cur.shape[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom);
    const std::size_t ow = conv_out(cur.shape[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right);
    if (oh == 0 || ow == 0)
      throw CompileError(fmt::format("{}: a {}x{} window does not fit the {} input", what,
                                     l.kernel_h, l.kernel_w, shape_text(cur.shape)));
    out.shape = {oh, ow, cur.shape[2]};
  }
  out.quant = cur.quant;
  if (l.kind != LayerKind::MaxPool2d && !l.output_is_input) {
    check_quant(l.output, what + ": the output");
    out.quant = l.output;
  }
  if (l.kind != LayerKind::MaxPool2d) avgpool_requant(l, cur, out, what);  // throws if impossible
  return out;
}


// Nearest upsampling by integer factors (lower_upsample.cpp).
TensorInfo infer_upsample(const Layer& l, const TensorInfo& cur, const std::string& what) {
  if (cur.shape.size() != 3)
    throw CompileError(fmt::format("{}: upsample needs an HxWxC input, got {}", what, shape_text(cur.shape)));
  if (l.stride_h < 1 || l.stride_h > 255 || l.stride_w < 1 || l.stride_w > 255)
    throw CompileError(fmt::format("{}: upsampling factors {}x{} are not 1 to 255", what, l.stride_h, l.stride_w));
  if (l.act != model::ActFunction::None) throw CompileError(fmt::format("{}: an upsample has no activation", what));
  if (l.int32_output) throw CompileError(fmt::format("{}: an upsample has int8 output", what));
  TensorInfo out;
  out.shape = {cur.shape[0] * l.stride_h, cur.shape[1] * l.stride_w, cur.shape[2]};
  out.quant = cur.quant;  // an exact copy
  return out;
}

TensorInfo infer_add(const Layer& l, const TensorInfo& cur, const TensorInfo& other, const std::string& what) {
  if (cur.shape != other.shape)
    throw CompileError(fmt::format("{}: adds tensors of shapes {} and {}", what,
                                   shape_text(cur.shape), shape_text(other.shape)));
  if (l.act != model::ActFunction::None && l.act != model::ActFunction::Relu)
    throw CompileError(fmt::format("{}: an add takes activation none or relu", what));
  if (l.int32_output) throw CompileError(fmt::format("{}: an add has int8 output", what));
  check_quant(l.output, what + ": the output");
  TensorInfo out;
  out.shape = cur.shape;
  out.quant = l.output;
  add_requant(cur.quant, other.quant, l.output);  // throws if impossible
  return out;
}

// Along the last axis (channels of H x W x C maps, or features).
TensorInfo infer_concat(const Layer& l, const std::vector<TensorInfo>& infos, const std::vector<std::size_t>& ids,
                        const std::string& what) {
  const TensorInfo& cur = infos[ids[0]];
  TensorInfo out;
  out.shape = cur.shape;
  out.shape.back() = 0;
  std::vector<double> scales;
  for (std::size_t id : ids) {
    const auto& s = infos[id].shape;
    if (s.size() != cur.shape.size() || !std::equal(s.begin(), s.end() - 1, cur.shape.begin()))
      throw CompileError(fmt::format("{}: concatenates tensors of shapes {} and {} (only the last axis, the "
                                     "channels, may differ)", what, shape_text(cur.shape), shape_text(s)));
    out.shape.back() += s.back();
    scales.push_back(infos[id].quant.scale);
  }
  if (l.act != model::ActFunction::None) throw CompileError(fmt::format("{}: a concat has no activation", what));
  if (l.int32_output) throw CompileError(fmt::format("{}: a concat has int8 output", what));
  check_quant(l.output, what + ": the output");
  out.quant = l.output;
  concat_requant(scales, l.output);  // throws if impossible
  return out;
}

// Mul (other: its second input) and affine, on the vector unit.
TensorInfo infer_vec(const Layer& l, const TensorInfo& cur, const TensorInfo* other, const std::string& what) {
  if (l.int32_output) throw CompileError(fmt::format("{}: a {} has int8 output", what, layer_kind_name(l.kind)));
  TensorInfo out;
  const bool table = l.act == model::ActFunction::Sigmoid || l.act == model::ActFunction::Tanh;
  if (table) {
    out.quant = {kSigmoidTanhOutputScale, 0};
  } else {
    check_quant(l.output, what + ": the output");
    out.quant = l.output;
  }
  out.shape = cur.shape;
  try {
    if (l.kind == LayerKind::Mul) {
      const bool same = other->shape == cur.shape;
      const bool broadcast = cur.shape.size() == 3 && other->shape.size() == 3 && other->shape[0] == 1 &&
                             other->shape[1] == 1 && other->shape[2] == cur.shape[2];
      if (!same && !broadcast)
        throw CompileError(fmt::format("multiplies tensors of shapes {} and {} (the same shape, or an HxWxC "
                                       "map by a 1x1xC vector, the second input)",
                                       shape_text(cur.shape), shape_text(other->shape)));
      mul_vec(cur.quant, other->quant, l.output, l.act);  // throws if impossible
    } else {
      affine_vec(cur.quant, l.alpha, l.beta, l.output, l.act);  // throws if impossible
    }
  } catch (const CompileError& e) {
    throw CompileError(fmt::format("{}: {}", what, e.what()));
  }
  return out;
}

// Softmax over the last axis (attention.h): the input's shape, the fixed output
// kSoftmaxOutput (`output` is not read, as a sigmoid's or tanh's).
TensorInfo infer_softmax(const Layer& l, const TensorInfo& cur, const std::string& what) {
  if (l.int32_output) throw CompileError(fmt::format("{}: a softmax has int8 output", what));
  if (l.act != model::ActFunction::None) throw CompileError(fmt::format("{}: a softmax has no activation", what));
  try {
    softmax_constants(cur.quant.scale);  // throws if impossible
  } catch (const CompileError& e) {
    throw CompileError(fmt::format("{}: {}", what, e.what()));
  }
  TensorInfo out;
  out.shape = cur.shape;
  out.quant = kSoftmaxOutput;
  return out;
}

// MatMul of two activations (network.h, attention.h): A's tokens times B
// (transposed or not), B symmetric.
TensorInfo infer_matmul(const Layer& l, const TensorInfo& a, const TensorInfo& b, const std::string& what) {
  if (l.int32_output) throw CompileError(fmt::format("{}: a matmul has int8 output", what));
  if (l.act != model::ActFunction::None) throw CompileError(fmt::format("{}: a matmul has no activation", what));
  if (a.shape.size() != 3 || b.shape.size() != 3)
    throw CompileError(fmt::format("{}: a matmul multiplies two maps (H x W tokens of C features), not {} and {}",
                                   what, shape_text(a.shape), shape_text(b.shape)));
  if (b.quant.zero_point != 0)
    throw CompileError(fmt::format("{}: the second operand's zero point is {}: it must be 0 (symmetric), as a "
                                   "weight's (docs/quantization.md, \"MatMul of two activations\")",
                                   what, b.quant.zero_point));
  const std::size_t k = a.shape[2], b_tokens = b.shape[0] * b.shape[1];
  if (l.transpose_b ? b.shape[2] != k : b_tokens != k)
    throw CompileError(fmt::format("{}: A's {} features do not match B of shape {}{}", what, k, shape_text(b.shape),
                                   l.transpose_b ? " (used transposed: its channels)" : " (its tokens)"));
  if (!(l.alpha > 0.0) || !std::isfinite(l.alpha))
    throw CompileError(fmt::format("{}: alpha {} is not positive and finite", what, l.alpha));
  check_quant(l.output, what + ": the output");
  TensorInfo out;
  out.shape = {a.shape[0], a.shape[1], l.transpose_b ? b_tokens : b.shape[2]};
  out.quant = l.output;
  try {
    matmul_requant(a.quant, b.quant, l.alpha, l.output);  // throws if impossible
  } catch (const CompileError& e) {
    throw CompileError(fmt::format("{}: {}", what, e.what()));
  }
  return out;
}

// Constant tokens and positions (docs/quantization.md): an H x W x C map's
// H*W pixels as tokens, prefix_tokens more in front; one int32 bias per output
// token and channel, |b| <= 2^30.
TensorInfo infer_token_bias(const Layer& l, const TensorInfo& cur, const std::string& what) {
  if (l.int32_output) throw CompileError(fmt::format("{}: a token_bias has int8 output", what));
  if (l.act != model::ActFunction::None) throw CompileError(fmt::format("{}: a token_bias has no activation", what));
  if (cur.shape.size() != 3)
    throw CompileError(fmt::format("{}: a token_bias reads a map (H x W tokens of C features), not {}", what,
                                   shape_text(cur.shape)));
  const std::size_t tokens = l.prefix_tokens + cur.shape[0] * cur.shape[1], c = cur.shape[2];
  if (l.bias.size() != tokens * c)
    throw CompileError(fmt::format("{}: the bias has {} values for {} tokens of {} features", what, l.bias.size(),
                                   tokens, c));
  for (std::int32_t b : l.bias)
    if (b > (1 << 30) || b < -(1 << 30))
      throw CompileError(fmt::format("{}: a bias of {} is past 2^30 (docs/quantization.md, \"Constant tokens and "
                                     "positions\")", what, b));
  check_quant(l.output, what + ": the output");
  TensorInfo out;
  out.shape = {1, tokens, c};
  out.quant = l.output;
  try {
    requant_from_multiplier(cur.quant.scale / l.output.scale, l.output.zero_point);  // throws if impossible
  } catch (const CompileError& e) {
    throw CompileError(fmt::format("{}: {}", what, e.what()));
  }
  return out;
}

// LayerNorm and GELU on the activation unit (norm_quant.h): the input's shape,
// the layer's output quantization.
TensorInfo infer_norm(const Layer& l, const TensorInfo& cur, const std::string& what) {
  const char* kind = layer_kind_name(l.kind);
  if (l.int32_output) throw CompileError(fmt::format("{}: a {} has int8 output", what, kind));
  if (l.act != model::ActFunction::None) throw CompileError(fmt::format("{}: a {} has no activation", what, kind));
  check_quant(l.output, what + ": the output");
  TensorInfo out;
  out.shape = cur.shape;
  out.quant = l.output;
  try {
    if (l.kind == LayerKind::LayerNorm)
      layernorm_setting(cur.quant, cur.shape.back(), l.eps, l.output);  // throws if impossible
    else
      gelu_setting(cur.quant, l.output);
  } catch (const CompileError& e) {
    throw CompileError(fmt::format("{}: {}", what, e.what()));
  }
  return out;
}

// The network input's tensor; throws CompileError when its shape or
// quantization is not one a network can have.
TensorInfo infer_input(const Network& net) {
  TensorInfo first;
  first.shape = net.input_shape;
  first.quant = net.input;
  if (first.shape.empty() || first.shape.size() > 3 || first.shape.size() == 2)
    throw CompileError(fmt::format("the input shape {} is neither {{features}} nor {{H, W, C}}",
                                   shape_text(first.shape)));
  for (std::size_t d : first.shape)
    if (d == 0) throw CompileError("the input shape has a zero dimension");
  check_quant(first.quant, "the input");
  return first;
}

// Checks what layer i reads: as many tensors as its kind takes, each the
// network input or an earlier layer's int8 output; marks them used.
void check_reads(const Layer& l, std::size_t i, const std::vector<std::size_t>& ids,
                 const std::vector<TensorInfo>& infos, std::vector<bool>& used, const std::string& what) {
  const std::size_t want = l.kind == LayerKind::Add || l.kind == LayerKind::Mul || l.kind == LayerKind::MatMul ? 2 : 1;
  if (l.kind == LayerKind::Concat && ids.size() < 2)
    throw CompileError(fmt::format("{}: concat reads 2 inputs or more, not {}", what, ids.size()));
  if (l.pixel != -1 && (l.kind != LayerKind::Dense || l.pixel < 0))
    throw CompileError(fmt::format("{}: pixel {}: only a dense layer reads one pixel (or -1: none)", what, l.pixel));
  if (l.kind != LayerKind::Concat && l.kind != LayerKind::Dense && ids.size() != want)
    throw CompileError(fmt::format("{}: {} reads {}, not {}", what, layer_kind_name(l.kind),
                                   plural(want, "input"), ids.size()));
  for (std::size_t id : ids) {
    if (id > i)
      throw CompileError(fmt::format(
          "{}: reads tensor {}, which is not the network input or an earlier layer's output",
          what, id));
    if (infos[id].int32)
      throw CompileError(fmt::format(
          "{} reads an int32 output: only the last layer may have int32 output", what));
    used[id] = true;
  }
}

}  // namespace

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::Dense: return "dense";
    case LayerKind::Conv2d: return "conv2d";
    case LayerKind::MaxPool2d: return "maxpool2d";
    case LayerKind::Flatten: return "flatten";
    case LayerKind::AvgPool2d: return "avgpool2d";
    case LayerKind::GlobalAvgPool2d: return "global_avgpool2d";
    case LayerKind::Add: return "add";
    case LayerKind::Concat: return "concat";
    case LayerKind::Mul: return "mul";
    case LayerKind::Affine: return "affine";
    case LayerKind::Upsample: return "upsample";
    case LayerKind::Softmax: return "softmax";
    case LayerKind::MatMul: return "matmul";
    case LayerKind::LayerNorm: return "layernorm";
    case LayerKind::Gelu: return "gelu";
    case LayerKind::TokenBias: return "token_bias";
  }
  return "?";
}

std::vector<std::size_t> layer_inputs(const Network& net, std::size_t i) {
  const Layer& l = net.layers.at(i);
  if (l.inputs.empty()) return {i};
  return l.inputs;
}

bool is_chain(const Network& net) {
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const auto in = layer_inputs(net, i);
    if (in.size() != 1 || in[0] != i) return false;
  }
  return true;
}

model::Requant avgpool_requant(const Layer& l, const TensorInfo& in, const TensorInfo& out,
                               const std::string& what) {
  const std::uint64_t window = l.kind == LayerKind::GlobalAvgPool2d
                                   ? std::uint64_t{in.shape[0]} * in.shape[1]
                                   : std::uint64_t{l.kernel_h} * l.kernel_w;
  try {
    return requant_from_multiplier(in.quant.scale / (static_cast<double>(window) * out.quant.scale),
                                   out.quant.zero_point);
  } catch (const CompileError& e) {
    throw CompileError(fmt::format("{}: {}", what, e.what()));
  }
}

void check_tensor(const Tensor& x, const TensorInfo& info, const std::string& what) {
  if (x.int32 || x.shape.size() != info.shape.size() + 1 ||
      !std::equal(info.shape.begin(), info.shape.end(), x.shape.begin() + 1))
    throw CompileError(fmt::format("{}: expected int8 samples of shape {}, got {} of shape {}",
                                   what, shape_text(info.shape), x.int32 ? "int32" : "int8",
                                   shape_text(x.shape)));
}

std::vector<TensorInfo> infer_network(const Network& net, bool check_unread) {
  std::vector<TensorInfo> infos{infer_input(net)};
  std::vector<bool> used(net.layers.size() + 1, false);
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    const std::string what = layer_label(l, i);
    const std::vector<std::size_t> ids = layer_inputs(net, i);
    check_reads(l, i, ids, infos, used, what);
    const TensorInfo& cur = infos[ids[0]];
    TensorInfo out;
    switch (l.kind) {
      case LayerKind::Dense: out = infer_gemm(l, cur, dense_k(l, ids, infos, what), what); break;
      case LayerKind::Conv2d: out = infer_gemm(l, cur, 0, what); break;
      case LayerKind::MaxPool2d:
      case LayerKind::AvgPool2d:
      case LayerKind::GlobalAvgPool2d: out = infer_pool(l, cur, what); break;
      case LayerKind::Upsample:
        out = infer_upsample(l, cur, what);
        break;
      case LayerKind::Flatten:
        out.shape = {element_count(cur.shape)};
        out.quant = cur.quant;
        break;
      case LayerKind::Add: out = infer_add(l, cur, infos[ids[1]], what); break;
      case LayerKind::Concat: out = infer_concat(l, infos, ids, what); break;
      case LayerKind::Mul:
      case LayerKind::Affine: out = infer_vec(l, cur, ids.size() > 1 ? &infos[ids[1]] : nullptr, what); break;
      // --- attention ---
      case LayerKind::Softmax: out = infer_softmax(l, cur, what); break;
      case LayerKind::MatMul: out = infer_matmul(l, cur, infos[ids[1]], what); break;
      case LayerKind::LayerNorm:
      case LayerKind::Gelu: out = infer_norm(l, cur, what); break;
      case LayerKind::TokenBias: out = infer_token_bias(l, cur, what); break;
    }
    infos.push_back(out);
  }
  for (std::size_t id = 1; check_unread && id < net.layers.size(); ++id)
    if (!used[id])
      throw CompileError(fmt::format(
          "{}: its output is never read (only the last layer's output leaves the network)",
          layer_label(net.layers[id - 1], id - 1)));
  return infos;
}

}  // namespace tpu::compiler
