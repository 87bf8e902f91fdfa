#include "isa/isa.h"

#include <cctype>

namespace tpu::isa {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// The table is the source of truth; these checks keep it self-consistent.
constexpr bool table_is_consistent() {
  for (unsigned i = 0; i < kFields.size(); ++i) {
    const FieldSpec& f = kFields[i];
    if (static_cast<unsigned>(f.field) != i) return false;
    if (f.width == 0 || f.width > kSlotBits) return false;
    const std::int64_t lo = f.is_signed ? -(std::int64_t{1} << (f.width - 1)) : 0;
    const std::int64_t hi = f.is_signed ? (std::int64_t{1} << (f.width - 1)) - 1
                                        : (std::int64_t{1} << f.width) - 1;
    if (f.min < lo || f.max > hi || f.min > f.max) return false;
  }
  for (const InstrSpec& s : kInstrs) {
    if (s.num_operands > kNumSlots || s.num_flags > s.flags.size()) return false;
    if (s.optional_operands > s.num_operands) return false;
    for (unsigned k = 0; k < s.num_operands; ++k) {
      const FieldSpec& f = kFields[static_cast<unsigned>(s.operands[k])];
      if (f.width > slot_bits(k)) return false;
      // An operand left out is 0, which its field must accept.
      if (k + s.optional_operands >= s.num_operands && (f.min > 0 || f.max < 0)) return false;
    }
    std::uint8_t seen = 0;
    for (unsigned k = 0; k < s.num_flags; ++k) {
      const std::uint8_t m = static_cast<std::uint8_t>(1u << s.flags[k].bit);
      if (s.flags[k].bit >= kFlagsBits || (seen & m) || s.flags[k].letter < 'A' ||
          s.flags[k].letter > 'Z')
        return false;
      seen |= m;
    }
    if ((s.exclusive_flags & ~seen) != 0) return false;
    for (const InstrSpec& t : kInstrs)
      if (&s != &t && (s.opcode == t.opcode || s.mnemonic == t.mnemonic)) return false;
  }
  return slot_lsb(kNumSlots - 1) + kLastSlotBits == kInstrBits && kLastSlotBits > 0;
}
static_assert(table_is_consistent(), "instruction table is inconsistent");

}  // namespace

const InstrSpec* find_instr(Opcode op) { return find_instr(static_cast<std::uint8_t>(op)); }

const InstrSpec* find_instr(std::uint8_t opcode_byte) {
  for (const InstrSpec& s : kInstrs)
    if (static_cast<std::uint8_t>(s.opcode) == opcode_byte) return &s;
  return nullptr;
}

const InstrSpec* find_instr(std::string_view mnemonic) {
  for (const InstrSpec& s : kInstrs)
    if (iequals(s.mnemonic, mnemonic)) return &s;
  return nullptr;
}

const InstrSpec& spec_of(Opcode op) { return *find_instr(op); }

std::optional<std::uint8_t> flag_bit(const InstrSpec& spec, char letter) {
  const char up = static_cast<char>(std::toupper(static_cast<unsigned char>(letter)));
  for (unsigned k = 0; k < spec.num_flags; ++k)
    if (spec.flags[k].letter == up) return spec.flags[k].bit;
  return std::nullopt;
}

std::uint8_t valid_flag_mask(const InstrSpec& spec) {
  std::uint8_t m = 0;
  for (unsigned k = 0; k < spec.num_flags; ++k) m |= static_cast<std::uint8_t>(1u << spec.flags[k].bit);
  return m;
}

}  // namespace tpu::isa
