// A decoded instruction, its binary encoding and its canonical assembly text.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/isa.h"

namespace tpu::isa {

struct Instruction {
  Opcode opcode = Opcode::NOP;
  std::uint8_t flags = 0;
  std::array<std::int64_t, kNumSlots> operands{};  // unused operands are 0

  bool has(std::uint8_t flag_mask) const { return (flags & flag_mask) != 0; }
  bool operator==(const Instruction& o) const {
    return opcode == o.opcode && flags == o.flags && operands == o.operands;
  }
  bool operator!=(const Instruction& o) const { return !(*this == o); }
};

using EncodedInstr = std::array<std::uint8_t, kInstrBytes>;

// Thrown for bytes that are not a valid instruction or program file.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Checks that `instr` is encodable: known opcode, accepted flags, at most one
// flag of an exclusive group, operands within their fields' legal ranges and
// unused operands zero. Returns an empty string when valid, else the reason.
std::string validate(const Instruction& instr);

// Encodes a valid instruction (validate() must return ""; throws
// std::invalid_argument otherwise).
EncodedInstr encode(const Instruction& instr);

// Decodes and validates; throws DecodeError with a one-line reason.
Instruction decode(const EncodedInstr& bytes);

// Canonical assembly: upper-case mnemonic, flags in table order, operands in
// decimal, e.g. "MMC.SO 0, 0, 10". tpu-as turns it back into the same bytes.
std::string disassemble(const Instruction& instr);

// ---- Memory footprint ------------------------------------------------------
// The memories an instruction reads and writes, in each memory's own units.
// The assembler checks them against a configuration, and the simulator uses
// them for fault checks and hazard interlocks.
enum class Space : std::uint8_t { HostMem, WeightMem, UnifiedBuffer, Accumulators };
const char* space_name(Space s);
// The unit a space is addressed in, for messages: "tile" (weight memory) or "row".
const char* space_unit(Space s);

struct Access {
  Space space;
  std::uint64_t base;
  std::uint64_t count;
  bool is_write;
  unsigned operand;  // index of the operand that holds `base`
  // Both name a row of the same memory.
  bool overlaps(const Access& o) const {
    return space == o.space && base < o.base + o.count && o.base < base + count;
  }
};

// The rules of an instruction that depend on the array size N (beside its
// fields' ranges): an NGEO's width at most groups * N values, an HWT's or
// RWU's rows at most N (a tile has N rows). Empty when `in` keeps them, else
// the reason, and in *operand the operand at fault. The assembler and the
// program-file loader check them all, the controller HWT's and RWU's.
std::string check_with_array_n(const Instruction& in, std::uint64_t array_n, unsigned* operand = nullptr);

// Host rows one accumulator row fills when WHM.A writes it out (N int32 = 4N bytes).
inline constexpr unsigned kHostRowsPerAccRow = 4;

// ---- The vector registers -------------------------------------------------------
// What VSRC and VSCL set (docs/isa.md, VEC), at their reset values. A VEC
// reads them when it issues.
struct VecRegs {
  std::uint32_t b_row = 0;   // operand B's first UB row
  bool broadcast = false;    // B is the one row b_row, used for every row
  std::int8_t za = 0, zb = 0;
  std::int16_t da = 1, db = 1;
  VecOperation op = VecOperation::Add;
  bool operator==(const VecRegs& o) const {
    return b_row == o.b_row && broadcast == o.broadcast && za == o.za && zb == o.zb &&
           da == o.da && db == o.db && op == o.op;
  }
};

// ---- The normalization registers -----------------------------------------------
// What NGEO and NCON set (docs/isa.md, SMAX, LNRM, GELU), at their reset
// values. An SMAX, LNRM or GELU reads them when it issues.
struct NormRegs {
  std::uint32_t groups = 1;  // UB rows of one token
  std::uint32_t stride = 0;  // UB rows between a token's rows
  std::uint32_t shift = 0;   // sh, 0..15
  std::uint32_t width = 0;   // values of a token; 0 for groups * N
  std::int32_t k0 = 0, k1 = 0, k2 = 0;
  // D, the values of a token an SMAX or LNRM takes its statistics over (the
  // first D of lanes 0..N-1 of row 0, then of row 1, ...): width, or
  // groups * N when width is 0 or more than that (docs/isa.md, NGEO).
  std::uint64_t token_values(std::uint64_t n) const {
    const std::uint64_t all = std::uint64_t{groups} * n;
    return width == 0 || width > all ? all : width;
  }
  // UB rows from a token's first row to its last, plus the tokens: the hull an
  // SMAX or LNRM of `tokens` tokens reads and writes.
  std::uint64_t span(std::uint64_t tokens) const {
    return std::uint64_t{groups - 1} * stride + tokens;
  }
  bool operator==(const NormRegs& o) const {
    return groups == o.groups && stride == o.stride && shift == o.shift && width == o.width &&
           k0 == o.k0 && k1 == o.k1 && k2 == o.k2;
  }
};

// ---- Convolution and pooling geometry ------------------------------------------
// The registers CMAP, CSTR, CTAP and CWIN set (docs/isa.md, MMC.C and POOL),
// at their reset values. An MMC.C or POOL reads them when it issues. Its
// output pixel i is (oy, ox) = (i / out_w, i % out_w); window position
// (dy, dx) of it (MMC.C: (0, 0) only) is input pixel (iy, ix) =
// (y0 + oy * stride_y + dy, x0 + ox * stride_x + dx), which is the map's row
// iy * in_w + ix (from the instruction's first row) when it lies inside the
// in_h x in_w map, and padding otherwise.
struct ConvGeometry {
  std::uint32_t in_h = 1, in_w = 1, out_w = 1;
  std::uint32_t stride_y = 1, stride_x = 1;
  std::int8_t pad = 0;
  std::int32_t origin_y = 0, origin_x = 0;
  std::uint32_t win_h = 1, win_w = 1;
  // The vector registers live beside the convolution registers: the
  // controller keeps them in one place and sends them with every command.
  VecRegs vec;
  NormRegs norm;

  // Sets the registers a CMAP, CSTR, CTAP, CWIN, VSRC, VSCL, NGEO or NCON names; other
  // instructions change nothing.
  void apply(const Instruction& instr);
  // Rows of the input map: the UB rows an MMC.C or POOL may read, from its first row on.
  std::uint64_t map_rows() const { return std::uint64_t{in_h} * in_w; }
  // Window positions of a POOL's output pixel: win_h * win_w.
  std::uint64_t window() const { return std::uint64_t{win_h} * win_w; }
  // The map row of output pixel i's window position (dy, dx), or -1 for padding.
  std::int64_t input_row(std::uint64_t i, std::uint32_t dy = 0, std::uint32_t dx = 0) const;
  bool operator==(const ConvGeometry& o) const {
    return in_h == o.in_h && in_w == o.in_w && out_w == o.out_w && stride_y == o.stride_y &&
           stride_x == o.stride_x && pad == o.pad && origin_y == o.origin_y &&
           origin_x == o.origin_x && win_h == o.win_h && win_w == o.win_w && vec == o.vec &&
           norm == o.norm;
  }
};

// The ranges `instr` reads and writes. An MMC.C or a POOL reads the whole
// input map of `geometry` (the registers as they stand when it issues): its
// first operand's row ..+in_h*in_w. A VEC reads operand B where the vector
// registers of `geometry` place it; an SMAX or LNRM the hull of its tokens'
// rows (NormRegs::span).
std::vector<Access> accesses(const Instruction& instr, const ConvGeometry& geometry = {});

}  // namespace tpu::isa
