#include "common/npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>

#include "common/file_io.h"
#include "common/plural.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, ".npy data is used in host byte order");

namespace tpu {
namespace {

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  std::string_view code;  // descr without the byte-order character
  std::size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {Dtype::int8, "int8", "i1", 1},     {Dtype::uint8, "uint8", "u1", 1},
    {Dtype::int16, "int16", "i2", 2},   {Dtype::uint16, "uint16", "u2", 2},
    {Dtype::int32, "int32", "i4", 4},   {Dtype::uint32, "uint32", "u4", 4},
    {Dtype::int64, "int64", "i8", 8},   {Dtype::uint64, "uint64", "u8", 8},
    {Dtype::float32, "float32", "f4", 4}, {Dtype::float64, "float64", "f8", 8},
};

constexpr bool table_matches_enum() {
  for (std::size_t i = 0; i < std::size(kDtypes); ++i)
    if (static_cast<std::size_t>(kDtypes[i].dtype) != i) return false;
  return true;
}
static_assert(table_matches_enum());

const DtypeInfo& info(Dtype dtype) {
  const auto i = static_cast<std::size_t>(dtype);
  if (i >= std::size(kDtypes)) throw std::invalid_argument("invalid tpu::Dtype");
  return kDtypes[i];
}

std::string descr_of(Dtype dtype) {
  const DtypeInfo& d = info(dtype);
  return (d.size == 1 ? "|" : "<") + std::string(d.code);
}

// Text from a file, made safe for a one-line message: escaped and cut short.
std::string shown(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f || c == '\\') ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  return text.size() > 40 ? out + "..." : out;
}

