// Writes a compiler::Network as a tpu-sim-net model file (docs/quantization.md,
// "Model files"): DIR/model.json with the int8 weights and int32 biases in
// .npy files beside it, so that tools/int8_reference.py and `tpu-sim net
// DIR/model.json` read exactly the network tpu-sim quantized.
#pragma once

#include <string>

#include "compiler/network.h"

namespace tpu::compiler {

// Creates DIR if needed; layer names must be unique, non-empty and not
// "input" (the importer makes them so). Throws FileError.
void save_network(const compiler::Network& net, const std::string& dir);

}  // namespace tpu::compiler
