#include "isa/instruction.h"

#include <fmt/format.h>

#include "common/plural.h"

namespace tpu::isa {
namespace {

// Bit access on the little-endian 128-bit instruction word; width <= 64.
std::uint64_t get_bits(const EncodedInstr& b, unsigned lsb, unsigned width) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) {
    const unsigned bit = lsb + i;
    v |= std::uint64_t{(b[bit / 8] >> (bit % 8)) & 1u} << i;
  }
  return v;
}

void put_bits(EncodedInstr& b, unsigned lsb, unsigned width, std::uint64_t v) {
  for (unsigned i = 0; i < width; ++i) {
    const unsigned bit = lsb + i;
    const auto mask = static_cast<std::uint8_t>(1u << (bit % 8));
    if ((v >> i) & 1u)
      b[bit / 8] |= mask;
    else
      b[bit / 8] &= static_cast<std::uint8_t>(~mask);
  }
}

std::uint64_t field_mask(unsigned width) {
  return width >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
}

// Two's complement in `width` bits <-> value.
std::uint64_t to_field_bits(const FieldSpec& f, std::int64_t v) {
  return static_cast<std::uint64_t>(v) & field_mask(f.width);
}

std::int64_t from_field_bits(const FieldSpec& f, std::uint64_t raw) {
  if (f.is_signed && ((raw >> (f.width - 1)) & 1u))
    return static_cast<std::int64_t>(raw | ~field_mask(f.width));
  return static_cast<std::int64_t>(raw);
}

std::string flag_letters(const InstrSpec& spec, std::uint8_t flags) {
  std::string s;
  for (unsigned k = 0; k < spec.num_flags; ++k)
    if (flags & (1u << spec.flags[k].bit)) s += spec.flags[k].letter;
  return s;
}

std::string check_flags(const InstrSpec& spec, std::uint8_t flags) {
  const std::uint8_t unknown = flags & static_cast<std::uint8_t>(~valid_flag_mask(spec));
  if (unknown != 0) {
    const int bits = __builtin_popcount(unknown);
    return fmt::format("{} 0x{:02x} {} not defined for {}", agree(bits, "flag bit", "flag bits"),
                       unknown, agree(bits, "is", "are"), spec.mnemonic);
  }
  const std::uint8_t excl = flags & spec.exclusive_flags;
  if ((excl & (excl - 1)) != 0)
    return fmt::format("flags {} of {} cannot be combined", flag_letters(spec, excl), spec.mnemonic);
  return {};
}

}  // namespace

std::string validate(const Instruction& instr) {
  const InstrSpec* spec = find_instr(instr.opcode);
  if (spec == nullptr)
    return fmt::format("unknown opcode 0x{:02x}", static_cast<unsigned>(instr.opcode));
  if (std::string e = check_flags(*spec, instr.flags); !e.empty()) return e;
  for (unsigned i = 0; i < kNumSlots; ++i) {
    const std::int64_t v = instr.operands[i];
    if (i >= spec->num_operands) {
      if (v != 0) return fmt::format("{} has no operand slot {}", spec->mnemonic, i);
      continue;
    }
    const FieldSpec& f = field_spec(spec->operands[i]);
    if (v < f.min || v > f.max)
      return fmt::format("{} = {} is out of range [{}, {}]", f.name, v, f.min, f.max);
  }
  return {};
}

EncodedInstr encode(const Instruction& instr) {
  if (std::string e = validate(instr); !e.empty()) throw std::invalid_argument(e);
  const InstrSpec& spec = spec_of(instr.opcode);
  EncodedInstr b{};
  put_bits(b, kOpcodeLsb, kOpcodeBits, static_cast<std::uint8_t>(instr.opcode));
  put_bits(b, kFlagsLsb, kFlagsBits, instr.flags);
  for (unsigned i = 0; i < spec.num_operands; ++i) {
    const FieldSpec& f = field_spec(spec.operands[i]);
    put_bits(b, slot_lsb(i), f.width, to_field_bits(f, instr.operands[i]));
  }
  return b;
}

