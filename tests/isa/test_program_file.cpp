// The program file: a 16-byte little-endian header ("TPUP", version u16 at 4,
// array size N u16 at 6, instruction count u32 at 8, zeros at 12..15), then
// 16 bytes per instruction. Files are built here byte by byte.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "isa/program.h"

#include "support/print_instruction.h"

namespace {

using Bytes = std::vector<std::uint8_t>;
using Catch::Matchers::Contains;
using tpu::isa::DecodeError;
using tpu::isa::Instruction;
using tpu::isa::Opcode;
using tpu::isa::parse_program;
using tpu::isa::Program;
using tpu::isa::serialize;

void put_le(Bytes& out, std::uint64_t v, unsigned bytes) {
  for (unsigned i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

struct Header {
  std::string magic = "TPUP";
  std::uint64_t version = 1;
  std::uint64_t array_n = 8;
  std::uint64_t count = 0;
  std::uint64_t reserved = 0;
};

Bytes header_bytes(const Header& h) {
  Bytes out(h.magic.begin(), h.magic.end());
  put_le(out, h.version, 2);
  put_le(out, h.array_n, 2);
  put_le(out, h.count, 4);
  put_le(out, h.reserved, 4);
  return out;
}

// Encodings written out by hand (see test_encoding.cpp for the layout).
Bytes hlt_bytes() { return {0x0F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; }
Bytes rw_bytes(std::uint8_t tile) { return {0x03, 0, tile, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; }

// A file with a correct header for `body`, unless `h` says otherwise.
Bytes file_of(const std::vector<Bytes>& body, Header h = {}) {
  Bytes out = header_bytes(h);
  for (const Bytes& instr : body) out.insert(out.end(), instr.begin(), instr.end());
  return out;
}

Bytes valid_file(std::uint64_t array_n, const std::vector<Bytes>& body) {
  Header h;
  h.array_n = array_n;
  h.count = body.size();
  return file_of(body, h);
}

// The one-line reason parse_program gives, or a marker when it accepts the file.
std::string parse_error(const Bytes& bytes) {
  try {
    parse_program(bytes);
  } catch (const DecodeError& e) {
    const std::string msg = e.what();
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
  }
  return "<accepted>";
}

Instruction make(Opcode op, std::uint8_t flags, std::int64_t a = 0, std::int64_t b = 0,
                 std::int64_t c = 0) {
  Instruction in;
  in.opcode = op;
  in.flags = flags;
  in.operands = {a, b, c};
  return in;
}

// A file in the system temporary folder, removed at the end of the test.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& name, const Bytes& contents)
      : path(std::filesystem::temp_directory_path() /
             ("tpu_test_" + std::to_string(::getpid()) + "_" + name)) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(contents.data()),
              static_cast<std::streamsize>(contents.size()));
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

}  // namespace

TEST_CASE("serialize writes the documented 16-byte header", "[isa][program]") {
  Program p;
  p.array_n = 256;
  p.code.assign(258, make(Opcode::NOP, 0));
  const Bytes file = serialize(p);
  const Bytes expected_header = {'T', 'P', 'U', 'P', 1, 0, 0x00, 0x01, 0x02, 0x01, 0, 0, 0, 0, 0, 0};
  REQUIRE(file.size() == 16 + 258 * 16);
  CHECK(Bytes(file.begin(), file.begin() + 16) == expected_header);
}

TEST_CASE("serialize appends each instruction's 16 bytes in program order", "[isa][program]") {
  Program p;
  p.array_n = 4;
  p.code = {make(Opcode::RW, 0, 7), make(Opcode::HLT, 0)};
  CHECK(serialize(p) == valid_file(4, {rw_bytes(7), hlt_bytes()}));
}

TEST_CASE("serialize rejects a bad array size or an invalid instruction", "[isa][program]") {
  Program p;
  p.code = {make(Opcode::HLT, 0)};
  for (unsigned n : {0u, 3u, 257u}) {
    p.array_n = n;
    INFO("N = " << n);
    CHECK_THROWS_AS(serialize(p), std::invalid_argument);
  }
  p.array_n = 8;
  p.code = {make(Opcode::RHM, 0, 0, 0, 0)};  // rows = 0
  CHECK_THROWS_AS(serialize(p), std::invalid_argument);
}

TEST_CASE("parse_program reads back what serialize wrote", "[isa][program]") {
  for (unsigned n : {4u, 8u, 256u}) {
    Program p;
    p.array_n = n;
    p.code = {make(Opcode::RHM, 0, 4294967295, 16777215, 1),
              make(Opcode::WHM, 0x01, 3, 4, 5),
              make(Opcode::RW, 0, 9),
              make(Opcode::MMC, 0x03, 0, 1, 16777215),
              make(Opcode::SETQ, 0, -2147483648, 62, -128),
              make(Opcode::ACT, 0x04, 1, 2, 3),
              make(Opcode::SYNC, 0),
              make(Opcode::HLT, 0)};
    INFO("N = " << n);
    const Program back = parse_program(serialize(p));
    CHECK(back.array_n == n);
    CHECK(back.code == p.code);
  }
}

TEST_CASE("parse_program accepts array sizes 4 and 256 and an empty program", "[isa][program]") {
  CHECK(parse_program(valid_file(4, {hlt_bytes()})).array_n == 4);
  CHECK(parse_program(valid_file(256, {hlt_bytes()})).array_n == 256);
  const Program empty = parse_program(valid_file(8, {}));
  CHECK(empty.array_n == 8);
  CHECK(empty.code.empty());
}

TEST_CASE("parse_program decodes the instructions of a hand-built file", "[isa][program]") {
  const Program p = parse_program(valid_file(16, {rw_bytes(200), hlt_bytes()}));
  CHECK(p.array_n == 16);
  CHECK(p.code == std::vector<Instruction>{make(Opcode::RW, 0, 200), make(Opcode::HLT, 0)});
}

TEST_CASE("parse_program rejects an empty file", "[isa][program]") {
  CHECK_THAT(parse_error({}), Contains("truncated header"));
}

TEST_CASE("parse_program rejects a truncated header", "[isa][program]") {
  Bytes file = valid_file(8, {});
  file.pop_back();
  CHECK_THAT(parse_error(file), Contains("truncated header"));
  CHECK_THAT(parse_error({'T', 'P', 'U', 'P'}), Contains("truncated header"));
}

TEST_CASE("parse_program rejects a bad magic", "[isa][program]") {
  for (const char* magic : {"TPUQ", "tpup", "PUPT", "\0\0\0\0"}) {
    Header h;
    h.magic.assign(magic, 4);
    h.count = 1;
    INFO("magic " << h.magic);
    CHECK_THAT(parse_error(file_of({hlt_bytes()}, h)), Contains("bad magic"));
  }
}

TEST_CASE("parse_program rejects a format version other than 1", "[isa][program]") {
  for (std::uint64_t version : {0, 2, 0x100, 0xFFFF}) {
    Header h;
    h.version = version;
    h.count = 1;
    INFO("version " << version);
    CHECK_THAT(parse_error(file_of({hlt_bytes()}, h)), Contains("version"));
  }
}

TEST_CASE("parse_program rejects an array size outside 4..256", "[isa][program]") {
  for (std::uint64_t n : {0, 3, 257, 0xFFFF}) {
    INFO("N = " << n);
    CHECK_THAT(parse_error(valid_file(n, {hlt_bytes()})), Contains("array size"));
  }
}

TEST_CASE("parse_program rejects nonzero reserved header bytes", "[isa][program]") {
  for (unsigned byte = 12; byte < 16; ++byte) {
    Bytes file = valid_file(8, {hlt_bytes()});
    file[byte] = 0x80;
    INFO("byte " << byte);
    CHECK_THAT(parse_error(file), Contains("reserved header bytes"));
  }
}

TEST_CASE("parse_program rejects a body shorter than the count", "[isa][program]") {
  Header h;
  h.count = 2;
  CHECK_THAT(parse_error(file_of({hlt_bytes()}, h)), Contains("truncated"));
  Bytes file = valid_file(8, {hlt_bytes()});
  file.pop_back();
  CHECK_THAT(parse_error(file), Contains("truncated"));
}

TEST_CASE("parse_program rejects bytes after the last instruction", "[isa][program]") {
  Header h;
  h.count = 1;
  CHECK_THAT(parse_error(file_of({hlt_bytes(), hlt_bytes()}, h)), Contains("trailing bytes"));
  Bytes file = valid_file(8, {hlt_bytes()});
  file.push_back(0);
  CHECK_THAT(parse_error(file), Contains("trailing bytes"));
}

TEST_CASE("parse_program names the pc of an invalid instruction", "[isa][program]") {
  Bytes bad = hlt_bytes();
  bad[0] = 0x18;  // not an opcode
  const std::string msg = parse_error(valid_file(8, {hlt_bytes(), rw_bytes(1), bad}));
  CHECK_THAT(msg, Contains("pc 2") && Contains("unknown opcode 0x18"));
}

TEST_CASE("parse_program's counts agree in number", "[isa][program][plural]") {
  CHECK(parse_error({'T'}) == "truncated header: 1 byte, a program starts with 16");
  CHECK(parse_error({'T', 'P'}) == "truncated header: 2 bytes, a program starts with 16");
  CHECK(parse_error({}) == "truncated header: 0 bytes, a program starts with 16");
  Header one;
  one.count = 1;
  CHECK(parse_error(file_of({}, one)) ==
        "truncated: header says 1 instruction (32 bytes) but the file has 16 bytes");
  Bytes trailing = valid_file(8, {hlt_bytes()});
  trailing.push_back(0);
  CHECK(parse_error(trailing) ==
        "trailing bytes: header says 1 instruction (32 bytes) but the file has 33 bytes");
  Header none;
  none.count = 0;
  CHECK(parse_error(file_of({hlt_bytes()}, none)) ==
        "trailing bytes: header says 0 instructions (16 bytes) but the file has 32 bytes");
}

TEST_CASE("parse_program's messages are the documented ones", "[isa][program]") {
  // docs/isa.md section 5, one example per problem.
  CHECK(parse_error({'T', 'P', 'U', 'P', 1}) ==
        "truncated header: 5 bytes, a program starts with 16");
  Header magic;
  magic.magic = "TPUX";
  CHECK(parse_error(file_of({}, magic)) == "bad magic: not a tpu-sim program (expected \"TPUP\")");
  Header version;
  version.version = 2;
  CHECK(parse_error(file_of({}, version)) ==
        "unsupported format version 2 (this build reads version 1)");
  CHECK(parse_error(valid_file(2, {})) == "array size 2 in header is outside [4, 256]");
  Header reserved;
  reserved.reserved = 1;
  CHECK(parse_error(file_of({}, reserved)) == "reserved header bytes are not zero");
  Header two;
  two.count = 2;
  CHECK(parse_error(file_of({hlt_bytes()}, two)) ==
        "truncated: header says 2 instructions (48 bytes) but the file has 32 bytes");
  Bytes trailing = valid_file(8, {hlt_bytes(), hlt_bytes()});
  trailing.push_back(0);
  CHECK(parse_error(trailing) ==
        "trailing bytes: header says 2 instructions (48 bytes) but the file has 49 bytes");
  Bytes reserved_bit = hlt_bytes();  // HLT has no operand in slot 3
  reserved_bit[15] = 0x80;
  CHECK(parse_error(valid_file(8, {rw_bytes(0), reserved_bit})) ==
        "pc 1: HLT: unused bits of operand slot 3 are not zero");
}

TEST_CASE("the documented example header is what serialize writes", "[isa][program]") {
  // docs/isa.md section 5: a 6-instruction program for N = 8.
  Program p;
  p.array_n = 8;
  p.code.assign(6, make(Opcode::HLT, 0));
  const Bytes file = serialize(p);
  CHECK(Bytes(file.begin(), file.begin() + 16) ==
        Bytes{0x54, 0x50, 0x55, 0x50, 0x01, 0x00, 0x08, 0x00, 0x06, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("load_program names the path in its errors", "[isa][program]") {
  const TempFile bad("load_bad.tpu", {'X', 'Y'});
  CHECK_THROWS_WITH(tpu::isa::load_program(bad.path.string()),
                    Contains(bad.path.string()) && Contains("truncated header"));
  const TempFile good("load_good.tpu", valid_file(8, {hlt_bytes()}));
  CHECK(tpu::isa::load_program(good.path.string()).code.size() == 1);
  CHECK_THROWS_WITH(tpu::isa::load_program(good.path.string() + ".missing"),
                    Contains(good.path.string() + ".missing: cannot open"));
  CHECK_THROWS_WITH(tpu::isa::load_program(good.path.parent_path().string()),
                    Contains("is a directory"));
  CHECK_THROWS_AS(tpu::isa::load_program(good.path.string() + ".missing"), tpu::FileError);
}
