// NumPy .npy files (common/npy.h). Expected bytes and messages are written out
// by hand from the format spec; files made and checked by real NumPy come from
// make_npy_fixtures.py, run with Debian's /usr/bin/python3 (python3-numpy).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "common/file_io.h"
#include "common/npy.h"
#include "support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using tpu::Dtype;
using tpu::FileError;
using tpu::NpyArray;
using tpu::read_npy;
using tpu::write_npy;
using Shape = std::vector<std::size_t>;

const std::string kFixtureScript = TPU_SOURCE_DIR "/tests/common/make_npy_fixtures.py";

// A fresh folder per test (tests/support/temp_dir.h).
struct TempDir : tpu::test::TempDir {
  TempDir() : tpu::test::TempDir("tpu-npy-test") {}
};

// Element i of every test array, the same formula as make_npy_fixtures.py: integers
// use every byte of their type, floats are exact binary fractions.
template <typename T>
T value(std::size_t i) {
  const auto ubase = static_cast<std::int64_t>((i * 37 + 11) % 256);
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(ubase - 128) * static_cast<T>(sizeof(T) == 4 ? 0.5 : 0.25);
  } else if constexpr (std::is_unsigned_v<T>) {
    std::uint64_t scale = 0;  // 0x01...01
    for (std::size_t b = 0; b < sizeof(T); ++b) scale = scale << 8 | 1;
    return static_cast<T>(static_cast<std::uint64_t>(ubase) * scale);
  } else {
    const std::int64_t scale = sizeof(T) == 1 ? 1 : sizeof(T) == 2 ? 255 : sizeof(T) == 4 ? 8388609 : (1LL << 55) + 1;
    return static_cast<T>((ubase - 128) * scale);
  }
}

template <typename T>
std::vector<T> values(std::size_t n) {
  std::vector<T> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(value<T>(i));
  return out;
}

std::size_t count(const Shape& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

// Calls f(T{}) for every element type that has a Dtype.
template <typename F>
void for_each_type(F f) {
  f(std::int8_t{});
  f(std::uint8_t{});
  f(std::int16_t{});
  f(std::uint16_t{});
  f(std::int32_t{});
  f(std::uint32_t{});
  f(std::int64_t{});
  f(std::uint64_t{});
  f(float{});
  f(double{});
}

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string contents(const std::string& path) {
  const std::vector<std::uint8_t> bytes = tpu::read_file_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

// A .npy image: magic, version major.0, little-endian header length (2 bytes for
// version 1, else 4), the dict text padded with spaces and a newline so the data
// starts at a multiple of 64 (unless pad is false), then the data.
std::string image(std::string dict, const std::string& data = "", int major = 1, bool pad = true) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  if (pad) dict = dict + std::string((64 - (prefix + dict.size() + 1) % 64) % 64, ' ') + "\n";
  std::string out = std::string("\x93NUMPY") + static_cast<char>(major) + '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>(dict.size() >> (8 * i) & 0xff);
  return out + dict + data;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

// The message read_npy throws for `bytes` written to a file, checked to be one
// line that starts with the path; returns the rest after "PATH: ".
std::string error_for(const TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("bad.npy");
  put(path, bytes);
  try {
    read_npy(path);
  } catch (const FileError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find('\n') == std::string::npos);
    REQUIRE(message.rfind(path + ": ", 0) == 0);
    return message.substr(path.size() + 2);
  }
  return "(no error)";
}

// Runs make_npy_fixtures.py MODE DIR; returns its exit status and output.
std::pair<int, std::string> run_fixture_script(const std::string& mode, const TempDir& dir) {
  const std::string command = "/usr/bin/python3 '" + kFixtureScript + "' " + mode + " '" + dir.path().string() + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

const std::vector<Shape> kShapes = {{}, {5}, {0}, {2, 3}, {0, 3}, {2, 3, 4}, {2, 0, 4}};

}  // namespace

TEST_CASE("npy: write then read round-trips every dtype at ranks 0 to 3", "[npy]") {
  TempDir dir;
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    for (const Shape& shape : kShapes) {
      INFO(tpu::dtype_name(tpu::dtype_of<T>()) << " " << tpu::format_shape(shape));
      const NpyArray written = NpyArray::of(shape, values<T>(count(shape)));
      const std::string path = dir.file("a.npy");
      write_npy(path, written);
      const NpyArray got = read_npy(path);
      CHECK(got.dtype == tpu::dtype_of<T>());
      CHECK(got.shape == shape);
      CHECK(got.data == written.data);
      CHECK(got.data.size() == count(shape) * sizeof(T));
      CHECK(got.values<T>() == values<T>(count(shape)));
      CHECK(got.source == path);
    }
  });
}

