// NumPy .npy files: host memory (2-D int8, rows x N), weight memory (3-D int8,
// tiles x N x N) and GEMM matrices (2-D int8 / int32).
//
// Contract:
// - read_npy accepts format versions 1.0, 2.0 and 3.0: magic "\x93NUMPY", two
//   version bytes, the header length (u16 LE for 1.0, u32 LE otherwise), then a
//   Python dict literal with exactly the keys 'descr', 'fortran_order' and
//   'shape' (any order, either quote style, any padding, any data alignment).
// - Dtypes: the ten below, little-endian ('<', '|', '=' or no prefix); big-endian
//   multi-byte data, object, structured and any other dtypes are rejected.
// - Fortran-order files are transposed into C order on read, so NpyArray::data
//   is always C order.
// - The data must be exactly as long as the shape needs. Sizes are checked
//   against the file before anything is allocated, so a hostile shape can not
//   overflow or cause a huge allocation.
// - Every error in a file is a FileError whose what() is one line starting with
//   the path, e.g. "W.npy: unsupported dtype '<c8' (...)".
// - write_npy writes format 1.0, C order, header padded with spaces and a
//   newline so the data starts at a multiple of 64 bytes; the file is written
//   whole or not at all (write_file_atomic).
// - The host must be little-endian (checked at compile time in npy.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace tpu {

enum class Dtype { int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64 };

std::string_view dtype_name(Dtype dtype);  // "int8", "float32", ...
std::size_t dtype_size(Dtype dtype);       // bytes per element

template <typename T>
constexpr Dtype dtype_of() {
  if constexpr (std::is_same_v<T, std::int8_t>) return Dtype::int8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return Dtype::uint8;
  else if constexpr (std::is_same_v<T, std::int16_t>) return Dtype::int16;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return Dtype::uint16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return Dtype::int32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return Dtype::uint32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return Dtype::int64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return Dtype::uint64;
  else if constexpr (std::is_same_v<T, float>) return Dtype::float32;
  else {
    static_assert(std::is_same_v<T, double>, "no .npy dtype for this type");
    return Dtype::float64;
  }
}

// Python's repr of a shape tuple: "()", "(5,)", "(4, 8)".
std::string format_shape(const std::vector<std::size_t>& shape);

struct NpyArray {
  Dtype dtype = Dtype::int8;
  std::vector<std::size_t> shape;  // empty for a 0-D (scalar) array
  std::vector<std::uint8_t> data;  // C order, little-endian, element_count() * dtype_size(dtype) bytes
  std::string source;              // the file read from (prefixes errors); empty if built in memory

  std::size_t rank() const { return shape.size(); }
  std::size_t element_count() const;  // product of shape, 1 for 0-D

  // A copy of the elements; throws FileError if T does not match dtype.
  template <typename T>
  std::vector<T> values() const {
    check_dtype(dtype_of<T>());
    std::vector<T> out(data.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
    return out;
  }

  // An array of the given shape and elements (C order); throws
  // std::invalid_argument if their counts differ.
  template <typename T>
  static NpyArray of(std::vector<std::size_t> shape, const std::vector<T>& values) {
    NpyArray a;
    a.dtype = dtype_of<T>();
    a.shape = std::move(shape);
    a.check_count(values.size());
    a.data.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(a.data.data(), values.data(), a.data.size());
    return a;
  }

 private:
  void check_dtype(Dtype wanted) const;
  void check_count(std::size_t count) const;
};

NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NpyArray& array);

// Throws a FileError unless `array` is a `rank`-D array of `dtype`, e.g.
// "W.npy: expected a 3-D int8 array (weights), got a 2-D int32 array of shape (4, 8)".
void expect(const NpyArray& array, Dtype dtype, std::size_t rank, std::string_view what);
// expect(), then the elements.
std::vector<std::int8_t> expect_int8(const NpyArray& array, std::size_t rank, std::string_view what);
std::vector<std::int32_t> expect_int32(const NpyArray& array, std::size_t rank, std::string_view what);

}  // namespace tpu
