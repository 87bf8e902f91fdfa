#include "formats/model_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "common/file_io.h"
#include "common/npy.h"
#include "common/plural.h"
#include "compiler/attention.h"

namespace tpu::compiler {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw FileError(fmt::format("{}: {}{}", path_, where.empty() ? "" : where + ": ", what));
  }

  void only_keys(const json& obj, const std::string& where, std::set<std::string> allowed) const {
    for (const auto& [key, value] : obj.items())
      if (!allowed.count(key)) {
        std::string list;
        for (const std::string& k : allowed) list += (list.empty() ? "" : ", ") + k;
        fail(where, fmt::format("unknown key '{}' (known: {})", key, list));
      }
  }

  const json& need(const json& obj, const std::string& key, const std::string& where) const {
    if (!obj.contains(key)) fail(where, fmt::format("missing '{}'", key));
    return obj.at(key);
  }

  double number(const json& v, const std::string& where, const std::string& key) const {
    if (!v.is_number()) fail(where, fmt::format("'{}' must be a number", key));
    return v.get<double>();
  }

  long long integer(const json& v, const std::string& where, const std::string& key,
                    long long lo, long long hi) const {
    if (!v.is_number_integer())
      fail(where, fmt::format("'{}' must be an integer", key));
    const long long x = v.is_number_unsigned() && v.get<unsigned long long>() > 1ull << 62
                            ? hi + 1
                            : v.get<long long>();
    if (x < lo || x > hi) fail(where, fmt::format("'{}' = {} is outside {}..{}", key, x, lo, hi));
    return x;
  }

  // An integer or a list of `count` integers.
  std::vector<unsigned> ints(const json& v, const std::string& where, const std::string& key,
                             std::size_t count, long long lo, long long hi) const {
    if (v.is_number()) return std::vector<unsigned>(count, static_cast<unsigned>(integer(v, where, key, lo, hi)));
    if (!v.is_array() || v.size() != count)
      fail(where, fmt::format("'{}' must be an integer or a list of {} integers", key, count));
    std::vector<unsigned> out;
    for (const json& e : v) out.push_back(static_cast<unsigned>(integer(e, where, key, lo, hi)));
    return out;
  }

  QuantParams quant(const json& v, const std::string& where) const {
    if (!v.is_object()) fail(where, "a quantization must be an object {\"scale\": S, \"zero_point\": Z}");
    only_keys(v, where, {"scale", "zero_point"});
    QuantParams q;
    q.scale = number(need(v, "scale", where), where, "scale");
    if (!(q.scale > 0.0) || !std::isfinite(q.scale))
      fail(where, fmt::format("scale {} is not positive and finite", q.scale));
    q.zero_point = static_cast<std::int32_t>(integer(need(v, "zero_point", where), where, "zero_point", -128, 127));
    return q;
  }

  std::string file(const json& v, const std::string& where, const std::string& key) const {
    if (!v.is_string() || v.get<std::string>().empty())
      fail(where, fmt::format("'{}' must be a file name", key));
    const std::filesystem::path p(v.get<std::string>());
    if (p.is_absolute()) return p.string();
    return (std::filesystem::path(path_).parent_path() / p).string();
  }

 private:
  std::string path_;
};

model::ActFunction parse_act(const Reader& r, const json& v, const std::string& where) {
  if (!v.is_string()) r.fail(where, "'activation' must be a string");
  const std::string s = v.get<std::string>();
  if (const std::optional<model::ActFunction> f = model::parse_act_function(s)) return *f;
  r.fail(where, fmt::format("unknown activation '{}' (known: {})", s, model::act_function_list()));
}

// The layer's "activation", none when absent.
model::ActFunction optional_act(const Reader& r, const json& j, const std::string& where) {
  return j.contains("activation") ? parse_act(r, j.at("activation"), where) : model::ActFunction::None;
}

