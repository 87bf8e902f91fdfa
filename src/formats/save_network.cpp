#include "formats/save_network.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file_io.h"
#include "common/npy.h"

namespace tpu::compiler {
namespace {

using compiler::LayerKind;
using nlohmann::json;


json quant_json(const compiler::QuantParams& q) { return {{"scale", q.scale}, {"zero_point", q.zero_point}}; }

}  // namespace

void save_network(const compiler::Network& net, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw FileError(fmt::format("{}: cannot create the folder: {}", dir, ec.message()));
  const std::filesystem::path base(dir);
  json root;
  root["format"] = "tpu-sim-net";
  root["version"] = 1;
  root["name"] = net.name;
  root["input"] = {{"shape", net.input_shape}, {"scale", net.input.scale}, {"zero_point", net.input.zero_point}};
  root["layers"] = json::array();
  const auto tensor_name = [&](std::size_t id) { return id == 0 ? std::string("input") : net.layers[id - 1].name; };
  std::vector<compiler::TensorInfo> infos;  // a token_bias's channels, when there is one
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const compiler::Layer& l = net.layers[i];
    json j;
    j["type"] = compiler::layer_kind_name(l.kind);
    j["name"] = l.name;
    json inputs = json::array();
    for (std::size_t id : compiler::layer_inputs(net, i)) inputs.push_back(tensor_name(id));
    j["inputs"] = inputs;
    const json pads = {l.pad_top, l.pad_bottom, l.pad_left, l.pad_right};
    switch (l.kind) {
      case LayerKind::Dense:
      case LayerKind::Conv2d: {
        // File names from the layer index: ONNX node names hold '/' and '.'.
        const std::string w = fmt::format("layer{}_w.npy", i), b = fmt::format("layer{}_b.npy", i);
        write_npy((base / w).string(), NpyArray::of<std::int8_t>(l.weight_shape, l.weights));
        j["weights"] = w;
        if (!l.bias.empty()) {
          write_npy((base / b).string(), NpyArray::of<std::int32_t>({l.bias.size()}, l.bias));
          j["bias"] = b;
        }
        j["weight_scale"] = l.weight_scale;
        j["activation"] = std::string(model::act_function_name(l.act));
        if (l.int32_output)
          j["output"] = "int32";
        else
          j["output"] = quant_json(l.output);
        if (l.kind == LayerKind::Conv2d) {
          j["stride"] = {l.stride_h, l.stride_w};
          j["padding"] = pads;
          if (l.groups != 1) j["groups"] = l.groups;
        }
        if (l.pixel >= 0) j["pixel"] = l.pixel;
        break;
      }
      case LayerKind::MaxPool2d:
      case LayerKind::AvgPool2d:
        j["pool"] = {l.kernel_h, l.kernel_w};
        j["stride"] = {l.stride_h, l.stride_w};
        j["padding"] = pads;
        if (l.kind == LayerKind::AvgPool2d && !l.output_is_input) j["output"] = quant_json(l.output);
        break;
      case LayerKind::GlobalAvgPool2d:
        if (!l.output_is_input) j["output"] = quant_json(l.output);
        break;
      case LayerKind::Add:
        j["activation"] = std::string(model::act_function_name(l.act));
        j["output"] = quant_json(l.output);
        break;
      case LayerKind::Concat:
        j["output"] = quant_json(l.output);
        break;
      case LayerKind::Affine:
        j["alpha"] = l.alpha;
        j["beta"] = l.beta;
        [[fallthrough]];
      case LayerKind::Mul:
        j["activation"] = std::string(model::act_function_name(l.act));
        j["output"] = quant_json(l.output);
        break;
      case LayerKind::Upsample:
        j["scale"] = {l.stride_h, l.stride_w};
        break;
      case LayerKind::Flatten:
        break;
      // --- attention ---
      case LayerKind::Softmax:
        j["output"] = quant_json(l.output);
        break;
      case LayerKind::MatMul:
        j["transpose_b"] = l.transpose_b;
        j["alpha"] = l.alpha;
        j["output"] = quant_json(l.output);
        break;
      case LayerKind::LayerNorm:
        j["eps"] = l.eps;
        j["output"] = quant_json(l.output);
        break;
      case LayerKind::Gelu:
        j["output"] = quant_json(l.output);
        break;
      case LayerKind::TokenBias: {
        const std::string b = fmt::format("layer{}_b.npy", i);
        if (infos.empty()) infos = compiler::infer_network(net, false);
        const std::size_t c = infos.at(i + 1).shape.back();
        write_npy((base / b).string(), NpyArray::of<std::int32_t>({l.bias.size() / c, c}, l.bias));
        j["prefix_tokens"] = l.prefix_tokens;
        j["bias"] = b;
        j["output"] = quant_json(l.output);
        break;
      }
    }
    root["layers"].push_back(j);
  }
  write_file_atomic((base / "model.json").string(), root.dump(2) + "\n");
}

}  // namespace tpu::compiler
