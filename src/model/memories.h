// Storage of the four memories: host memory, weight memory, unified buffer
// (int8 rows) and accumulators (int32 rows). Plain arrays; the units that own
// the ports decide when they are read and written.
//
// The memories start zeroed without touching them: large ones are anonymous
// mappings (mmap), whose zero pages the kernel provides on first touch. A
// tpuv1 machine has about 150 MB of memories of which a run typically uses a
// few MB; zero-filling them all (as a std::vector would) dominated short runs
// and their peak memory. (Not calloc: once a large block has been freed,
// glibc serves blocks up to 32 MB from its heap and clears them with memset.)
// Under AddressSanitizer everything comes from calloc, so that accesses past
// a memory's end are caught.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define TPU_MEMORIES_CALLOC_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPU_MEMORIES_CALLOC_ONLY 1
#endif
#endif

#include "config/arch_config.h"

namespace tpu::model {

// A view of a memory's contents as one contiguous array, with the part of
// std::vector's interface the callers use (data, size, begin, end, []).
template <typename T>
class MemorySpan {
 public:
  MemorySpan(T* data, std::size_t size) : data_(data), size_(size) {}
  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }
  T& operator[](std::size_t i) const { return data_[i]; }

 private:
  T* data_;
  std::size_t size_;
};

template <typename T>
class RowMemory {
 public:
  RowMemory(std::uint64_t rows, std::uint64_t width)
      : width_(width), size_(rows * width), data_(nullptr, Free{0}) {
    if (size_ == 0) return;
#ifndef TPU_MEMORIES_CALLOC_ONLY
    if (const std::size_t bytes = size_ * sizeof(T); bytes >= kMapBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      data_ = std::unique_ptr<T[], Free>(static_cast<T*>(p), Free{bytes});
      return;
    }
#endif
    data_ = std::unique_ptr<T[], Free>(static_cast<T*>(std::calloc(size_, sizeof(T))), Free{0});
    if (!data_) throw std::bad_alloc();
  }
  RowMemory(const RowMemory& o) : RowMemory(o.rows(), o.width_) {
    std::copy(o.data().begin(), o.data().end(), data().begin());
  }
  RowMemory& operator=(const RowMemory& o) {
    if (this != &o) *this = RowMemory(o);
    return *this;
  }
  RowMemory(RowMemory&&) noexcept = default;
  RowMemory& operator=(RowMemory&&) noexcept = default;

  std::uint64_t rows() const { return width_ ? size_ / width_ : 0; }
  std::uint64_t width() const { return width_; }
  T* row(std::uint64_t r) { return data_.get() + r * width_; }
  const T* row(std::uint64_t r) const { return data_.get() + r * width_; }
  MemorySpan<T> data() { return {data_.get(), size_}; }
  MemorySpan<const T> data() const { return {data_.get(), size_}; }

  // A hint that rows [first, first + count) are about to be written: their
  // pages are faulted in by one system call instead of one fault per page,
  // which costs short runs more than the writes themselves. Changes nothing
  // else; rows past the end are ignored.
  void prefault(std::uint64_t first, std::uint64_t count) {
#if !defined(TPU_MEMORIES_CALLOC_ONLY) && defined(MADV_POPULATE_WRITE)
    if (data_.get_deleter().mapped == 0 || first >= rows()) return;
    count = std::min(count, rows() - first);
    const std::size_t page = 4096;
    auto begin = reinterpret_cast<std::uintptr_t>(row(first));
    const auto end = reinterpret_cast<std::uintptr_t>(row(first + count));
    begin &= ~(page - 1);
    if (end - begin < kPrefaultBytes) return;  // a few faults cost less than the call
    // Huge pages for large writes only (fewer TLB misses in the GEMMs that
    // follow): the kernel clears a whole 2 MiB page at its first touch, which
    // costs a short run more than it saves.
    if (const std::uintptr_t h0 = (begin + kHugePage - 1) & ~(kHugePage - 1),
        h1 = end & ~(kHugePage - 1);
        h1 > h0 && h1 - h0 >= 2 * kHugePage)
      madvise(reinterpret_cast<void*>(h0), h1 - h0, MADV_HUGEPAGE);
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);  // only hints
#else
    (void)first;
    (void)count;
#endif
  }

 private:
  static constexpr std::size_t kMapBytes = std::size_t{1} << 20;
  static constexpr std::size_t kPrefaultBytes = std::size_t{1} << 15;
  static constexpr std::uintptr_t kHugePage = std::uintptr_t{1} << 21;
  // Frees calloc's blocks (mapped == 0) and unmaps mappings of `mapped` bytes.
  struct Free {
    std::size_t mapped;
    void operator()(T* p) const {
      if (mapped) munmap(p, mapped);
      else std::free(p);
    }
  };
  std::uint64_t width_;
  std::size_t size_;
  std::unique_ptr<T[], Free> data_;
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
