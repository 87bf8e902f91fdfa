// The pieces the compilers share to write a program: an instruction emitter
// that keeps the commented assembly (and the layer each instruction is
// charged to), the weight-tile prefetcher, and the ACT flags of an
// activation function. Every program reaches the Emitter from the ops of
// onchip_ops.h: the on-chip compiler's through its scheduler
// (onchip_schedule.cpp), the GEMM and host-step compilers' in their own order
// through emit_in_order (op_list.h).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/math.h"
#include "compiler/gemm.h"
#include "isa/instruction.h"
#include "model/activation.h"

namespace tpu::compiler {

class Emitter {
 public:
  void comment(const std::string& text) { asm_ += "; " + text + "\n"; }
  // The layer the following instructions are charged to (network programs).
  void set_layer(std::size_t layer) { layer_ = layer; }
  // Appends one instruction; an operand out of its field is a compiler bug.
  void emit(isa::Opcode op, std::uint8_t flags, std::int64_t a = 0, std::int64_t b = 0,
            std::int64_t c = 0, std::int64_t d = 0);
  std::vector<isa::Instruction>& code() { return code_; }
  std::vector<std::size_t>& layers() { return layers_; }
  std::string& text() { return asm_; }

 private:
  std::vector<isa::Instruction> code_;
  std::vector<std::size_t> layers_;  // per instruction
  std::string asm_;
  std::size_t layer_ = 0;
};

// Issues RW as far ahead as the weight FIFO allows: F tiles in the FIFO (or in
// flight) plus one in the shadow registers. One more would stall issue until an
// MMC.S that comes after it in program order: a deadlock. A tile made at run
// time (attention's second operand: docs/microarchitecture.md) is held until
// the instruction that makes it has been emitted (release); it and every
// later tile then wait. Its feed, when given, is the instruction that pushes
// it into the FIFO in place of an RW (an RWU).
class WeightPrefetcher {
 public:
  WeightPrefetcher(Emitter& e, std::vector<std::uint64_t> order, std::uint64_t fifo_depth)
      : e_(e), order_(std::move(order)), ahead_(fifo_depth + 1), held_(order_.size(), false),
        feed_(order_.size()) {}
  void hold(std::size_t use, std::optional<isa::Instruction> feed) {
    held_.at(use) = true;
    feed_.at(use) = std::move(feed);
  }
  void release(std::size_t use) { held_.at(use) = false; }
  // Before the MMC.S that uses tile number `use` (its index in `order`).
  void before_use(std::size_t use) {
    while (next_ < order_.size() && next_ < use + ahead_ && !held_[next_]) {
      if (feed_[next_]) {
        const isa::Instruction& in = *feed_[next_];
        e_.emit(in.opcode, in.flags, in.operands[0], in.operands[1], in.operands[2]);
      } else {
        e_.emit(isa::Opcode::RW, 0, order_[next_]);
      }
      ++next_;
    }
    if (next_ <= use && use < order_.size()) throw std::logic_error("internal error: a weight tile used before it is made");
  }

 private:
  Emitter& e_;
  std::vector<std::uint64_t> order_;
  std::uint64_t ahead_;
  std::vector<bool> held_;
  std::vector<std::optional<isa::Instruction>> feed_;
  std::size_t next_ = 0;
};

// The requantization register as a program sets it: SETQ only where an
// ACT, VEC or POOL.A needs other values than the register holds (`held`: what
// it holds at the program's start, if known).
class RequantRegister {
 public:
  explicit RequantRegister(Emitter& e, std::optional<model::Requant> held = std::nullopt)
      : e_(e), held_(held) {}
  void set(const model::Requant& q) {
    if (held_ && held_->multiplier == q.multiplier && held_->shift == q.shift && held_->zero_point == q.zero_point)
      return;
    e_.emit(isa::Opcode::SETQ, 0, q.multiplier, q.shift, q.zero_point);
    held_ = q;
  }

 private:
  Emitter& e_;
  std::optional<model::Requant> held_;
};

// The ACT instruction's flags for an activation function.
std::uint8_t act_flags(model::ActFunction f);

}  // namespace tpu::compiler
