// The on-chip network compiler's intermediate form: the operations of one
// program in dependence order, before scheduling. Lowering (lower_chunk.cpp
// and the lower_*.cpp of each layer kind) produces them; scheduling
// (onchip_schedule.cpp) places them into an instruction stream that keeps
// the array busy and emits the register-setting instructions (SETQ, CMAP,
// CSTR, CTAP, CWIN) and the weight prefetches (RW) they need.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/emitter.h"
#include "config/arch_config.h"
#include "isa/instruction.h"
#include "model/activation.h"

namespace tpu::compiler::onchip {

struct Op {
  isa::Opcode opcode = isa::Opcode::NOP;  // RHM, WHM, HWT, RWU, MMC, ACT, POOL, VEC, SMAX, LNRM or GELU
  std::uint8_t flags = 0;
  std::int64_t a = 0, b = 0, c = 0;        // the instruction's operands
  std::optional<isa::ConvGeometry> geometry;  // MMC.C, POOL; VEC: its vector registers (`vec`)
  std::optional<model::Requant> requant;      // ACT, POOL.A, VEC
  std::uint64_t tile = 0;                     // MMC.S: the weight tile it switches to
  std::size_t layer = 0;                      // charged to
  // WHM of an activation's output: the index (in the op list) of that ACT.
  std::optional<std::size_t> after;
  // RHM of a band of a map spilled to host memory: the scheduler counts the
  // array as waiting for it when an MMC reads its rows, so that the next
  // band's load is placed during this band's passes.
  bool band_load = false;
  // A weight tile made at run time (lower_matmul.cpp): an MMC.S's `feed` is
  // the index of the op that makes its tile (an HWT, or an RWU that the
  // weight prefetcher emits in place of RW); with `runtime_tile`, an MMC.S's
  // `tile` and an HWT's `b` are slots of the tiles reserved after the
  // network's (onchip_emit.cpp makes them tile indices).
  std::optional<std::size_t> feed;
  bool runtime_tile = false;
};

// Emits `ops` in an order that respects every dependence through memory
// (each op is emitted after every earlier op whose ranges it conflicts with),
// deferring ACT, POOL and host transfers so that the in-order controller does
// not stall on them while the array could work. Appends HLT.
void schedule(const std::vector<Op>& ops, const ArchConfig& cfg, Emitter& e);

}  // namespace tpu::compiler::onchip
