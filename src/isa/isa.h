// The tpu-sim instruction set: the one table every other part derives from.
//
// The encoder, decoder, assembler, disassembler, the documentation tables and
// the generated Verilog package (rtl/tpu_isa_pkg.sv) all read this file; no
// opcode, flag bit, field position or width is written anywhere else.
//
// Encoding (docs/isa.md): every instruction is kInstrBytes bytes, little-endian
// as one 128-bit word. Bits [7:0] opcode, [15:8] flags, then kNumSlots operand
// slots (operand i in slot i, encoded in its field's width and zero-extended):
// three of kSlotBits bits and a last, short one in the word's top kLastSlotBits
// bits. Every bit of a slot above its field (all of an unused slot) is zero.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tpu::isa {

// ---- Encoding geometry ---------------------------------------------------
inline constexpr unsigned kInstrBytes = 16;
inline constexpr unsigned kInstrBits = kInstrBytes * 8;
inline constexpr unsigned kOpcodeLsb = 0;
inline constexpr unsigned kOpcodeBits = 8;
inline constexpr unsigned kFlagsLsb = kOpcodeLsb + kOpcodeBits;
inline constexpr unsigned kFlagsBits = 8;
inline constexpr unsigned kSlotsLsb = kFlagsLsb + kFlagsBits;
inline constexpr unsigned kSlotBits = 32;  // slots 0 .. kNumSlots-2
inline constexpr unsigned kNumSlots = 4;
inline constexpr unsigned kLastSlotBits = kInstrBits - kSlotsLsb - (kNumSlots - 1) * kSlotBits;

constexpr unsigned slot_lsb(unsigned slot) { return kSlotsLsb + slot * kSlotBits; }
constexpr unsigned slot_bits(unsigned slot) {
  return slot + 1 < kNumSlots ? kSlotBits : kLastSlotBits;
}

// ---- Operand fields ------------------------------------------------------
enum class Field : std::uint8_t {
  HostRow,     // row address in host memory (rows of N int8)
  UbRow,       // row address in the unified buffer
  AccRow,      // row address in the accumulators
  SrcRow,      // WHM source: a UB row, or an ACC row with .A
  WeightTile,  // tile address in weight memory (tiles of N x N int8)
  Rows,        // row count, at least 1
  QMul,        // requantization multiplier M
  QShift,      // requantization shift S
  QZero,       // requantization zero point Z
  MapH,        // convolution input map height (pixels)
  MapW,        // convolution input map width (pixels)
  OutW,        // convolution output map width (pixels)
  StrideY,     // convolution vertical stride
  StrideX,     // convolution horizontal stride
  Pad,         // the int8 value every lane of a padding row reads
  OriginY,     // input row of output row 0 for this kernel offset
  OriginX,     // input column of output column 0 for this kernel offset
  WinH,        // pooling window height
  WinW,        // pooling window width
  MapRow,      // unified buffer row of a map's pixel (0, 0)
  VecARow,     // unified buffer row of a VEC's operand A
  VecBRow,     // unified buffer row of a VEC's operand B
  VecZeroA,    // zero point of operand A
  VecZeroB,    // zero point of operand B
  VecFactorA,  // integer factor of operand A
  VecFactorB,  // integer factor of operand B
  VecOp,       // the vector operation (VecOperation)
  NormGroups,  // UB rows of one SMAX/LNRM token
  NormStride,  // UB rows between a token's rows
  NormShift,   // left shift of SMAX's and GELU's input
  NormK0,      // the constants of SMAX, LNRM, GELU (docs/quantization.md)
  NormK1,
  NormK2,
  NormRow,     // unified buffer row of the input's first token or row
  NormWidth,   // values of one SMAX/LNRM token, 0 for groups * N
};

struct FieldSpec {
  Field field;
  std::string_view name;  // as the assembler's messages and the docs say it
  unsigned width;         // bits in the encoding
  bool is_signed;         // two's complement in `width` bits
  std::int64_t min;       // legal values, inside what `width` can hold
  std::int64_t max;
  std::string_view description;
};