// The output quantization of a sigmoid or tanh, fixed by the tables (scale
// 1/127, zero point 0): an "output" given anyway must be that one.
QuantParams table_output(const Reader& r, const json& j, const std::string& where) {
  if (j.contains("output")) {
    const QuantParams q = r.quant(j.at("output"), where + ": output");
    if (q.zero_point != 0 || std::fabs(q.scale * 127.0 - 1.0) > 1e-9)
      r.fail(where, "the output of sigmoid and tanh is fixed at scale 1/127, zero point 0");
  }
  return {kSigmoidTanhOutputScale, 0};
}

bool table_act(model::ActFunction f) { return f == model::ActFunction::Sigmoid || f == model::ActFunction::Tanh; }

void parse_gemm_layer(const Reader& r, const json& j, const std::string& where, Layer& l,
                      std::size_t rank) {
  const std::string wpath = r.file(r.need(j, "weights", where), where, "weights");
  const NpyArray w = read_npy(wpath);
  l.weights = expect_int8(w, rank, rank == 2 ? "dense weights, K x Nout" : "conv2d weights, KH x KW x Cin x Cout");
  l.weight_shape = w.shape;
  for (std::size_t d : w.shape)
    if (d == 0) throw FileError(fmt::format("{}: the weights have a zero dimension", wpath));
  if (j.contains("bias")) {
    const std::string bpath = r.file(j.at("bias"), where, "bias");
    const NpyArray b = read_npy(bpath);
    l.bias = expect_int32(b, 1, "bias, int32 per output");
    if (l.bias.size() != w.shape.back())
      throw FileError(fmt::format("{}: {} but the weights have {}", bpath,
                                  plural(l.bias.size(), "bias", "biases"), plural(w.shape.back(), "output")));
  }
  l.weight_scale = r.number(r.need(j, "weight_scale", where), where, "weight_scale");
  if (!(l.weight_scale > 0.0) || !std::isfinite(l.weight_scale))
    r.fail(where, fmt::format("weight_scale {} is not positive and finite", l.weight_scale));
  l.act = optional_act(r, j, where);
  if (j.contains("output") && j.at("output").is_string()) {
    if (j.at("output").get<std::string>() != "int32")
      r.fail(where, "'output' must be a quantization object or \"int32\"");
    if (l.act != model::ActFunction::None) r.fail(where, "an int32 output takes no activation");
    l.int32_output = true;
  } else if (table_act(l.act)) {
    l.output = table_output(r, j, where);
  } else {
    l.output = r.quant(r.need(j, "output", where), where + ": output");
  }
}

// Padding of a conv2d or pooling layer: "valid", "same", an integer,
// [ph, pw] or [top, bottom, left, right]. "same" is resolved once the input
// size is known (all four set to ~0u until then).
void parse_padding(const Reader& r, const json& p, const std::string& where, Layer& l) {
  if (p.is_string()) {
    const std::string mode = p.get<std::string>();
    if (mode == "same") {
      // As TensorFlow: output = ceil(input / stride), the extra row or column
      // of padding at the bottom or right.
      l.pad_top = l.pad_bottom = l.pad_left = l.pad_right = ~0u;
    } else if (mode != "valid") {
      r.fail(where, fmt::format("unknown padding '{}' (valid, same, or [top, bottom, left, right])", mode));
    }
  } else if (p.is_array() && p.size() == 4) {
    const auto v = r.ints(p, where, "padding", 4, 0, 1 << 16);
    l.pad_top = v[0];
    l.pad_bottom = v[1];
    l.pad_left = v[2];
    l.pad_right = v[3];
  } else {
    const auto v = r.ints(p, where, "padding", 2, 0, 1 << 16);
    l.pad_top = l.pad_bottom = v[0];
    l.pad_left = l.pad_right = v[1];
  }
}