TEST_CASE("npy: the writer's header matches the spec byte for byte", "[npy]") {
  TempDir dir;
  const std::string path = dir.file("h.npy");

  SECTION("2-D int32: 59-character dict, 58 spaces of padding, data at 128") {
    write_npy(path, NpyArray::of<std::int32_t>({2, 3}, {1, -1, 256, 0x01020304, 0, -2}));
    const std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +  // header length 118
                                 "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') +
                                 "\n" +
                                 std::string("\x01\x00\x00\x00" "\xff\xff\xff\xff" "\x00\x01\x00\x00"
                                             "\x04\x03\x02\x01" "\x00\x00\x00\x00" "\xfe\xff\xff\xff", 24);
    CHECK(contents(path) == expected);
  }
  SECTION("1-D uint8 uses the trailing-comma form (5,): 57-character dict, 60 spaces") {
    write_npy(path, NpyArray::of<std::uint8_t>({5}, {0, 1, 127, 128, 255}));
    const std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                 "{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }" + std::string(60, ' ') +
                                 "\n" + std::string("\x00\x01\x7f\x80\xff", 5);
    CHECK(contents(path) == expected);
  }
  SECTION("a 117-character dict needs no padding: 10 + 117 + newline = 128") {
    Shape shape(21, 1);
    shape[0] = 10;
    write_npy(path, NpyArray::of<std::int8_t>(shape, values<std::int8_t>(10)));
    const std::string expected =
        std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
        "{'descr': '|i1', 'fortran_order': False, 'shape': "
        "(10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), }\n" +
        std::string("\x8b\xb0\xd5\xfa\x1f\x44\x69\x8e\xb3\xd8", 10);  // (i * 37 + 11) % 256 - 128
    CHECK(contents(path) == expected);
  }
}

TEST_CASE("npy: reads the files NumPy writes", "[npy]") {
  TempDir dir;
  const auto [status, output] = run_fixture_script("make", dir);
  INFO("make_npy_fixtures.py make said:\n" << output);
  REQUIRE(status == 0);

  for_each_type([&](auto tag) {
    using T = decltype(tag);
    const std::string name(tpu::dtype_name(tpu::dtype_of<T>()));
    INFO(name);
    const NpyArray a = read_npy(dir.file(name + ".npy"));
    CHECK(a.dtype == tpu::dtype_of<T>());
    CHECK(a.shape == Shape{2, 3, 4});
    CHECK(a.values<T>() == values<T>(24));
  });
  SECTION("Fortran-order arrays come back in C order") {
    const NpyArray a = read_npy(dir.file("fortran_int32.npy"));
    CHECK(a.shape == Shape{3, 4, 5});
    CHECK(a.values<std::int32_t>() == values<std::int32_t>(60));
    const NpyArray b = read_npy(dir.file("fortran_int8.npy"));
    CHECK(tpu::expect_int8(b, 2, "host memory") == values<std::int8_t>(35));
  }
  SECTION("format versions 2.0 and 3.0") {
    const NpyArray v2 = read_npy(dir.file("v2.npy"));
    CHECK(v2.shape == Shape{4, 8});
    CHECK(v2.values<std::int8_t>() == values<std::int8_t>(32));
    const NpyArray v3 = read_npy(dir.file("v3.npy"));
    CHECK(v3.shape == Shape{3});
    CHECK(v3.values<std::int16_t>() == values<std::int16_t>(3));
  }
  SECTION("0-D, empty and 1-D arrays") {
    const NpyArray scalar = read_npy(dir.file("scalar.npy"));
    CHECK(scalar.shape.empty());
    CHECK(scalar.values<std::int32_t>() == values<std::int32_t>(1));
    const NpyArray empty = read_npy(dir.file("empty.npy"));
    CHECK(empty.shape == Shape{0, 5});
    CHECK(empty.data.empty());
    const NpyArray one_d = read_npy(dir.file("one_d.npy"));
    CHECK(one_d.shape == Shape{5});
    CHECK(one_d.values<std::int32_t>() == values<std::int32_t>(5));
  }
  SECTION("unsupported dtypes from NumPy are rejected by name") {
    const auto message = [&](const std::string& name) {
      try {
        read_npy(dir.file(name));
      } catch (const FileError& e) {
        return std::string(e.what());
      }
      return std::string("(no error)");
    };
    CHECK(message("big_endian.npy") ==
          dir.file("big_endian.npy") + ": big-endian dtype '>i4' is not supported (save it as '<i4')");
    CHECK(message("object.npy") == dir.file("object.npy") + ": object arrays ('|O') are not supported");
    CHECK(message("structured.npy") == dir.file("structured.npy") + ": structured dtypes are not supported");
    CHECK(message("complex.npy") ==
          dir.file("complex.npy") +
              ": unsupported dtype '<c8' (supported: |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 <f4 <f8)");
  }
}

