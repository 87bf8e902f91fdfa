// A zero batch tensor of a given sample shape: what a program's output is
// read back into (segment_image.cpp; compile_on_chip.cpp's on_chip_output
// builds the same by hand).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/network.h"
#include "compiler/host_layout.h"
#include "compiler/shapes.h"

namespace tpu::compiler {

inline Tensor zero_batch(std::uint64_t batch, const std::vector<std::size_t>& sample_shape, bool int32) {
  Tensor y;
  y.shape = {batch};
  y.shape.insert(y.shape.end(), sample_shape.begin(), sample_shape.end());
  y.int32 = int32;
  y.data.assign(batch * element_count(sample_shape), 0);
  return y;
}

}  // namespace tpu::compiler
