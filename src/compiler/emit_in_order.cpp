// Emission of an OpList (op_list.h): reads the ops of a GEMM or host-step
// program in their final order and writes the instructions, with the RW
// prefetches and SETQs they need, into an Emitter.
#include "compiler/op_list.h"

namespace tpu::compiler {

using isa::Opcode;

namespace {

bool is_switch(const onchip::Op& op) {
  return op.opcode == Opcode::MMC && (op.flags & isa::kFlagMmcSwitch);
}

}  // namespace

void emit_in_order(const OpList& ops, const ArchConfig& cfg, std::optional<model::Requant> requant,
                   Emitter& e) {
  std::vector<std::uint64_t> order;  // the weight tiles in the order the MMC.S use them
  for (const OpList::Line& line : ops.lines())
    if (line.op && is_switch(*line.op)) order.push_back(line.op->tile);
  WeightPrefetcher prefetch(e, std::move(order), cfg.fifo_depth);
  RequantRegister q(e, requant);
  std::size_t switches = 0, layer = 0;
  for (const OpList::Line& line : ops.lines()) {
    if (!line.op) {
      e.comment(line.comment);
      continue;
    }
    const onchip::Op& op = *line.op;
    if (op.geometry || op.opcode == Opcode::POOL || op.opcode == Opcode::VEC ||
        (op.opcode == Opcode::MMC && (op.flags & isa::kFlagMmcConvolve)))
      throw CompileError("internal error: an in-order program with an op that needs the scheduler");
    layer = op.layer;
    e.set_layer(layer);
    if (is_switch(op)) prefetch.before_use(switches++);
    if (op.requant) q.set(*op.requant);
    if (op.opcode != Opcode::SETQ) e.emit(op.opcode, op.flags, op.a, op.b, op.c);
  }
  e.set_layer(layer);
  e.emit(Opcode::HLT, 0);
}

}  // namespace tpu::compiler