TEST_CASE("npy: NumPy reads the files written here", "[npy]") {
  TempDir dir;
  int files = 0;
  for_each_type([&](auto tag) {
    using T = decltype(tag);
    for (const Shape& shape : {Shape{}, Shape{5}, Shape{0, 3}, Shape{2, 3, 4}}) {
      std::string dims;
      for (std::size_t d : shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
      write_npy(dir.file(std::string(tpu::dtype_name(tpu::dtype_of<T>())) + "__" + dims + ".npy"),
                NpyArray::of(shape, values<T>(count(shape))));
      ++files;
    }
  });
  const auto [status, output] = run_fixture_script("check", dir);
  INFO("make_npy_fixtures.py check said:\n" << output);
  CHECK(status == 0);
  CHECK(output.find("checked " + std::to_string(files) + " files, 0 problems") != std::string::npos);
}

TEST_CASE("npy: hand-made headers within the spec are accepted", "[npy]") {
  TempDir dir;
  const std::string path = dir.file("ok.npy");
  const std::string six = std::string("\x00\x01\x02\x03\x04\x05", 6);
  const auto read = [&](const std::string& bytes) {
    put(path, bytes);
    return read_npy(path);
  };
  SECTION("old 16-byte alignment, unpadded and unaligned headers") {
    // 10 + 69 + newline = 80, a multiple of 16 only.
    const std::string aligned16 = dict("|u1", "(2, 3)") + std::string(10, ' ') + "\n";
    CHECK(read(image(aligned16, six, 1, false)).data == std::vector<std::uint8_t>{0, 1, 2, 3, 4, 5});
    CHECK(read(image(dict("|u1", "(6,)"), six, 1, false)).shape == Shape{6});
  }
  SECTION("double quotes, any key order, no trailing comma, other whitespace") {
    const NpyArray a = read(image("{\"shape\":(3,2),\t\"fortran_order\" :False,\r\n'descr':\"|u1\"}", six));
    CHECK(a.shape == Shape{3, 2});
    CHECK(a.data == std::vector<std::uint8_t>{0, 1, 2, 3, 4, 5});
  }
  SECTION("byte-order prefixes that mean little-endian here") {
    for (const std::string descr : {"<i4", "=i4", "i4", "|i4"})
      CHECK(read(image(dict(descr, "()"), std::string("\x07\x00\x00\x00", 4))).values<std::int32_t>() ==
            std::vector<std::int32_t>{7});
    CHECK(read(image(dict(">i1", "(1,)"), "\xff")).values<std::int8_t>() == std::vector<std::int8_t>{-1});
  }
  SECTION("Fortran order, transposed by hand") {
    // Column-major (2, 3): column 0 is 0 3, column 1 is 1 4, column 2 is 2 5.
    const NpyArray a = read(image(dict("|u1", "(2, 3)", "True"), std::string("\x00\x03\x01\x04\x02\x05", 6)));
    CHECK(a.data == std::vector<std::uint8_t>{0, 1, 2, 3, 4, 5});
    // (2, 2, 2): element (i, j, k) is at 4i + 2j + k in C order and i + 2j + 4k in Fortran order.
    const NpyArray b = read(image(dict("|u1", "(2, 2, 2)", "True"), std::string("\x00\x04\x02\x06\x01\x05\x03\x07", 8)));
    CHECK(b.data == std::vector<std::uint8_t>{0, 1, 2, 3, 4, 5, 6, 7});
  }
  SECTION("versions 2.0 and 3.0 with a 4-byte header length") {
    CHECK(read(image(dict("|u1", "(2, 3)"), six, 2)).shape == Shape{2, 3});
    CHECK(read(image(dict("|u1", "(6,)"), six, 3)).shape == Shape{6});
  }
  SECTION("a zero dimension makes any other dimensions empty, without overflow") {
    CHECK(read(image(dict("<i8", "(4294967296, 4294967296, 0)"))).shape == Shape{4294967296, 4294967296, 0});
  }
}

TEST_CASE("npy: a missing or unreadable file is a one-line error", "[npy]") {
  TempDir dir;
  const std::string missing = dir.file("none.npy");
  CHECK_THROWS_WITH(read_npy(missing), missing + ": cannot open: No such file or directory");
  CHECK_THROWS_WITH(read_npy(dir.path().string()), dir.path().string() + ": is a directory");
}

TEST_CASE("npy: empty files, bad magic and truncated preambles", "[npy]") {
  TempDir dir;
  CHECK(error_for(dir, "") == "empty file, not a .npy file");
  CHECK(error_for(dir, "\x93NUMPX\x01\x00\x00\x00") == "not a .npy file (bad magic)");
  CHECK(error_for(dir, "PK\x03\x04 an .npz archive") == "not a .npy file (bad magic)");
  CHECK(error_for(dir, "\x93NU") == "not a .npy file (bad magic)");
  CHECK(error_for(dir, "\x93NUMPY\x01") == "truncated .npy file (ends inside the version)");
  CHECK(error_for(dir, std::string("\x93NUMPY\x01\x00\x05", 9)) == "truncated .npy file (ends inside the header length)");
  CHECK(error_for(dir, std::string("\x93NUMPY\x02\x00\x05\x00\x00", 11)) ==
        "truncated .npy file (ends inside the header length)");
}

TEST_CASE("npy: unsupported format versions", "[npy]") {
  TempDir dir;
  const std::string body = image(dict("|u1", "(1,)"), "x").substr(8);
  CHECK(error_for(dir, std::string("\x93NUMPY\x04\x00", 8) + body) ==
        "unsupported .npy format version 4.0 (supported: 1.0, 2.0, 3.0)");
  CHECK(error_for(dir, std::string("\x93NUMPY\x00\x00", 8) + body) ==
        "unsupported .npy format version 0.0 (supported: 1.0, 2.0, 3.0)");
  CHECK(error_for(dir, std::string("\x93NUMPY\x01\x01", 8) + body) ==
        "unsupported .npy format version 1.1 (supported: 1.0, 2.0, 3.0)");
}

TEST_CASE("npy: a header length past the end of the file", "[npy]") {
  TempDir dir;
  // 10 bytes of preamble, then 20 of header text.
  CHECK(error_for(dir, std::string("\x93NUMPY\x01\x00\xf4\x01", 10) + std::string(20, ' ')) ==
        "header length 500 runs past the end of the file (30 bytes)");
  CHECK(error_for(dir, std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12) + "{}") ==
        "header length 4294967295 runs past the end of the file (14 bytes)");
  CHECK(error_for(dir, std::string("\x93NUMPY\x01\x00\x01\x00", 10)) ==
        "header length 1 runs past the end of the file (10 bytes)");
}