// "stride" and "padding" of a conv2d or pool, where given.
void parse_stride_padding(const Reader& r, const json& j, const std::string& where, Layer& l) {
  if (j.contains("stride")) {
    const auto st = r.ints(j.at("stride"), where, "stride", 2, 1, 1 << 16);
    l.stride_h = st[0];
    l.stride_w = st[1];
  }
  if (j.contains("padding")) parse_padding(r, j.at("padding"), where, l);
}

void parse_window(const Reader& r, const json& j, const std::string& where, Layer& l) {
  const auto k = r.ints(r.need(j, "pool", where), where, "pool", 2, 1, 1 << 16);
  l.kernel_h = k[0];
  l.kernel_w = k[1];
  l.stride_h = k[0];
  l.stride_w = k[1];
  parse_stride_padding(r, j, where, l);
}

// ---- One parser per layer type: its keys, then its fields. ----

void parse_dense(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "weights", "bias", "weight_scale", "activation", "output", "pixel"});
  l.kind = LayerKind::Dense;
  parse_gemm_layer(r, j, where, l, 2);
  // One pixel of a map input (a time step of a sequence); the graph check
  // then needs that input to be a map holding it.
  if (j.contains("pixel")) l.pixel = r.integer(j.at("pixel"), where, "pixel", 0, (std::int64_t{1} << 31) - 1);
}

void parse_conv2d(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "weights", "bias", "weight_scale", "activation", "output",
                         "stride", "padding", "groups"});
  l.kind = LayerKind::Conv2d;
  parse_gemm_layer(r, j, where, l, 4);
  if (j.contains("groups"))
    l.groups = static_cast<unsigned>(r.integer(j.at("groups"), where, "groups", 1, 1 << 24));
  l.kernel_h = static_cast<unsigned>(l.weight_shape[0]);
  l.kernel_w = static_cast<unsigned>(l.weight_shape[1]);
  parse_stride_padding(r, j, where, l);
}

void parse_maxpool2d(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "pool", "stride", "padding"});
  l.kind = LayerKind::MaxPool2d;
  parse_window(r, j, where, l);
}

// An average pool's output keeps its input's quantization unless given.
void parse_pool_output(const Reader& r, const json& j, const std::string& where, Layer& l) {
  if (j.contains("output"))
    l.output = r.quant(j.at("output"), where + ": output");
  else
    l.output_is_input = true;
}

void parse_avgpool2d(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "pool", "stride", "padding", "output"});
  l.kind = LayerKind::AvgPool2d;
  parse_window(r, j, where, l);
  parse_pool_output(r, j, where, l);
}

void parse_global_avgpool2d(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "output"});
  l.kind = LayerKind::GlobalAvgPool2d;
  parse_pool_output(r, j, where, l);
}

void parse_add(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "activation", "output"});
  l.kind = LayerKind::Add;
  l.act = optional_act(r, j, where);
  if (l.act != model::ActFunction::None && l.act != model::ActFunction::Relu)
    r.fail(where, "an add takes activation none or relu");
  l.output = r.quant(r.need(j, "output", where), where + ": output");
  if (!j.contains("inputs")) r.fail(where, "an add needs 'inputs': the names of the two layers it adds");
}

void parse_concat(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "output"});
  l.kind = LayerKind::Concat;
  l.output = r.quant(r.need(j, "output", where), where + ": output");
  if (!j.contains("inputs")) r.fail(where, "a concat needs 'inputs': the names of the layers it concatenates");
}

// The activation and output of a mul or affine (vector-unit layers).
void parse_vector_output(const Reader& r, const json& j, const std::string& where, Layer& l) {
  l.output = table_act(l.act) ? table_output(r, j, where) : r.quant(r.need(j, "output", where), where + ": output");
}

void parse_mul(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "activation", "output"});
  l.kind = LayerKind::Mul;
  l.act = optional_act(r, j, where);
  parse_vector_output(r, j, where, l);
  if (!j.contains("inputs")) r.fail(where, "a mul needs 'inputs': the names of the two layers it multiplies");
}