Instruction decode(const EncodedInstr& b) {
  const auto op = static_cast<std::uint8_t>(get_bits(b, kOpcodeLsb, kOpcodeBits));
  const InstrSpec* spec = find_instr(op);
  if (spec == nullptr) throw DecodeError(fmt::format("unknown opcode 0x{:02x}", op));
  Instruction instr;
  instr.opcode = spec->opcode;
  instr.flags = static_cast<std::uint8_t>(get_bits(b, kFlagsLsb, kFlagsBits));
  if (std::string e = check_flags(*spec, instr.flags); !e.empty()) throw DecodeError(e);
  for (unsigned i = 0; i < kNumSlots; ++i) {
    const unsigned width = i < spec->num_operands ? field_spec(spec->operands[i]).width : 0;
    if (get_bits(b, slot_lsb(i) + width, slot_bits(i) - width) != 0)
      throw DecodeError(fmt::format("{}: unused bits of operand slot {} are not zero",
                                    spec->mnemonic, i));
    if (width == 0) continue;
    const FieldSpec& f = field_spec(spec->operands[i]);
    instr.operands[i] = from_field_bits(f, get_bits(b, slot_lsb(i), width));
    if (instr.operands[i] < f.min || instr.operands[i] > f.max)
      throw DecodeError(fmt::format("{}: {} = {} is out of range [{}, {}]", spec->mnemonic, f.name,
                                    instr.operands[i], f.min, f.max));
  }
  return instr;
}

std::string disassemble(const Instruction& instr) {
  const InstrSpec* spec = find_instr(instr.opcode);
  if (spec == nullptr) return fmt::format("<opcode 0x{:02x}>", static_cast<unsigned>(instr.opcode));
  std::string s(spec->mnemonic);
  if (const std::string f = flag_letters(*spec, instr.flags); !f.empty()) s += "." + f;
  // Trailing optional operands that are 0 are left out (InstrSpec::optional_operands).
  unsigned shown = spec->num_operands;
  while (shown + spec->optional_operands > spec->num_operands && instr.operands[shown - 1] == 0)
    --shown;
  for (unsigned i = 0; i < shown; ++i)
    s += fmt::format("{}{}", i == 0 ? " " : ", ", instr.operands[i]);
  return s;
}

const char* space_name(Space s) {
  switch (s) {
    case Space::HostMem: return "host memory";
    case Space::WeightMem: return "weight memory";
    case Space::UnifiedBuffer: return "unified buffer";
    case Space::Accumulators: return "accumulators";
  }
  return "?";
}

const char* space_unit(Space s) { return s == Space::WeightMem ? "tile" : "row"; }

void ConvGeometry::apply(const Instruction& in) {
  const auto& op = in.operands;
  switch (in.opcode) {
    case Opcode::CMAP:
      in_h = static_cast<std::uint32_t>(op[0]);
      in_w = static_cast<std::uint32_t>(op[1]);
      out_w = static_cast<std::uint32_t>(op[2]);
      break;
    case Opcode::CSTR:
      stride_y = static_cast<std::uint32_t>(op[0]);
      stride_x = static_cast<std::uint32_t>(op[1]);
      pad = static_cast<std::int8_t>(op[2]);
      break;
    case Opcode::CTAP:
      origin_y = static_cast<std::int32_t>(op[0]);
      origin_x = static_cast<std::int32_t>(op[1]);
      break;
    case Opcode::CWIN:
      win_h = static_cast<std::uint32_t>(op[0]);
      win_w = static_cast<std::uint32_t>(op[1]);
      break;
    case Opcode::VSRC:
      vec.b_row = static_cast<std::uint32_t>(op[0]);
      vec.broadcast = in.has(kFlagVsrcBroadcast);
      vec.za = static_cast<std::int8_t>(op[1]);
      vec.zb = static_cast<std::int8_t>(op[2]);
      break;
    case Opcode::VSCL:
      vec.da = static_cast<std::int16_t>(op[0]);
      vec.db = static_cast<std::int16_t>(op[1]);
      vec.op = static_cast<VecOperation>(op[2]);
      break;
    case Opcode::NGEO:
      norm.groups = static_cast<std::uint32_t>(op[0]);
      norm.stride = static_cast<std::uint32_t>(op[1]);
      norm.shift = static_cast<std::uint32_t>(op[2]);
      norm.width = static_cast<std::uint32_t>(op[3]);
      break;
    case Opcode::NCON:
      norm.k0 = static_cast<std::int32_t>(op[0]);
      norm.k1 = static_cast<std::int32_t>(op[1]);
      norm.k2 = static_cast<std::int32_t>(op[2]);
      break;
    default:
      break;
  }
}

std::int64_t ConvGeometry::input_row(std::uint64_t i, std::uint32_t dy, std::uint32_t dx) const {
  const auto oy = static_cast<std::int64_t>(i / out_w), ox = static_cast<std::int64_t>(i % out_w);
  const std::int64_t iy = origin_y + oy * stride_y + dy, ix = origin_x + ox * stride_x + dx;
  if (iy < 0 || iy >= in_h || ix < 0 || ix >= in_w) return -1;
  return iy * in_w + ix;
}

