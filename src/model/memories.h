// Storage of the four memories: host memory, weight memory, unified buffer
// (int8 rows) and accumulators (int32 rows). Plain arrays; the units that own
// the ports decide when they are read and written.
//
// The memories start zeroed without touching them: large ones (1 MiB and
// more) are anonymous mappings (mmap), whose pages the kernel provides, zeroed,
// on first touch. A tpuv1 machine has 8 GiB of weight memory (the paper's
// DDR3) and about 90 MB of other memories, of which a run typically touches a
// few MB; zero-filling them (as a std::vector would) dominated short runs and
// their peak memory, and 8 GiB would not fit many hosts. Host memory is used
// only for the pages a run touches (reads included, on kernels without a
// shared zero page); the mapping reserves no swap (MAP_NORESERVE). Copies and
// comparisons visit only the pages touched in either memory (touched_runs).
// (Not calloc: once a large block has been freed, glibc serves blocks up to
// 32 MB from its heap and clears them with memset.)
//
// A mapping has an inaccessible guard page on each side, so an access just
// past either end faults; under AddressSanitizer the slack between the end
// and the next page is poisoned too, and small memories come from calloc, so
// that every access past a memory's end is reported.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define TPU_MEMORIES_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPU_MEMORIES_ASAN 1
#endif
#endif
#ifdef TPU_MEMORIES_ASAN
#include <sanitizer/asan_interface.h>
#endif

#include "config/arch_config.h"

namespace tpu::model {

namespace detail {

inline std::size_t page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

// Runs [first, first + count) of bytes, as offsets into a mapping.
using ByteRuns = std::vector<std::pair<std::size_t, std::size_t>>;

// The pages of the mapping [base, base + bytes) (base page-aligned) that the
// process has touched: present in memory or swapped out (bits 63 and 62 of
// each page's /proc/self/pagemap entry, which an unprivileged process may
// read), merged into runs. When pagemap cannot be read, one run: everything.
inline ByteRuns touched_pages(const void* base, std::size_t bytes) {
  const std::size_t page = page_bytes();
  const ByteRuns everything{{0, bytes}};
  const int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return everything;
  ByteRuns runs;
  const std::size_t pages = (bytes + page - 1) / page;
  const std::size_t first_page = reinterpret_cast<std::uintptr_t>(base) / page;
  constexpr std::size_t kBatch = 8192;  // entries per read: 64 KiB
  std::vector<std::uint64_t> entries(kBatch);
  for (std::size_t p = 0; p < pages;) {
    const std::size_t want = std::min(kBatch, pages - p);
    const ssize_t got = pread(fd, entries.data(), want * sizeof(std::uint64_t),
                              static_cast<off_t>((first_page + p) * sizeof(std::uint64_t)));
    if (got <= 0 || got % static_cast<ssize_t>(sizeof(std::uint64_t)) != 0) {
      close(fd);
      return everything;
    }
    const std::size_t n = static_cast<std::size_t>(got) / sizeof(std::uint64_t);
    for (std::size_t i = 0; i < n; ++i) {
      if ((entries[i] >> 62) == 0) continue;  // neither present nor swapped
      const std::size_t at = (p + i) * page, len = std::min(page, bytes - at);
      if (!runs.empty() && runs.back().first + runs.back().second == at) runs.back().second += len;
      else runs.emplace_back(at, len);
    }
    p += n;
  }
  close(fd);
  return runs;
}

}  // namespace detail

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
    if (const std::size_t bytes = size_ * sizeof(T); bytes >= kMapBytes) {
      // [guard page][the memory, rounded up to pages][guard page]
      // The memory starts on a 2 MiB boundary (reserved with 2 MiB of slack,
      // the slack unmapped), so that prefault can ask for huge pages from
      // the first row on.
      const std::size_t page = detail::page_bytes(), body = (bytes + page - 1) / page * page;
      const std::size_t slack = body >= kHugePage ? kHugePage : 0, reserved = body + 2 * page + slack;
      void* p = mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      char* first = static_cast<char*>(p) + page;
      if (slack) {
        char* aligned = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(first) + kHugePage - 1) &
                                                ~(kHugePage - 1));
        char* const end = static_cast<char*>(p) + reserved;
        if (aligned - page > static_cast<char*>(p)) munmap(p, static_cast<std::size_t>(aligned - page - static_cast<char*>(p)));
        if (end > aligned + body + page) munmap(aligned + body + page, static_cast<std::size_t>(end - (aligned + body + page)));
        first = aligned;
      }
      if (mprotect(first, body, PROT_READ | PROT_WRITE) != 0) {
        munmap(first - page, body + 2 * page);
        throw std::bad_alloc();
      }