inline constexpr std::array<FieldSpec, 35> kFields{{
    {Field::HostRow, "host_row", 32, false, 0, (std::int64_t{1} << 32) - 1, "host memory row"},
    {Field::UbRow, "ub_row", 24, false, 0, (1 << 24) - 1, "unified buffer row"},
    {Field::AccRow, "acc_row", 24, false, 0, (1 << 24) - 1, "accumulator row"},
    {Field::SrcRow, "src_row", 24, false, 0, (1 << 24) - 1,
     "WHM source row: UB row, or ACC row with .A"},
    {Field::WeightTile, "weight_tile", 24, false, 0, (1 << 24) - 1, "weight memory tile"},
    {Field::Rows, "rows", 24, false, 1, (1 << 24) - 1, "number of rows, at least 1"},
    {Field::QMul, "M", 32, true, INT32_MIN, INT32_MAX, "requantization multiplier (int32)"},
    {Field::QShift, "S", 6, false, 0, 62, "requantization right shift"},
    {Field::QZero, "Z", 8, true, -128, 127, "requantization zero point (int8)"},
    {Field::MapH, "in_h", 16, false, 1, 65535, "convolution input map height"},
    {Field::MapW, "in_w", 16, false, 1, 65535, "convolution input map width"},
    {Field::OutW, "out_w", 16, false, 1, 65535, "convolution output map width"},
    {Field::StrideY, "stride_y", 8, false, 1, 255, "convolution vertical stride"},
    {Field::StrideX, "stride_x", 8, false, 1, 255, "convolution horizontal stride"},
    {Field::Pad, "pad", 8, true, -128, 127, "value of every lane of a padding row (int8)"},
    {Field::OriginY, "y0", 16, true, -32768, 32767,
     "input row of output row 0 (kernel row offset minus top padding)"},
    {Field::OriginX, "x0", 16, true, -32768, 32767,
     "input column of output column 0 (kernel column offset minus left padding)"},
    {Field::WinH, "win_h", 8, false, 1, 255, "pooling window height"},
    {Field::WinW, "win_w", 8, false, 1, 255, "pooling window width"},
    {Field::MapRow, "map_row", 24, false, 0, (1 << 24) - 1,
     "unified buffer row of the map's pixel (0, 0)"},
    {Field::VecARow, "a_row", 24, false, 0, (1 << 24) - 1, "unified buffer row of operand A"},
    {Field::VecBRow, "b_row", 24, false, 0, (1 << 24) - 1, "unified buffer row of operand B"},
    {Field::VecZeroA, "za", 8, true, -128, 127, "zero point of operand A (int8)"},
    {Field::VecZeroB, "zb", 8, true, -128, 127, "zero point of operand B (int8)"},
    {Field::VecFactorA, "da", 16, true, -32768, 32767, "integer factor of operand A (int16)"},
    {Field::VecFactorB, "db", 16, true, -32768, 32767, "integer factor of operand B (int16)"},
    {Field::VecOp, "op", 3, false, 0, 4, "vector operation: 0 ADD, 1 SUB, 2 MUL, 3 MAX, 4 MIN"},
    {Field::NormGroups, "groups", 16, false, 1, 65535, "UB rows of one SMAX or LNRM token"},
    {Field::NormStride, "stride", 24, false, 0, (1 << 24) - 1,
     "UB rows from one of a token's rows to the next"},
    {Field::NormShift, "sh", 4, false, 0, 15, "left shift of the input before the approximation"},
    {Field::NormK0, "k0", 32, true, INT32_MIN, INT32_MAX, "constant k0 of SMAX, LNRM, GELU (int32)"},
    {Field::NormK1, "k1", 32, true, INT32_MIN, INT32_MAX, "constant k1 of SMAX, LNRM, GELU (int32)"},
    {Field::NormK2, "k2", 32, true, INT32_MIN, INT32_MAX, "constant k2 of SMAX, LNRM, GELU (int32)"},
    {Field::NormRow, "x_row", 24, false, 0, (1 << 24) - 1,
     "unified buffer row of the input's first token or row"},
    {Field::NormWidth, "width", 16, false, 0, 65535,
     "values of one SMAX or LNRM token, at most groups * N (0: groups * N)"},
}};