void parse_affine(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "alpha", "beta", "activation", "output"});
  l.kind = LayerKind::Affine;
  l.act = optional_act(r, j, where);
  l.alpha = r.number(r.need(j, "alpha", where), where, "alpha");
  l.beta = j.contains("beta") ? r.number(j.at("beta"), where, "beta") : 0.0;
  if (!std::isfinite(l.alpha) || !std::isfinite(l.beta)) r.fail(where, "'alpha' and 'beta' must be finite");
  parse_vector_output(r, j, where, l);
}

void parse_upsample(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "scale"});
  l.kind = LayerKind::Upsample;
  const auto s = r.ints(r.need(j, "scale", where), where, "scale", 2, 1, 255);
  l.stride_h = s[0];
  l.stride_w = s[1];
}

// --- attention ---
// A softmax over the last axis; its output is fixed (scale 1/256, zero point -128):
// an "output" given anyway must be that one.
void parse_softmax(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "output"});
  l.kind = LayerKind::Softmax;
  if (j.contains("output")) {
    const QuantParams q = r.quant(j.at("output"), where + ": output");
    if (q.zero_point != kSoftmaxOutput.zero_point || std::fabs(q.scale / kSoftmaxOutput.scale - 1.0) > 1e-9)
      r.fail(where, "the output of a softmax is fixed at scale 1/256, zero point -128");
  }
  l.output = kSoftmaxOutput;
}

// A matmul of two activations: "inputs" A and B (B symmetric), "transpose_b",
// "alpha" (default 1), "output".
void parse_matmul(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "transpose_b", "alpha", "output"});
  l.kind = LayerKind::MatMul;
  if (j.contains("transpose_b")) {
    if (!j.at("transpose_b").is_boolean()) r.fail(where, "'transpose_b' must be true or false");
    l.transpose_b = j.at("transpose_b").get<bool>();
  }
  l.alpha = j.contains("alpha") ? r.number(j.at("alpha"), where, "alpha") : 1.0;
  if (!(l.alpha > 0.0) || !std::isfinite(l.alpha)) r.fail(where, "'alpha' must be positive and finite");
  l.output = r.quant(r.need(j, "output", where), where + ": output");
  if (!j.contains("inputs")) r.fail(where, "a matmul needs 'inputs': the names of its two operands");
}

void parse_flatten(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs"});
  l.kind = LayerKind::Flatten;
}

// Transformer layers on the activation unit (docs/quantization.md, "Transformer layers").
void parse_layernorm(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "eps", "output"});
  l.kind = LayerKind::LayerNorm;
  l.eps = j.contains("eps") ? r.number(j.at("eps"), where, "eps") : 1e-5;
  if (!(l.eps >= 0.0) || !std::isfinite(l.eps)) r.fail(where, "'eps' must be finite and at least 0");
  l.output = r.quant(r.need(j, "output", where), where + ": output");
}

void parse_gelu(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "output"});
  l.kind = LayerKind::Gelu;
  l.output = r.quant(r.need(j, "output", where), where + ": output");
}

// Constant tokens and positions (docs/quantization.md): "prefix_tokens", the
// int32 "bias" (tokens x C, checked against the input's shape by
// infer_network), "output".
void parse_token_bias(const Reader& r, const json& j, const std::string& where, Layer& l) {
  r.only_keys(j, where, {"type", "name", "inputs", "prefix_tokens", "bias", "output"});
  l.kind = LayerKind::TokenBias;
  l.prefix_tokens = j.contains("prefix_tokens")
                        ? static_cast<unsigned>(r.integer(j.at("prefix_tokens"), where, "prefix_tokens", 0, 1 << 16))
                        : 0u;
  const std::string bpath = r.file(r.need(j, "bias", where), where, "bias");
  l.bias = expect_int32(read_npy(bpath), 2, "bias, int32 per token and channel");
  l.output = r.quant(r.need(j, "output", where), where + ": output");
}

using LayerParser = void (*)(const Reader&, const json&, const std::string&, Layer&);

