// Fuzz target: the program loader and the disassembler (src/isa) on
// arbitrary file bytes, as tpu-dis and tpu-sim run read them.
//
// Properties, beyond not crashing: parse_program either accepts the bytes or
// throws a DecodeError with a one-line reason; an accepted file is canonical
// (serializing the program gives back exactly the same bytes); the
// disassembly re-assembles to the same program; every instruction's memory
// footprint is computed without overflow.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "asm/assembler.h"
#include "fuzz_check.h"
#include "isa/program.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tpu;
  const std::vector<std::uint8_t> bytes(data, data + size);
  isa::Program prog;
  try {
    prog = isa::parse_program(bytes);
  } catch (const isa::DecodeError& e) {
    FUZZ_CHECK(fuzz::one_line(e.what()), e.what());
    return 0;
  }
  FUZZ_CHECK(isa::serialize(prog) == bytes, "an accepted file is not canonical");
  std::string text = ".array " + std::to_string(prog.array_n) + "\n";
  for (const isa::Instruction& in : prog.code) {
    FUZZ_CHECK(isa::validate(in).empty(), isa::validate(in));
    text += isa::disassemble(in) + "\n";
    for (const isa::Access& a : isa::accesses(in))
      FUZZ_CHECK(a.count >= 1 && a.base + a.count > a.base, isa::disassemble(in));
  }
  const assembler::Result r = assembler::assemble(text, {});
  FUZZ_CHECK(r.program && isa::serialize(*r.program) == bytes,
             "disassembly does not re-assemble to the same bytes:\n" + text);
  return 0;
}