// The operations of VEC, as VSCL's `op` field holds them (docs/isa.md, VEC).
enum class VecOperation : std::uint8_t { Add = 0, Sub = 1, Mul = 2, Max = 3, Min = 4 };

constexpr const FieldSpec& field_spec(Field f) { return kFields[static_cast<unsigned>(f)]; }

// ---- Flags ---------------------------------------------------------------
struct FlagSpec {
  char letter;       // written after the mnemonic and a dot, upper case
  std::uint8_t bit;  // bit index inside the flags byte
  std::string_view meaning;
};

// ---- Instructions ----------------------------------------------------------
enum class Opcode : std::uint8_t {
  NOP = 0x00,
  RHM = 0x01,
  WHM = 0x02,
  RW = 0x03,
  MMC = 0x04,
  ACT = 0x05,
  SETQ = 0x06,
  SYNC = 0x07,
  CMAP = 0x08,
  CSTR = 0x09,
  CTAP = 0x0A,
  POOL = 0x0B,
  CWIN = 0x0C,
  VEC = 0x0D,
  VSRC = 0x0E,
  HLT = 0x0F,
  VSCL = 0x10,
  NGEO = 0x11,
  NCON = 0x12,
  SMAX = 0x13,
  LNRM = 0x14,
  GELU = 0x15,
  HWT = 0x16,
  RWU = 0x17,
};

// The unit that executes an instruction once the controller issues it.
enum class Unit : std::uint8_t { Controller, HostDma, WeightDma, MatrixUnit, ActivationUnit };

// Each unit's name in the statistics, waveforms, timelines and messages
// (the SystemC modules and the RTL instances are named so too), in Unit's order.
inline constexpr std::array<std::string_view, 5> kUnitNames = {"controller", "host_dma", "weight_dma",
                                                               "systolic_array", "activation_unit"};
constexpr std::string_view unit_name(Unit u) { return kUnitNames[static_cast<std::size_t>(u)]; }

struct InstrSpec {
  Opcode opcode;
  std::string_view mnemonic;
  Unit unit;
  std::uint8_t num_flags;
  std::array<FlagSpec, 3> flags;
  std::uint8_t exclusive_flags;  // bit mask of flags of which at most one may be set
  std::uint8_t num_operands;
  std::array<Field, kNumSlots> operands;
  std::string_view summary;
  // The last `optional_operands` operands may be left out in assembly (they
  // are then 0) and are not printed when 0, so that programs written before
  // they existed keep their text and their bytes.
  std::uint8_t optional_operands = 0;
};

inline constexpr Field kNone = Field::Rows;  // filler for unused operand slots

