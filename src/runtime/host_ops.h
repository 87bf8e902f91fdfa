// The host's own operations on tensors: the steps a host-step plan runs
// between its programs (max-pool, flatten) and the quantization of a
// network's float input. Part of the runtime (tpu_runtime), which runs the
// plans the compilers make; in namespace tpu::compiler with the types it
// works on.
#pragma once

#include <cstddef>
#include <vector>

#include "compiler/network.h"

namespace tpu::compiler {

// A max-pool (no padding) and a flatten of a batch, as a host step does them.
Tensor host_maxpool(const Layer& pool, const Tensor& x);
Tensor host_flatten(const Tensor& x);

// Quantizes float inputs with the network's input quantization:
// q = clamp(round_half_even(x / scale) + zero_point, -128, 127), in double.
Tensor quantize_input(const Network& net, const std::vector<std::size_t>& shape,
                      const std::vector<double>& values);

}  // namespace tpu::compiler
