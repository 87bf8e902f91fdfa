// Programs' data in host memory: their output rows (int8, or the int32
// results WHM.A writes as four rows each), and the layout of the host-step
// compiler's programs (segment_compiler.cpp): the image the host writes for
// a program's input tensor (its first layer's GEMM rows, chunk by chunk and
// K tile by K tile, and the constant block) and the output tensor read back
// from its rows. The runtime (runtime/host_image.h) calls these for a
// SegmentPlan; the on-chip layout is the runtime's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/network.h"
#include "isa/instruction.h"

namespace tpu::compiler {

// The host-step program's input image and output tensor.
std::vector<std::int8_t> segments_host_image(const NetworkPlan& plan, const SegmentPlan& seg,
                                             const Tensor& input);
Tensor segments_output(const NetworkPlan& plan, const SegmentPlan& seg, const std::int8_t* host);

// The int32 that WHM.A wrote as four little-endian bytes (docs/isa.md).
inline std::int32_t read_int32_le(const std::int8_t* bytes) {
  std::uint32_t u = 0;
  for (unsigned byte = 0; byte < 4; ++byte)
    u |= std::uint32_t{static_cast<std::uint8_t>(bytes[byte])} << (8 * byte);
  return static_cast<std::int32_t>(u);
}

// Program prog's output for the plan's batch, `elements` values (zero) to
// be read from host memory.
inline Tensor output_tensor(const NetworkPlan& plan, const ProgramPlan& prog, std::size_t elements) {
  Tensor y;
  y.shape = {plan.batch};
  y.shape.insert(y.shape.end(), prog.out_shape.begin(), prog.out_shape.end());
  y.int32 = prog.out_int32;
  y.data.resize(elements);
  return y;
}

// Host rows per output row: an int32 accumulator row takes four (WHM.A).
inline std::uint64_t host_rows_per_output_row(const ProgramPlan& prog) {
  return prog.out_int32 ? isa::kHostRowsPerAccRow : 1;
}

// Lane j of an output row that starts at `row` in host memory.
inline std::int32_t output_lane(const ProgramPlan& prog, const std::int8_t* row, std::uint64_t j) {
  return prog.out_int32 ? read_int32_le(row + 4 * j) : row[j];
}

}  // namespace tpu::compiler
