// The on-chip network compiler: a whole network as one program
// (docs/quantization.md, "Whole networks on chip"). Reads a network, a
// batch and the configuration; produces a network plan of one program.
//
// The passes, in order, each in its own file over the state in
// onchip_compiler.h:
// 1. placement (onchip_place.cpp): each tensor's layout in planes, flatten
//    as a view, the first layer's im2col when it saves array passes;
// 2. allocation (onchip_allocate.cpp): unified buffer rows by liveness,
//    accumulator jobs, host memory rows;
// 3. the chunk of samples (onchip_chunks.cpp): the largest that fits, or the
//    count an estimate prefers; staging slots of spilled maps;
// 4. lowering (lower_chunk.cpp and a lower_*.cpp per operator family): each
//    layer to MMC/MMC.C passes, ACT, POOL, VEC and host transfers
//    (onchip_ops.h);
// 5. scheduling (onchip_schedule.cpp) and emission (onchip_emit.cpp).
#include <fmt/format.h>

#include "common/plural.h"
#include "compiler/network.h"
#include "compiler/onchip_compiler.h"

namespace tpu::compiler::onchip {

NetworkPlan OnChip::compile() {
  if (batch_ == 0) throw CompileError("the batch is empty");
  place();
  choose_chunk();
  if (spill_) size_staging();
  commit_allocation();
  const std::uint64_t host_rows = allocate_host();

  if (needs_const_) lower_const();
  lower_token_constants();
  for (std::uint64_t c = 0; c < chunks_; ++c) lower_chunk(c, std::min(chunk_, batch_ - c * chunk_));
  const std::uint64_t tiles = tiles_.count() + runtime_slots_;
  if (tiles > cfg_.weight_tiles)
    throw CompileError(fmt::format("the network's weights need {}{}, weight memory has {}", plural(tiles, "tile"),
                                   runtime_slots_ ? fmt::format(" ({} of them for a matmul's run-time tiles)", runtime_slots_)
                                                  : std::string(),
                                   cfg_.weight_tiles));
  return emit(host_rows);
}

}  // namespace tpu::compiler::onchip

namespace tpu::compiler {

NetworkPlan compile_on_chip(const Network& net, std::uint64_t batch, const ArchConfig& cfg) {
  return onchip::OnChip(net, batch, cfg).compile();
}

}  // namespace tpu::compiler