// The layer types of the format, in the order the error message lists them.
constexpr std::pair<const char*, LayerParser> kLayerTypes[] = {
    {"dense", parse_dense},     {"conv2d", parse_conv2d},   {"maxpool2d", parse_maxpool2d},
    {"avgpool2d", parse_avgpool2d}, {"global_avgpool2d", parse_global_avgpool2d},
    {"add", parse_add},         {"concat", parse_concat},   {"mul", parse_mul},
    {"affine", parse_affine},   {"upsample", parse_upsample}, {"flatten", parse_flatten},
    {"softmax", parse_softmax}, {"matmul", parse_matmul},
    {"layernorm", parse_layernorm}, {"gelu", parse_gelu}, {"token_bias", parse_token_bias}};

// "layers"[i]: its name, its type's fields, its inputs (names of earlier
// layers, or "input", in `tensor_of`, which gains this layer's name).
Layer parse_layer(const Reader& r, const json& j, std::size_t i, std::map<std::string, std::size_t>& tensor_of) {
  std::string where = fmt::format("layer {}", i);
  if (!j.is_object()) r.fail(where, "must be an object");
  Layer l;
  if (j.contains("name")) {
    if (!j.at("name").is_string()) r.fail(where, "'name' must be a string");
    l.name = j.at("name").get<std::string>();
    where = fmt::format("layer {} ('{}')", i, l.name);
  }
  const json& type = r.need(j, "type", where);
  const std::string t = type.is_string() ? type.get<std::string>() : "";
  const auto* kind = std::find_if(std::begin(kLayerTypes), std::end(kLayerTypes),
                                  [&](const auto& k) { return t == k.first; });
  if (kind == std::end(kLayerTypes)) {
    std::string names;
    for (const auto& k : kLayerTypes) names += fmt::format("{}{}", names.empty() ? "" : ", ", k.first);
    r.fail(where, fmt::format("'type' must be one of {}", names));
  }
  kind->second(r, j, where, l);
  if (j.contains("inputs")) {
    const json& in = j.at("inputs");
    if (!in.is_array() || in.empty())
      r.fail(where, "'inputs' must be a list of layer names (or \"input\")");
    for (const json& e : in) {
      if (!e.is_string()) r.fail(where, "'inputs' must be a list of layer names (or \"input\")");
      const std::string name = e.get<std::string>();
      const auto it = tensor_of.find(name);
      if (it == tensor_of.end())
        r.fail(where, fmt::format("input '{}' is not \"input\" or the name of an earlier layer", name));
      l.inputs.push_back(it->second);
    }
  }
  if (!l.name.empty()) {
    if (tensor_of.count(l.name)) r.fail(where, fmt::format("the name '{}' is taken", l.name));
    tensor_of[l.name] = i + 1;
  }
  return l;
}

// The top level without "layers": format, version, name and the input.
Network parse_header(const Reader& r, const json& root) {
  if (!root.is_object()) r.fail("", "expected a JSON object");
  r.only_keys(root, "", {"format", "version", "name", "input", "layers", "description"});
  const json& format = r.need(root, "format", "");
  if (!format.is_string() || format.get<std::string>() != "tpu-sim-net")
    r.fail("", "'format' must be \"tpu-sim-net\"");
  if (r.integer(r.need(root, "version", ""), "", "version", 0, 1 << 30) != 1)
    r.fail("", "unsupported version (this build reads version 1)");
  Network net;
  if (root.contains("name")) {
    if (!root.at("name").is_string()) r.fail("", "'name' must be a string");
    net.name = root.at("name").get<std::string>();
  }
  const json& input = r.need(root, "input", "");
  if (!input.is_object()) r.fail("input", "must be an object");
  r.only_keys(input, "input", {"shape", "scale", "zero_point"});
  const json& shape = r.need(input, "shape", "input");
  if (!shape.is_array() || shape.empty())
    r.fail("input", "'shape' must be a list of dimensions: [features] or [H, W, C]");
  for (const json& d : shape)
    net.input_shape.push_back(static_cast<std::size_t>(r.integer(d, "input", "shape", 1, 1 << 24)));
  json q = {{"scale", r.need(input, "scale", "input")}, {"zero_point", r.need(input, "zero_point", "input")}};
  net.input = r.quant(q, "input");
  return net;
}

