// Byte buffers for the DMAs' staging and the default host target's held
// writes, kept across transfers and runs on the calling thread. A buffer of
// fresh memory costs a page fault per 4 KiB at its first touch, several times
// the copy itself, and would be paid by every transfer of every run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace tpu::model {

struct ByteBuffer {
  std::unique_ptr<std::uint8_t[]> bytes;
  std::size_t capacity = 0;
  std::uint8_t* data() { return bytes.get(); }
};

class BytePool {
 public:
  // A buffer of at least `n` bytes, contents unspecified.
  static ByteBuffer take(std::size_t n) {
    std::vector<ByteBuffer>& spare = spares();
    // The smallest spare that fits.
    auto best = spare.end();
    for (auto it = spare.begin(); it != spare.end(); ++it)
      if (it->capacity >= n && (best == spare.end() || it->capacity < best->capacity)) best = it;
    if (best != spare.end()) {
      ByteBuffer b = std::move(*best);
      spare.erase(best);
      return b;
    }
    ByteBuffer b;
    b.capacity = std::max<std::size_t>(n, 4096);
    b.bytes.reset(new std::uint8_t[b.capacity]);
    return b;
  }
  // Returns a buffer for later takes; keeps the largest few.
  static void give(ByteBuffer&& b) {
    if (!b.bytes) return;
    std::vector<ByteBuffer>& spare = spares();
    spare.push_back(std::move(b));
    if (spare.size() > kKept) {
      auto smallest = std::min_element(spare.begin(), spare.end(), [](const ByteBuffer& x, const ByteBuffer& y) {
        return x.capacity < y.capacity;
      });
      spare.erase(smallest);
    }
  }

 private:
  static constexpr std::size_t kKept = 4;
  static std::vector<ByteBuffer>& spares() {
    thread_local std::vector<ByteBuffer> spare;
    return spare;
  }
};

}  // namespace tpu::model