inline constexpr std::array<InstrSpec, 24> kInstrs{{
    {Opcode::NOP, "NOP", Unit::Controller, 0, {}, 0, 0, {kNone, kNone, kNone, kNone}, "do nothing"},
    {Opcode::RHM, "RHM", Unit::HostDma, 0, {}, 0, 3, {Field::HostRow, Field::UbRow, Field::Rows, kNone},
     "copy rows host memory -> unified buffer"},
    {Opcode::WHM, "WHM", Unit::HostDma, 1,
     {{{'A', 0, "source is the accumulators, written raw as int32 little-endian"}}}, 0, 3,
     {Field::SrcRow, Field::HostRow, Field::Rows, kNone}, "copy rows unified buffer -> host memory"},
    {Opcode::RW, "RW", Unit::WeightDma, 0, {}, 0, 1, {Field::WeightTile, kNone, kNone, kNone},
     "push one weight tile into the weight FIFO"},
    {Opcode::MMC, "MMC", Unit::MatrixUnit, 3,
     {{{'S', 0, "switch to the next weight tile from the FIFO first"},
       {'O', 1, "overwrite the accumulators instead of adding"},
       {'C', 2, "convolve: rows are output pixels, input rows from the convolution geometry"}}},
     0, 3, {Field::UbRow, Field::AccRow, Field::Rows, kNone}, "matrix multiply UB rows into ACC rows"},
    {Opcode::ACT, "ACT", Unit::ActivationUnit, 3,
     {{{'R', 0, "ReLU"}, {'Q', 1, "sigmoid"}, {'T', 2, "tanh"}}}, 0b111, 3,
     {Field::AccRow, Field::UbRow, Field::Rows, kNone},
     "requantize and activate ACC rows into UB rows"},
    {Opcode::SETQ, "SETQ", Unit::Controller, 0, {}, 0, 3, {Field::QMul, Field::QShift, Field::QZero, kNone},
     "set the requantization registers"},
    {Opcode::SYNC, "SYNC", Unit::Controller, 0, {}, 0, 0, {kNone, kNone, kNone, kNone},
     "wait until every earlier instruction has completed"},
    {Opcode::CMAP, "CMAP", Unit::Controller, 0, {}, 0, 3, {Field::MapH, Field::MapW, Field::OutW, kNone},
     "set the convolution map geometry: input height and width, output width"},
    {Opcode::CSTR, "CSTR", Unit::Controller, 0, {}, 0, 3,
     {Field::StrideY, Field::StrideX, Field::Pad, kNone},
     "set the convolution strides and the padding value"},
    {Opcode::CTAP, "CTAP", Unit::Controller, 0, {}, 0, 2, {Field::OriginY, Field::OriginX, kNone, kNone},
     "set the input pixel of output pixel (0, 0) for the next convolution passes"},
    {Opcode::POOL, "POOL", Unit::ActivationUnit, 1,
     {{{'A', 0, "average: the window's sum less pad, requantized (without: the maximum)"}}}, 0, 3,
     {Field::MapRow, Field::UbRow, Field::Rows, kNone},
     "pool windows of a UB map into UB rows, one per output pixel"},
    {Opcode::CWIN, "CWIN", Unit::Controller, 0, {}, 0, 2, {Field::WinH, Field::WinW, kNone, kNone},
     "set the pooling window"},
    {Opcode::VEC, "VEC", Unit::ActivationUnit, 3,
     {{{'R', 0, "ReLU"}, {'Q', 1, "sigmoid"}, {'T', 2, "tanh"}}}, 0b111, 3,
     {Field::VecARow, Field::UbRow, Field::Rows, kNone},
     "combine UB rows with operand B lane by lane, requantize and activate into UB rows"},
    {Opcode::VSRC, "VSRC", Unit::Controller, 1,
     {{{'B', 0, "operand B is one row, broadcast over every row"}}}, 0, 3,
     {Field::VecBRow, Field::VecZeroA, Field::VecZeroB, kNone},
     "set VEC's operand B and the zero points of A and B"},
    {Opcode::HLT, "HLT", Unit::Controller, 0, {}, 0, 0, {kNone, kNone, kNone, kNone},
     "stop once every earlier instruction has completed"},
    {Opcode::VSCL, "VSCL", Unit::Controller, 0, {}, 0, 3,
     {Field::VecFactorA, Field::VecFactorB, Field::VecOp, kNone},
     "set VEC's factors of A and B and its operation"},
    {Opcode::NGEO, "NGEO", Unit::Controller, 0, {}, 0, 4,
     {Field::NormGroups, Field::NormStride, Field::NormShift, Field::NormWidth},
     "set the token geometry of SMAX and LNRM and the input shift of SMAX and GELU", 1},
    {Opcode::NCON, "NCON", Unit::Controller, 0, {}, 0, 3, {Field::NormK0, Field::NormK1, Field::NormK2, kNone},
     "set the constants of SMAX, LNRM and GELU"},
    {Opcode::SMAX, "SMAX", Unit::ActivationUnit, 0, {}, 0, 3,
     {Field::NormRow, Field::UbRow, Field::Rows, kNone},
     "integer softmax of each token's UB rows into UB rows"},
    {Opcode::LNRM, "LNRM", Unit::ActivationUnit, 0, {}, 0, 3,
     {Field::NormRow, Field::UbRow, Field::Rows, kNone},
     "integer LayerNorm (no affine) of each token's UB rows into UB rows"},
    {Opcode::GELU, "GELU", Unit::ActivationUnit, 0, {}, 0, 3,
     {Field::NormRow, Field::UbRow, Field::Rows, kNone},
     "integer GELU of UB rows into UB rows, element by element"},
    // Attention's second operand as a weight tile (docs/microarchitecture.md,
    // "Attention's second operand"): through the host, or (beyond TPUv1, with
    // the configuration's ub_weight_path) from the unified buffer.
    {Opcode::HWT, "HWT", Unit::HostDma, 1, {{{'T', 0, "transpose: tile row k is lane k of the rows"}}}, 0, 3,
     {Field::HostRow, Field::WeightTile, Field::Rows, kNone},
     "the host lays host rows out as a weight tile in weight memory"},
    {Opcode::RWU, "RWU", Unit::WeightDma, 1, {{{'T', 0, "transpose: tile row k is lane k of the rows"}}}, 0, 2,
     {Field::UbRow, Field::Rows, kNone, kNone},
     "push a weight tile made of UB rows into the weight FIFO (ub_weight_path)"},
}};