#ifdef TPU_MEMORIES_ASAN
      ASAN_POISON_MEMORY_REGION(first + bytes, body - bytes);
#endif
      data_ = std::unique_ptr<T[], Free>(reinterpret_cast<T*>(first), Free{body + 2 * page});
      return;
    }
    data_ = std::unique_ptr<T[], Free>(static_cast<T*>(std::calloc(size_, sizeof(T))), Free{0});
    if (!data_) throw std::bad_alloc();
  }
  // A copy touches only the pages the original has touched.
  RowMemory(const RowMemory& o) : RowMemory(o.rows(), o.width_) {
    for (const auto& [first, count] : o.touched_runs())
      std::copy(o.data_.get() + first, o.data_.get() + first + count, data_.get() + first);
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
  // All of the memory. Reading an untouched part costs host memory on
  // kernels without a shared zero page: visit large memories by
  // touched_runs() where the whole is wanted.
  MemorySpan<T> data() { return {data_.get(), size_}; }
  MemorySpan<const T> data() const { return {data_.get(), size_}; }

  // Runs [first, first + count) of elements outside which the memory is
  // certainly zero: the pages a mapped memory has touched, the whole of a
  // small one. Sorted, disjoint.
  std::vector<std::pair<std::size_t, std::size_t>> touched_runs() const {
    if (size_ == 0) return {};
    if (data_.get_deleter().mapped == 0) return {{0, size_}};
    std::vector<std::pair<std::size_t, std::size_t>> runs;
    for (const auto& [at, len] : detail::touched_pages(data_.get(), size_ * sizeof(T))) {
      // Pages need not hold whole elements: widen to the elements they touch.
      const std::size_t first = at / sizeof(T), last = std::min(size_, (at + len + sizeof(T) - 1) / sizeof(T));
      if (!runs.empty() && runs.back().first + runs.back().second >= first)
        runs.back().second = std::max(runs.back().first + runs.back().second, last) - runs.back().first;
      else
        runs.emplace_back(first, last - first);
    }
    return runs;
  }

  // The first element where this memory and `o` (of the same size) differ,
  // or none; reads only what either has touched.
  std::optional<std::size_t> first_difference(const RowMemory& o) const {
    std::optional<std::size_t> found;
    const auto scan = [&](const RowMemory& x) {
      for (const auto& [first, count] : x.touched_runs()) {
        if (found && *found < first) return;
        const T* a = std::mismatch(data_.get() + first, data_.get() + first + count, o.data_.get() + first).first;
        if (a != data_.get() + first + count) {
          const auto at = static_cast<std::size_t>(a - data_.get());
          if (!found || at < *found) found = at;
          return;
        }
      }
    };
    scan(*this);
    scan(o);
    return found;
  }
  bool same_contents(const RowMemory& o) const {
    return size_ == o.size_ && width_ == o.width_ && !first_difference(o);
  }

  // A hint that rows [first, first + count) are about to be written: their
  // pages are faulted in by one system call instead of one fault per page,
  // which costs short runs more than the writes themselves. Changes nothing
  // else; rows past the end are ignored. Each page is asked for once: a
  // bitmap of the pages already hinted (about to be written, so present from
  // then on) leaves out the rest, since MADV_POPULATE_WRITE walks the page
  // tables of every page it is given, present or not (ResNet-18's ~6,000
  // instructions hinting their rows again cost 17% of its run, issue 31).
  // Not thread-safe: the units call it from the simulation's thread.
  void prefault(std::uint64_t first, std::uint64_t count) {
#if defined(MADV_POPULATE_WRITE)
    if (data_.get_deleter().mapped == 0 || first >= rows()) return;
    count = std::min(count, rows() - first);
    const auto base = reinterpret_cast<std::uintptr_t>(data_.get());  // page-aligned
    const std::size_t p0 = (reinterpret_cast<std::uintptr_t>(row(first)) - base) / kPage;
    const std::size_t p1 = (reinterpret_cast<std::uintptr_t>(row(first + count)) - base + kPage - 1) / kPage;
    if ((p1 - p0) * kPage < kPrefaultBytes) return;  // a few faults cost less than the call
    if (hinted_.empty()) hinted_.assign((size_ * sizeof(T) + 64 * kPage - 1) / (64 * kPage), 0);
    for (std::size_t a = next_page(p0, p1, false); a < p1;) {
      const std::size_t b = next_page(a, p1, true);
      populate(base + a * kPage, base + b * kPage);
      for (std::size_t p = a; p < b; ++p) hinted_[p / 64] |= std::uint64_t{1} << (p % 64);
      a = next_page(b, p1, false);
    }
#else
    (void)first;
    (void)count;
#endif
  }
  // The same for the bytes [p, p + bytes) when they lie in this memory (a
  // DMA's direct pointer into it); nothing otherwise.
  void prefault_bytes(const void* p, std::size_t bytes) {
    const auto at = reinterpret_cast<std::uintptr_t>(p), base = reinterpret_cast<std::uintptr_t>(data_.get());
    const std::size_t row_bytes = width_ * sizeof(T);
    if (row_bytes == 0 || at < base || at - base >= size_ * sizeof(T)) return;
    const std::uint64_t first = (at - base) / row_bytes;
    prefault(first, (at - base + bytes + row_bytes - 1) / row_bytes - first);
  }
  // How many ranges prefault has asked the kernel to populate (a test's view).
  std::size_t prefault_calls() const { return prefault_calls_; }

 private:
#if defined(MADV_POPULATE_WRITE)
  // The first page in [p, end) whose hinted bit is `set`, or end.
  std::size_t next_page(std::size_t p, std::size_t end, bool set) const {
    while (p < end) {
      const std::uint64_t word = set ? hinted_[p / 64] : ~hinted_[p / 64];
      const std::uint64_t rest = word >> (p % 64);
      if (rest != 0) return std::min(end, p + static_cast<std::size_t>(__builtin_ctzll(rest)));
      p = (p / 64 + 1) * 64;
    }
    return end;
  }
  void populate(std::uintptr_t begin, std::uintptr_t end) {
    if (end - begin < kPrefaultBytes) return;  // faults at the writes instead
    // Huge pages for large writes only (fewer TLB misses in the GEMMs that
    // follow): the kernel clears a whole 2 MiB page at its first touch, which
    // costs a short run more than it saves.
    if (const std::uintptr_t h0 = (begin + kHugePage - 1) & ~(kHugePage - 1),
        h1 = end & ~(kHugePage - 1);
        h1 > h0)
      madvise(reinterpret_cast<void*>(h0), h1 - h0, MADV_HUGEPAGE);
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);  // only hints
    ++prefault_calls_;
  }