TEST_CASE("npy: a header that is not a dict literal", "[npy]") {
  TempDir dir;
  CHECK(error_for(dir, image("[1, 2]")) == "bad .npy header: not a Python dict (starts with '[')");
  CHECK(error_for(dir, image("", "", 1, false)) == "bad .npy header: empty");
  CHECK(error_for(dir, image("")) == "bad .npy header: empty");
  CHECK(error_for(dir, image(std::string("\0{}", 3))) == "bad .npy header: not a Python dict (starts with '\\x00')");
  CHECK(error_for(dir, image(dict("|u1", "(1,)") + " extra", "x")) == "bad .npy header: unexpected 'e' after the dict");
  CHECK(error_for(dir, image("{'descr' '|u1'}")) == "bad .npy header: expected ':' after 'descr', found '''");
  CHECK(error_for(dir, image("{'descr': '|u1' 'shape': (1,)}")) ==
        "bad .npy header: expected ',' or '}' after the value of 'descr', found '''");
  CHECK(error_for(dir, image("{descr: '|u1'}")) == "bad .npy header: expected a string as a key, found 'd'");
  CHECK(error_for(dir, image("{'descr': '|u1, }")) == "bad .npy header: unterminated string");
  CHECK(error_for(dir, image("{'descr': 5}")) == "bad .npy header: expected a string for 'descr', found '5'");
  CHECK(error_for(dir, image("{'descr': '|u1', 'fortran_order': 0, 'shape': (1,)}", "x")) ==
        "bad .npy header: 'fortran_order' must be True or False, found '0'");
  CHECK(error_for(dir, image("{'descr': '|u1', 'fortran_order': False, 'shape': (1,)", "x", 1, false)) ==
        "bad .npy header: expected ',' or '}' after the value of 'shape', found the end");
}

