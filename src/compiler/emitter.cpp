#include "compiler/emitter.h"

namespace tpu::compiler {

void Emitter::emit(isa::Opcode op, std::uint8_t flags, std::int64_t a, std::int64_t b,
                   std::int64_t c, std::int64_t d) {
  isa::Instruction in;
  in.opcode = op;
  in.flags = flags;
  const unsigned n = isa::spec_of(op).num_operands;
  if (n > 0) in.operands[0] = a;
  if (n > 1) in.operands[1] = b;
  if (n > 2) in.operands[2] = c;
  if (n > 3) in.operands[3] = d;  // NGEO's width
  if (const std::string e = isa::validate(in); !e.empty()) throw CompileError("internal error: " + e);
  asm_ += "        " + isa::disassemble(in) + "\n";
  code_.push_back(in);
  layers_.push_back(layer_);
}

std::uint8_t act_flags(model::ActFunction f) {
  switch (f) {
    case model::ActFunction::None: return 0;
    case model::ActFunction::Relu: return isa::kFlagActRelu;
    case model::ActFunction::Sigmoid: return isa::kFlagActSigmoid;
    case model::ActFunction::Tanh: return isa::kFlagActTanh;
  }
  return 0;
}

}  // namespace tpu::compiler