#endif

  static constexpr std::size_t kMapBytes = std::size_t{1} << 20;
  static constexpr std::size_t kPrefaultBytes = std::size_t{1} << 15;
  static constexpr std::uintptr_t kHugePage = std::uintptr_t{1} << 21;
  static constexpr std::size_t kPage = 4096;
  // Frees calloc's blocks (mapped == 0) and unmaps mappings of `mapped`
  // bytes, whose first page (a guard) precedes the memory.
  struct Free {
    std::size_t mapped;
    void operator()(T* p) const {
      if (!mapped) {
        std::free(p);
        return;
      }
      const std::size_t page = detail::page_bytes();
      char* base = reinterpret_cast<char*>(p) - page;
#ifdef TPU_MEMORIES_ASAN
      // The poisoned slack lies in the memory's last page (unpoisoning all
      // of it would write its whole shadow: a GiB for 8 GiB).
      ASAN_UNPOISON_MEMORY_REGION(base + mapped - 2 * page, page);
#endif
      munmap(base, mapped);
    }
  };
  std::uint64_t width_;
  std::size_t size_;
  std::unique_ptr<T[], Free> data_;
  std::vector<std::uint64_t> hinted_;  // a bit per page prefault has hinted (empty until then)
  std::size_t prefault_calls_ = 0;
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