TEST_CASE("npy: missing, duplicate and unknown keys", "[npy]") {
  TempDir dir;
  CHECK(error_for(dir, image("{'fortran_order': False, 'shape': (1,), }", "x")) == "bad .npy header: missing key 'descr'");
  CHECK(error_for(dir, image("{'descr': '|u1', 'shape': (1,), }", "x")) ==
        "bad .npy header: missing key 'fortran_order'");
  CHECK(error_for(dir, image("{'descr': '|u1', 'fortran_order': False}", "x")) == "bad .npy header: missing key 'shape'");
  CHECK(error_for(dir, image("{}")) == "bad .npy header: missing key 'descr'");
  CHECK(error_for(dir, image("{'descr': '|u1', 'descr': '|u1'}")) == "bad .npy header: duplicate key 'descr'");
  CHECK(error_for(dir, image("{'descr': '|u1', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "x")) ==
        "bad .npy header: unexpected key 'extra'");
  CHECK(error_for(dir, image("{'bad\nkey': 1}")) == "bad .npy header: unexpected key 'bad\\x0akey'");
}

TEST_CASE("npy: unknown, big-endian, object and structured dtypes", "[npy]") {
  TempDir dir;
  const std::string supported = " (supported: |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8 <f4 <f8)";
  CHECK(error_for(dir, image(dict("<c8", "(1,)"), "12345678")) == "unsupported dtype '<c8'" + supported);
  CHECK(error_for(dir, image(dict("|b1", "(1,)"), "x")) == "unsupported dtype '|b1'" + supported);
  CHECK(error_for(dir, image(dict("int32", "(1,)"), "1234")) == "unsupported dtype 'int32'" + supported);
  CHECK(error_for(dir, image(dict("", "(1,)"), "x")) == "unsupported dtype ''" + supported);
  CHECK(error_for(dir, image(dict(std::string(50, 'x'), "(1,)"), "x")) ==
        "unsupported dtype '" + std::string(40, 'x') + "...'" + supported);
  CHECK(error_for(dir, image(dict(">i4", "(1,)"), "1234")) ==
        "big-endian dtype '>i4' is not supported (save it as '<i4')");
  CHECK(error_for(dir, image(dict(">f8", "(1,)"), "12345678")) ==
        "big-endian dtype '>f8' is not supported (save it as '<f8')");
  CHECK(error_for(dir, image(dict("|O", "(1,)"), "12345678")) == "object arrays ('|O') are not supported");
  CHECK(error_for(dir, image("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }", "1234")) ==
        "structured dtypes are not supported");
}

TEST_CASE("npy: bad shape tuples", "[npy]") {
  TempDir dir;
  const auto shape_error = [&](const std::string& shape) { return error_for(dir, image(dict("|u1", shape), "x")); };
  CHECK(shape_error("[1]") == "bad .npy header: expected '(' to start 'shape', found '['");
  CHECK(shape_error("1") == "bad .npy header: expected '(' to start 'shape', found '1'");
  CHECK(shape_error("(1)") == "bad .npy header: 'shape' (1) is not a tuple (a 1-tuple is written (1,))");
  CHECK(shape_error("(1,,)") == "bad .npy header: expected a dimension in 'shape', found ','");
  CHECK(shape_error("(,)") == "bad .npy header: expected a dimension in 'shape', found ','");
  CHECK(shape_error("(1 1)") == "bad .npy header: expected ',' or ')' in 'shape', found '1'");
  CHECK(shape_error("(1.0,)") == "bad .npy header: expected ',' or ')' in 'shape', found '.'");
  CHECK(shape_error("(x,)") == "bad .npy header: expected a dimension in 'shape', found 'x'");
  CHECK(shape_error("(1,") == "bad .npy header: expected a dimension in 'shape', found ','");
  CHECK(error_for(dir, image("{'descr': '|u1', 'fortran_order': False, 'shape': (1", "", 1, false)) ==
        "bad .npy header: expected ',' or ')' in 'shape', found the end");
}

TEST_CASE("npy: negative and overflowing dimensions", "[npy]") {
  TempDir dir;
  const auto error = [&](const std::string& descr, const std::string& shape) {
    return error_for(dir, image(dict(descr, shape), "x"));
  };
  CHECK(error("|u1", "(-1,)") == "bad .npy header: negative dimension -1 in 'shape'");
  CHECK(error("|u1", "(2, -3)") == "bad .npy header: negative dimension -3 in 'shape'");
  CHECK(error("|u1", "(-,)") == "bad .npy header: expected a dimension in 'shape', found ','");
  CHECK(error("|u1", "(18446744073709551616,)") ==
        "bad .npy header: dimension 18446744073709551616 in 'shape' is too large");
  CHECK(error("|u1", "(99999999999999999999999999999999999999999999999,)") ==
        "bad .npy header: dimension 9999999999999999999999999999999999999999... in 'shape' is too large");
  // The largest size_t is a valid dimension, but not 4 bytes of it.
  CHECK(error("<i4", "(18446744073709551615,)") == "shape (18446744073709551615,) of int32 is too large");
  CHECK(error("|u1", "(4294967296, 4294967296)") == "shape (4294967296, 4294967296) of uint8 is too large");
  CHECK(error("<i8", "(65536, 65536, 65536, 65536)") == "shape (65536, 65536, 65536, 65536) of int64 is too large");
  // A product that fits is only compared with the file, never allocated.
  CHECK(error("|u1", "(4294967296, 4294967295)") ==
        "data is 1 byte but shape (4294967296, 4294967295) of uint8 needs 18446744069414584320");
}

TEST_CASE("npy: data shorter or longer than the shape needs", "[npy]") {
  TempDir dir;
  CHECK(error_for(dir, image(dict("<i4", "(2, 3)"), std::string(20, 'x'))) ==
        "data is 20 bytes but shape (2, 3) of int32 needs 24");
  CHECK(error_for(dir, image(dict("<i4", "(2, 3)"), std::string(28, 'x'))) ==
        "data is 28 bytes but shape (2, 3) of int32 needs 24");
  CHECK(error_for(dir, image(dict("<f8", "()"))) == "data is 0 bytes but shape () of float64 needs 8");
  CHECK(error_for(dir, image(dict("|i1", "(0, 4)"), "x")) == "data is 1 byte but shape (0, 4) of int8 needs 0");
  // One byte is singular, every other count plural.
  CHECK(error_for(dir, image(dict("|i1", "(3,)"), "x")) == "data is 1 byte but shape (3,) of int8 needs 3");
  CHECK(error_for(dir, image(dict("|i1", "(1,)"), "xy")) == "data is 2 bytes but shape (1,) of int8 needs 1");
}

TEST_CASE("npy: expect() and the typed getters name what was expected", "[npy]") {
  TempDir dir;
  const std::string w = dir.file("W.npy");
  write_npy(w, NpyArray::of<std::int32_t>({4, 8}, values<std::int32_t>(32)));
  const NpyArray a = read_npy(w);

  CHECK_NOTHROW(tpu::expect(a, Dtype::int32, 2, "GEMM result"));
  CHECK(tpu::expect_int32(a, 2, "GEMM result") == values<std::int32_t>(32));
  CHECK_THROWS_WITH(tpu::expect(a, Dtype::int8, 3, "weights"),
                    w + ": expected a 3-D int8 array (weights), got a 2-D int32 array of shape (4, 8)");
  CHECK_THROWS_WITH(tpu::expect_int8(a, 2, "host memory"),
                    w + ": expected a 2-D int8 array (host memory), got a 2-D int32 array of shape (4, 8)");
  CHECK_THROWS_WITH(tpu::expect_int32(a, 1, ""), w + ": expected a 1-D int32 array, got a 2-D int32 array of shape (4, 8)");
  CHECK_THROWS_WITH(a.values<std::int8_t>(), w + ": expected int8 elements, got int32");

  const NpyArray one_d = NpyArray::of<std::int8_t>({5}, values<std::int8_t>(5));
  CHECK(tpu::expect_int8(one_d, 1, "bias") == values<std::int8_t>(5));
  CHECK_THROWS_WITH(tpu::expect_int8(one_d, 0, "scale"),
                    "(in-memory array): expected a 0-D int8 array (scale), got a 1-D int8 array of shape (5,)");
  CHECK_THROWS_AS(tpu::expect(one_d, Dtype::int8, 2, "x"), FileError);
}

TEST_CASE("npy: in-memory arrays and writer errors", "[npy]") {
  TempDir dir;
  CHECK(NpyArray::of<float>({}, {1.5f}).element_count() == 1);
  CHECK(NpyArray::of<float>({2, 0}, {}).element_count() == 0);
  CHECK_THROWS_AS(NpyArray::of<std::int8_t>({2, 3}, {1, 2, 3}), std::invalid_argument);
  CHECK_THROWS_WITH(NpyArray::of<std::int8_t>({2, 3}, {1, 2, 3}), "NpyArray::of: 3 values for shape (2, 3)");
  CHECK_THROWS_WITH(NpyArray::of<std::int8_t>({2}, {1}), "NpyArray::of: 1 value for shape (2,)");
  CHECK(tpu::format_shape({}) == "()");
  CHECK(tpu::format_shape({7}) == "(7,)");
  CHECK(tpu::format_shape({1, 2, 3}) == "(1, 2, 3)");

  const std::string path = dir.file("out.npy");
  NpyArray bad = NpyArray::of<std::int32_t>({2, 3}, values<std::int32_t>(6));
  bad.data.pop_back();
  CHECK_THROWS_WITH(write_npy(path, bad),
                    path + ": cannot write: shape (2, 3) of int32 needs 24 bytes of data, the array has 23");
  NpyArray one = NpyArray::of<std::int8_t>({1}, {7});
  one.data.clear();
  CHECK_THROWS_WITH(write_npy(path, one),
                    path + ": cannot write: shape (1,) of int8 needs 1 byte of data, the array has 0");
  bad.shape = {std::size_t{1} << 62, 8};
  CHECK_THROWS_WITH(write_npy(path, bad), path + ": cannot write: shape (4611686018427387904, 8) is too large");
  CHECK_FALSE(fs::exists(path));

  const std::string nowhere = dir.file("no/such/folder/out.npy");
  CHECK_THROWS_AS(write_npy(nowhere, NpyArray::of<std::int8_t>({1}, {1})), FileError);

  // Overwriting replaces the old file whole and leaves no temporary behind.
  write_npy(path, NpyArray::of<std::int8_t>({3}, {1, 2, 3}));
  write_npy(path, NpyArray::of<std::int8_t>({1}, {9}));
  CHECK(read_npy(path).values<std::int8_t>() == std::vector<std::int8_t>{9});
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}
