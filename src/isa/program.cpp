#include "isa/program.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/file_io.h"
#include "common/plural.h"

namespace tpu::isa {
namespace {

void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint64_t get_le(const std::vector<std::uint8_t>& in, std::size_t at, unsigned bytes) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i) v |= std::uint64_t{in[at + i]} << (8 * i);
  return v;
}

}  // namespace

std::vector<std::uint8_t> serialize(const Program& prog) {
  if (prog.array_n < kMinArrayN || prog.array_n > kMaxArrayN)
    throw std::invalid_argument(fmt::format("array size {} is outside [{}, {}]", prog.array_n,
                                            kMinArrayN, kMaxArrayN));
  std::vector<std::uint8_t> out(kMagic.begin(), kMagic.end());
  put_le(out, kFormatVersion, 2);
  put_le(out, prog.array_n, 2);
  put_le(out, prog.code.size(), 4);
  put_le(out, 0, 4);
  for (const Instruction& in : prog.code) {
    const EncodedInstr e = encode(in);
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

Program parse_program(const std::vector<std::uint8_t>& bytes) {
  if (bytes.size() < kHeaderBytes)
    throw DecodeError(fmt::format("truncated header: {}, a program starts with {}",
                                  plural(bytes.size(), "byte"), kHeaderBytes));
  if (!std::equal(kMagic.begin(), kMagic.end(), bytes.begin()))
    throw DecodeError("bad magic: not a tpu-sim program (expected \"TPUP\")");
  const auto version = get_le(bytes, 4, 2);
  if (version != kFormatVersion)
    throw DecodeError(fmt::format("unsupported format version {} (this build reads version {})",
                                  version, kFormatVersion));
  Program prog;
  prog.array_n = static_cast<unsigned>(get_le(bytes, 6, 2));
  if (prog.array_n < kMinArrayN || prog.array_n > kMaxArrayN)
    throw DecodeError(fmt::format("array size {} in header is outside [{}, {}]", prog.array_n,
                                  kMinArrayN, kMaxArrayN));
  const std::uint64_t count = get_le(bytes, 8, 4);
  if (get_le(bytes, 12, 4) != 0) throw DecodeError("reserved header bytes are not zero");
  const std::uint64_t expect = kHeaderBytes + count * kInstrBytes;
  if (bytes.size() != expect)
    throw DecodeError(fmt::format(
        "{}: header says {} ({} bytes) but the file has {} bytes",
        bytes.size() < expect ? "truncated" : "trailing bytes", plural(count, "instruction"),
        expect, bytes.size()));
  prog.code.reserve(count);
  for (std::uint64_t pc = 0; pc < count; ++pc) {
    EncodedInstr e;
    std::copy_n(bytes.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + pc * kInstrBytes),
                kInstrBytes, e.begin());
    try {
      prog.code.push_back(decode(e));
    } catch (const DecodeError& err) {
      throw DecodeError(fmt::format("pc {}: {}", pc, err.what()));
    }
    // NGEO's width, HWT's and RWU's rows within what the header's N allows (as the assembler
    // checks), so that every program file disassembles to text that assembles again.
    if (const std::string why = check_with_array_n(prog.code.back(), prog.array_n); !why.empty())
      throw DecodeError(fmt::format("pc {}: {}", pc, why));
  }
  return prog;
}

Program load_program(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path);
  try {
    return parse_program(bytes);
  } catch (const DecodeError& err) {
    throw DecodeError(fmt::format("{}: {}", path, err.what()));
  }
}

}  // namespace tpu::isa