std::string check_with_array_n(const Instruction& in, std::uint64_t array_n, unsigned* operand) {
  unsigned at = 0;
  std::string why;
  if (in.opcode == Opcode::NGEO) {
    const auto groups = static_cast<std::uint64_t>(in.operands[0]);
    const auto width = static_cast<std::uint64_t>(in.operands[3]);
    at = 3;
    if (width > groups * array_n)
      why = fmt::format("width {} is more than a token's groups * N = {} * {} = {} values", width, groups,
                        array_n, groups * array_n);
  } else if (in.opcode == Opcode::HWT || in.opcode == Opcode::RWU) {
    at = in.opcode == Opcode::HWT ? 2 : 1;
    const auto rows = static_cast<std::uint64_t>(in.operands[at]);
    if (rows > array_n)
      why = fmt::format("{} of {} rows is more than a weight tile's N = {} rows", spec_of(in.opcode).mnemonic,
                        rows, array_n);
  }
  if (operand != nullptr) *operand = at;
  return why;
}

std::vector<Access> accesses(const Instruction& in, const ConvGeometry& geometry) {
  const auto u = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const auto& op = in.operands;
  switch (in.opcode) {
    case Opcode::RHM:
      return {{Space::HostMem, u(op[0]), u(op[2]), false, 0},
              {Space::UnifiedBuffer, u(op[1]), u(op[2]), true, 1}};
    case Opcode::WHM:
      if (in.has(kFlagWhmAcc))
        return {{Space::Accumulators, u(op[0]), u(op[2]), false, 0},
                {Space::HostMem, u(op[1]), u(op[2]) * kHostRowsPerAccRow, true, 1}};
      return {{Space::UnifiedBuffer, u(op[0]), u(op[2]), false, 0},
              {Space::HostMem, u(op[1]), u(op[2]), true, 1}};
    case Opcode::RW:
      return {{Space::WeightMem, u(op[0]), 1, false, 0}};
    case Opcode::HWT:
      return {{Space::HostMem, u(op[0]), u(op[2]), false, 0}, {Space::WeightMem, u(op[1]), 1, true, 1}};
    case Opcode::RWU:
      return {{Space::UnifiedBuffer, u(op[0]), u(op[1]), false, 0}};
    case Opcode::MMC:
      return {{Space::UnifiedBuffer, u(op[0]), in.has(kFlagMmcConvolve) ? geometry.map_rows() : u(op[2]),
               false, 0},
              {Space::Accumulators, u(op[1]), u(op[2]), true, 1}};
    case Opcode::ACT:
      return {{Space::Accumulators, u(op[0]), u(op[2]), false, 0},
              {Space::UnifiedBuffer, u(op[1]), u(op[2]), true, 1}};
    case Opcode::POOL:
      return {{Space::UnifiedBuffer, u(op[0]), geometry.map_rows(), false, 0},
              {Space::UnifiedBuffer, u(op[1]), u(op[2]), true, 1}};
    case Opcode::VEC:
      return {{Space::UnifiedBuffer, u(op[0]), u(op[2]), false, 0},
              {Space::UnifiedBuffer, geometry.vec.b_row, geometry.vec.broadcast ? 1 : u(op[2]),
               false, 0},
              {Space::UnifiedBuffer, u(op[1]), u(op[2]), true, 1}};
    case Opcode::SMAX:
    case Opcode::LNRM: {
      const std::uint64_t span = geometry.norm.span(u(op[2]));
      return {{Space::UnifiedBuffer, u(op[0]), span, false, 0},
              {Space::UnifiedBuffer, u(op[1]), span, true, 1}};
    }
    case Opcode::GELU:
      return {{Space::UnifiedBuffer, u(op[0]), u(op[2]), false, 0},
              {Space::UnifiedBuffer, u(op[1]), u(op[2]), true, 1}};
    case Opcode::NOP:
    case Opcode::SETQ:
    case Opcode::CMAP:
    case Opcode::CSTR:
    case Opcode::CTAP:
    case Opcode::CWIN:
    case Opcode::VSRC:
    case Opcode::VSCL:
    case Opcode::NGEO:
    case Opcode::NCON:
    case Opcode::SYNC:
    case Opcode::HLT:
      return {};
  }
  return {};
}

}  // namespace tpu::isa