// The shapes of `net` as far as they are known, a CompileError as the file's.
std::vector<TensorInfo> infer_in_file(const Network& net, bool check_unread, const std::string& json_path) {
  try {
    return infer_network(net, check_unread);
  } catch (const CompileError& e) {
    throw FileError(fmt::format("{}: {}", json_path, e.what()));
  }
}

// "same" padding needs each layer's input size: walk the shapes.
void resolve_same_padding(const Reader& r, Network& net, const std::string& json_path) {
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    Layer& l = net.layers[i];
    if (l.pad_top != ~0u) continue;
    Network prefix;
    prefix.input_shape = net.input_shape;
    prefix.input = net.input;
    prefix.layers.assign(net.layers.begin(), net.layers.begin() + static_cast<std::ptrdiff_t>(i));
    const std::vector<std::size_t> in_shape = infer_in_file(prefix, false, json_path)[layer_inputs(net, i)[0]].shape;
    if (in_shape.size() != 3) r.fail(fmt::format("layer {}", i), "'same' padding needs an HxWxC input");
    const auto same = [](std::size_t in, unsigned k, unsigned s, unsigned& a, unsigned& b) {
      const std::size_t out = (in + s - 1) / s;
      const std::size_t need = (out - 1) * s + k;
      const std::size_t total = need > in ? need - in : 0;
      a = static_cast<unsigned>(total / 2);
      b = static_cast<unsigned>(total - total / 2);
    };
    same(in_shape[0], l.kernel_h, l.stride_h, l.pad_top, l.pad_bottom);
    same(in_shape[1], l.kernel_w, l.stride_w, l.pad_left, l.pad_right);
  }
}

// A token_bias's table is tokens x C (infer_network checks only its element
// count, the Layer keeping the values alone): a transposed table is refused
// here, as tools/int8_reference.py refuses it.
void check_token_bias_shapes(const Reader& r, const Network& net, const json& layers,
                             const std::vector<TensorInfo>& infos) {
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    if (net.layers[i].kind != LayerKind::TokenBias) continue;
    const std::string bpath = r.file(layers[i].at("bias"), "", "bias");
    const std::vector<std::size_t>& out = infos[i + 1].shape;  // {1, tokens, C}
    const std::vector<std::size_t> want{out[1], out[2]};
    const NpyArray b = read_npy(bpath);
    if (b.shape != want)
      throw FileError(fmt::format("{}: the bias is {} but the layer has {} of {} (tokens x features, {} x {})",
                                  bpath, format_shape(b.shape), plural(out[1], "token"),
                                  plural(out[2], "feature"), out[1], out[2]));
  }
}

}  // namespace

Network load_network(const std::string& json_path) {
  const std::string text = read_file_text(json_path);
  Reader r(json_path);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    r.fail("", fmt::format("invalid JSON: {}", e.what()));
  }
  Network net = parse_header(r, root);
  const json& layers = r.need(root, "layers", "");
  if (!layers.is_array()) r.fail("", "'layers' must be a list");
  std::map<std::string, std::size_t> tensor_of{{"input", 0}};  // name -> tensor id
  for (std::size_t i = 0; i < layers.size(); ++i) net.layers.push_back(parse_layer(r, layers[i], i, tensor_of));
  resolve_same_padding(r, net, json_path);
  if (net.layers.empty()) r.fail("", "the network has no layers");
  check_token_bias_shapes(r, net, layers, infer_in_file(net, true, json_path));
  return net;
}

}  // namespace tpu::compiler
