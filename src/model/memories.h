// Storage of the four memories: host memory, weight memory, unified buffer
// (int8 rows) and accumulators (int32 rows). Plain arrays; the units that own
// the ports decide when they are read and written.
#pragma once

#include <cstdint>
#include <vector>

#include "config/arch_config.h"

namespace tpu::model {

template <typename T>
class RowMemory {
 public:
  RowMemory(std::uint64_t rows, std::uint64_t width) : width_(width), data_(rows * width) {}
  std::uint64_t rows() const { return width_ ? data_.size() / width_ : 0; }
  std::uint64_t width() const { return width_; }
  T* row(std::uint64_t r) { return data_.data() + r * width_; }
  const T* row(std::uint64_t r) const { return data_.data() + r * width_; }
  std::vector<T>& data() { return data_; }
  const std::vector<T>& data() const { return data_; }

 private:
  std::uint64_t width_;
  std::vector<T> data_;
};

struct Memories {
  explicit Memories(const ArchConfig& c)
      : host(c.host_rows, c.array_n),
        weights(c.weight_tiles, c.array_n * c.array_n),
        ub(c.ub_rows, c.array_n),
        acc(c.acc_rows, c.array_n) {}
  RowMemory<std::int8_t> host;     // rows of N int8
  RowMemory<std::int8_t> weights;  // one "row" per tile: N x N int8, row-major W[k][j]
  RowMemory<std::int8_t> ub;
  RowMemory<std::int32_t> acc;
};

}  // namespace tpu::model