// Looks up a flag's bit mask at compile time; 0 if the instruction has no such flag.
constexpr std::uint8_t flag_mask(Opcode op, char letter) {
  for (const InstrSpec& s : kInstrs) {
    if (s.opcode != op) continue;
    for (unsigned i = 0; i < s.num_flags; ++i)
      if (s.flags[i].letter == letter) return static_cast<std::uint8_t>(1u << s.flags[i].bit);
  }
  return 0;
}

// Flag masks by name, for the code that gives them meaning.
inline constexpr std::uint8_t kFlagWhmAcc = flag_mask(Opcode::WHM, 'A');
inline constexpr std::uint8_t kFlagMmcSwitch = flag_mask(Opcode::MMC, 'S');
inline constexpr std::uint8_t kFlagMmcOverwrite = flag_mask(Opcode::MMC, 'O');
inline constexpr std::uint8_t kFlagMmcConvolve = flag_mask(Opcode::MMC, 'C');
inline constexpr std::uint8_t kFlagPoolAverage = flag_mask(Opcode::POOL, 'A');
inline constexpr std::uint8_t kFlagActRelu = flag_mask(Opcode::ACT, 'R');
inline constexpr std::uint8_t kFlagActSigmoid = flag_mask(Opcode::ACT, 'Q');
inline constexpr std::uint8_t kFlagActTanh = flag_mask(Opcode::ACT, 'T');
inline constexpr std::uint8_t kFlagVsrcBroadcast = flag_mask(Opcode::VSRC, 'B');
inline constexpr std::uint8_t kFlagHwtTranspose = flag_mask(Opcode::HWT, 'T');
inline constexpr std::uint8_t kFlagRwuTranspose = flag_mask(Opcode::RWU, 'T');
// VEC's activation flags are ACT's: the same letters in the same bits.
static_assert(flag_mask(Opcode::VEC, 'R') == kFlagActRelu &&
              flag_mask(Opcode::VEC, 'Q') == kFlagActSigmoid &&
              flag_mask(Opcode::VEC, 'T') == kFlagActTanh);

const InstrSpec* find_instr(Opcode op);
const InstrSpec* find_instr(std::uint8_t opcode_byte);
const InstrSpec* find_instr(std::string_view mnemonic);  // case-insensitive
const InstrSpec& spec_of(Opcode op);                     // op must be in the table
std::optional<std::uint8_t> flag_bit(const InstrSpec& spec, char letter);  // case-insensitive

// Mask of all flag bits the instruction accepts.
std::uint8_t valid_flag_mask(const InstrSpec& spec);

}  // namespace tpu::isa