// Element count times item size; nullopt if that overflows.
std::optional<std::size_t> byte_count(const std::vector<std::size_t>& shape, std::size_t item) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::size_t n = item;
  for (std::size_t d : shape) {
    if (n > std::numeric_limits<std::size_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::size_t>> shape;
};

// The header's dict literal: {'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& path, std::string_view text) : path_(path), s_(text) {}

  Header parse() {
    skip_ws();
    if (at_end()) fail("empty");
    if (s_[pos_] != '{') fail(fmt::format("not a Python dict (starts with {})", found()));
    ++pos_;
    Header h;
    for (;;) {
      skip_ws();
      if (next_is('}')) break;
      const std::string key = string("as a key");
      expect(':', fmt::format("after '{}'", shown(key)).c_str());
      if (key == "descr") {
        once(h.descr, key);
        skip_ws();
        if (next_is('[')) throw FileError(fmt::format("{}: structured dtypes are not supported", path_));
        h.descr = string("for 'descr'");
      } else if (key == "fortran_order") {
        once(h.fortran_order, key);
        h.fortran_order = boolean();
      } else if (key == "shape") {
        once(h.shape, key);
        h.shape = tuple();
      } else {
        fail(fmt::format("unexpected key '{}'", shown(key)));
      }
      skip_ws();
      if (next_is('}')) break;
      expect(',', fmt::format("or '}}' after the value of '{}'", key).c_str());
    }
    ++pos_;
    skip_ws();
    if (!at_end()) fail(fmt::format("unexpected {} after the dict", found()));
    if (!h.descr) fail("missing key 'descr'");
    if (!h.fortran_order) fail("missing key 'fortran_order'");
    if (!h.shape) fail("missing key 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(fmt::format("{}: bad .npy header: {}", path_, what));
  }
  bool at_end() const { return pos_ >= s_.size(); }
  bool next_is(char c) const { return !at_end() && s_[pos_] == c; }
  std::string found() const { return at_end() ? "the end" : "'" + shown(s_.substr(pos_, 1)) + "'"; }
  void skip_ws() {
    while (next_is(' ') || next_is('\t') || next_is('\n') || next_is('\r')) ++pos_;
  }
  void expect(char c, const char* where) {
    skip_ws();
    if (!next_is(c)) fail(fmt::format("expected '{}' {}, found {}", c, where, found()));
    ++pos_;
  }
  template <typename T>
  void once(const std::optional<T>& value, const std::string& key) const {
    if (value) fail(fmt::format("duplicate key '{}'", key));
  }

  std::string string(const char* what) {
    skip_ws();
    if (!next_is('\'') && !next_is('"')) fail(fmt::format("expected a string {}, found {}", what, found()));
    const char quote = s_[pos_++];
    const std::size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    const std::string out(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  bool boolean() {
    skip_ws();
    for (const bool value : {true, false}) {
      const std::string_view word = value ? "True" : "False";
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail(fmt::format("'fortran_order' must be True or False, found {}", found()));
  }

  std::vector<std::size_t> tuple() {
    expect('(', "to start 'shape'");
    std::vector<std::size_t> dims;
    bool trailing_comma = false;
    for (skip_ws(); !next_is(')'); skip_ws()) {
      dims.push_back(dimension());
      skip_ws();
      trailing_comma = next_is(',');
      if (trailing_comma) ++pos_;
      else if (!next_is(')')) fail(fmt::format("expected ',' or ')' in 'shape', found {}", found()));
    }
    ++pos_;
    if (dims.size() == 1 && !trailing_comma)
      fail(fmt::format("'shape' ({}) is not a tuple (a 1-tuple is written ({},))", dims[0], dims[0]));
    return dims;
  }

  std::size_t dimension() {
    const bool negative = next_is('-');
    const std::size_t start = pos_ + (negative ? 1 : 0);
    std::size_t end = start;
    while (end < s_.size() && s_[end] >= '0' && s_[end] <= '9') ++end;
    const std::string_view digits = s_.substr(start, end - start);
    pos_ = digits.empty() ? start : end;
    if (digits.empty()) fail(fmt::format("expected a dimension in 'shape', found {}", found()));
    if (negative) fail(fmt::format("negative dimension -{} in 'shape'", shown(digits)));
    std::size_t value = 0;
    for (const char c : digits) {
      const auto digit = static_cast<std::size_t>(c - '0');
      if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10)
        fail(fmt::format("dimension {} in 'shape' is too large", shown(digits)));
      value = value * 10 + digit;
    }
    return value;
  }

  const std::string& path_;
  std::string_view s_;
  std::size_t pos_ = 0;
};

Dtype parse_descr(const std::string& path, std::string_view descr) {
  std::string_view code = descr;
  char order = '=';  // no prefix: native, which is little-endian here
  if (!code.empty() && std::string_view("<>|=").find(code[0]) != std::string_view::npos) {
    order = code[0];
    code.remove_prefix(1);
  }
  if (code.substr(0, 1) == "O")
    throw FileError(fmt::format("{}: object arrays ('{}') are not supported", path, shown(descr)));
  std::string supported;
  for (const DtypeInfo& d : kDtypes) {
    if (code == d.code) {
      if (order == '>' && d.size > 1)
        throw FileError(fmt::format("{}: big-endian dtype '{}' is not supported (save it as '<{}')", path,
                                    shown(descr), d.code));
      return d.dtype;
    }
    supported += (supported.empty() ? "" : " ") + descr_of(d.dtype);
  }
  throw FileError(fmt::format("{}: unsupported dtype '{}' (supported: {})", path, shown(descr), supported));
}

// Reorders column-major (Fortran) elements into row-major (C) order.
std::vector<std::uint8_t> fortran_to_c(const std::vector<std::uint8_t>& src, const std::vector<std::size_t>& shape,
                                       std::size_t item) {
  std::vector<std::uint8_t> dst(src.size());
  const std::size_t rank = shape.size();
  std::vector<std::size_t> c_stride(rank), index(rank, 0);
  for (std::size_t k = rank, stride = 1; k-- > 0; stride *= shape[k]) c_stride[k] = stride;
  for (std::size_t f = 0; f < src.size() / item; ++f) {
    std::size_t c = 0;
    for (std::size_t k = 0; k < rank; ++k) c += index[k] * c_stride[k];
    std::memcpy(&dst[c * item], &src[f * item], item);
    for (std::size_t k = 0; k < rank && ++index[k] == shape[k]; ++k) index[k] = 0;  // first axis fastest
  }
  return dst;
}

std::string origin(const NpyArray& array) { return array.source.empty() ? "(in-memory array)" : array.source; }

}  // namespace

std::string_view dtype_name(Dtype dtype) { return info(dtype).name; }
std::size_t dtype_size(Dtype dtype) { return info(dtype).size; }

std::string format_shape(const std::vector<std::size_t>& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

std::size_t NpyArray::element_count() const {
  const auto n = byte_count(shape, 1);
  if (!n) throw std::overflow_error("NpyArray: element count of shape " + format_shape(shape) + " overflows");
  return *n;
}

void NpyArray::check_dtype(Dtype wanted) const {
  if (wanted != dtype)
    throw FileError(fmt::format("{}: expected {} elements, got {}", origin(*this), dtype_name(wanted), dtype_name(dtype)));
}

void NpyArray::check_count(std::size_t count) const {
  if (byte_count(shape, 1) != count)
    throw std::invalid_argument(
        fmt::format("NpyArray::of: {} for shape {}", plural(count, "value"), format_shape(shape)));
}

NpyArray read_npy(const std::string& path) {
  std::vector<std::uint8_t> bytes = read_file_bytes(path);
  const auto error = [&path](const std::string& what) { return FileError(fmt::format("{}: {}", path, what)); };
  if (bytes.empty()) throw error("empty file, not a .npy file");
  if (bytes.size() < 6 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) throw error("not a .npy file (bad magic)");
  if (bytes.size() < 8) throw error("truncated .npy file (ends inside the version)");
  const unsigned major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    throw error(fmt::format("unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", major, minor));
  const std::size_t length_bytes = major == 1 ? 2 : 4, start = 8 + length_bytes;
  if (bytes.size() < start) throw error("truncated .npy file (ends inside the header length)");
  std::size_t header_length = 0;
  for (std::size_t i = length_bytes; i-- > 0;) header_length = header_length << 8 | bytes[8 + i];
  if (header_length > bytes.size() - start)
    throw error(fmt::format("header length {} runs past the end of the file ({} bytes)", header_length, bytes.size()));

  const Header h =
      HeaderParser(path, std::string_view(reinterpret_cast<const char*>(bytes.data() + start), header_length)).parse();
  NpyArray array;
  array.source = path;
  array.dtype = parse_descr(path, *h.descr);
  array.shape = *h.shape;
  const std::string what = format_shape(array.shape) + " of " + std::string(dtype_name(array.dtype));
  const auto needed = byte_count(array.shape, dtype_size(array.dtype));
  if (!needed) throw error(fmt::format("shape {} is too large", what));
  const std::size_t available = bytes.size() - start - header_length;
  if (*needed != available)
    throw error(fmt::format("data is {} but shape {} needs {}", plural(available, "byte"), what, *needed));

  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(start + header_length));
  array.data = *h.fortran_order ? fortran_to_c(bytes, array.shape, dtype_size(array.dtype)) : std::move(bytes);
  return array;
}

void write_npy(const std::string& path, const NpyArray& array) {
  const auto needed = byte_count(array.shape, dtype_size(array.dtype));
  if (!needed) throw FileError(fmt::format("{}: cannot write: shape {} is too large", path, format_shape(array.shape)));
  if (*needed != array.data.size())
    throw FileError(fmt::format("{}: cannot write: shape {} of {} needs {} of data, the array has {}", path,
                                format_shape(array.shape), dtype_name(array.dtype), plural(*needed, "byte"),
                                array.data.size()));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr_of(array.dtype),
                                   format_shape(array.shape));
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 0xffff)
    throw FileError(fmt::format("{}: cannot write: a rank-{} header does not fit format 1.0", path, array.rank()));

  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<std::uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<std::uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), array.data.begin(), array.data.end());
  write_file_atomic(path, out);
}

void expect(const NpyArray& array, Dtype dtype, std::size_t rank, std::string_view what) {
  if (array.dtype == dtype && array.rank() == rank) return;
  throw FileError(fmt::format("{}: expected a {}-D {} array{}, got a {}-D {} array of shape {}", origin(array), rank,
                              dtype_name(dtype), what.empty() ? "" : fmt::format(" ({})", what), array.rank(),
                              dtype_name(array.dtype), format_shape(array.shape)));
}

std::vector<std::int8_t> expect_int8(const NpyArray& array, std::size_t rank, std::string_view what) {
  expect(array, Dtype::int8, rank, what);
  return array.values<std::int8_t>();
}

std::vector<std::int32_t> expect_int32(const NpyArray& array, std::size_t rank, std::string_view what) {
  expect(array, Dtype::int32, rank, what);
  return array.values<std::int32_t>();
}

}  // namespace tpu
