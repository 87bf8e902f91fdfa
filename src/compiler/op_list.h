// A program in the on-chip compiler's IR (onchip_ops.h: one `onchip::Op` per
// RHM, WHM, MMC or ACT) whose order its compiler has chosen already, with the
// comment lines of its assembly in place. The GEMM compiler (gemm_lower.cpp)
// and the host-step compiler (lower_segment.cpp) lower into it: their
// double-buffered loops already overlap transfers with the array, so they
// need no scheduler. emit_in_order (emit_in_order.cpp) writes it through the
// Emitter, adding what the on-chip scheduler adds to its ops too: each MMC.S's
// weight prefetches (RW), a SETQ before an ACT whose requantization is not the
// one set, and HLT.
//
// What onchip_ops.h's Op lacks for these programs lives here: the comment
// lines, and an explicit SETQ op (opcode SETQ with `requant`) for a compiler
// that sets the register before its first transfer rather than at the ACT.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/emitter.h"
#include "compiler/onchip_ops.h"
#include "config/arch_config.h"
#include "model/activation.h"

namespace tpu::compiler {

class OpList {
 public:
  struct Line {
    std::string comment;            // when `op` is empty
    std::optional<onchip::Op> op;
  };

  // The layer the following ops are charged to (network programs).
  void set_layer(std::size_t layer) { layer_ = layer; }
  void comment(std::string text) { lines_.push_back({std::move(text), std::nullopt}); }
  // Appends an op charged to the current layer. The reference is for filling
  // in the rest at once (an MMC.S's `tile`, an ACT's `requant`); the next
  // push invalidates it.
  onchip::Op& push(isa::Opcode opcode, std::uint8_t flags, std::int64_t a, std::int64_t b,
                   std::int64_t c) {
    onchip::Op op;
    op.opcode = opcode;
    op.flags = flags;
    op.a = a, op.b = b, op.c = c;
    op.layer = layer_;
    lines_.push_back({{}, std::move(op)});
    return *lines_.back().op;
  }
  const std::vector<Line>& lines() const { return lines_; }

 private:
  std::vector<Line> lines_;
  std::size_t layer_ = 0;
};

// Emits `ops` in their order, then HLT (charged to the last op's layer).
// `requant` is the requantization register's value at the start as far as
// the program may rely on it: the reset values (model::Requant{}), or none,
// so that the first ACT or SETQ sets it. Throws CompileError on an op that
// needs the convolution, window or vector registers (only the on-chip
// scheduler sets those).
void emit_in_order(const OpList& ops, const ArchConfig& cfg, std::optional<model::Requant> requant,
                   Emitter& e);

}  // namespace tpu::compiler
