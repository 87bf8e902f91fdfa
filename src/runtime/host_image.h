// What the host writes into host memory before a program of a plan runs,
// and reads back after it: the image of its input tensor, laid out as the
// compiler that made the program expects (planes for an on-chip program,
// GEMM rows chunk by chunk for a host-step program), and its output tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/network.h"

namespace tpu::compiler {

// The host memory image of program k for its input tensor (the output of the
// layer before its first layer, or the network input).
std::vector<std::int8_t> program_host_image(const NetworkPlan& plan, std::size_t k, const Tensor& input);
// The same image written into `host`, `size` bytes that are zero before
// (a fresh host memory: no second copy of an image of tens of MB).
// CompileError if it does not fit.
void write_program_host_image(const NetworkPlan& plan, std::size_t k, const Tensor& input, std::int8_t* host,
                              std::size_t size);
// Program k's output tensor read back from the final host memory.
Tensor program_output(const NetworkPlan& plan, std::size_t k, const std::int8_t* host);

}  // namespace tpu::compiler
