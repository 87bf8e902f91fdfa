// The model description: a JSON file listing a network's input and layers,
// with the int8 weights and int32 biases in .npy files beside it (format in
// docs/quantization.md, "Model files").
#pragma once

#include <string>

#include "compiler/network.h"

namespace tpu::compiler {

// Reads MODEL.json and the .npy files it names (paths relative to its
// folder). Every problem is a FileError whose message starts with the path of
// the file at fault (and names the layer).
Network load_network(const std::string& json_path);

}  // namespace tpu::compiler
