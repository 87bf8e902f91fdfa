// The on-chip compiler's weight memory image (onchip_compiler.h): the
// distinct N x N tiles the lowering asks for, each stored once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tpu::compiler::onchip {

// The weight memory's image: N x N tiles, each distinct tile once, kept in
// slabs of whole tiles that never move, indexed by their bytes (views into
// the slabs: no second copy of the weights as keys). A new tile is looked up
// before it is stored, and stored by one copy into the last slab; take()
// joins the slabs once. An ordered map keyed by the tiles' bytes took 60% of
// the compile of ResNet-18 on small4 (733 k tiles), most of it comparing
// keys; one growing vector, appended to and cut back on a repeat, took 7%
// of a whole ResNet-18 run at batch 8 on tpuv1 (perf, 2-core AMD EPYC: its
// 19 MB copied as it grew, and the page faults of every new copy).
class TileStore {
 public:
  explicit TileStore(std::uint64_t n)
      : bytes_(n * n), per_slab_(bytes_ ? std::max<std::size_t>(1, kSlabBytes / bytes_) : 1) {}
  TileStore(const TileStore& o) : TileStore(0) { *this = o; }
  TileStore& operator=(const TileStore& o) {
    if (this != &o) {
      bytes_ = o.bytes_;
      per_slab_ = o.per_slab_;
      slabs_.clear();
      index_.clear();
      count_ = 0;
      for (std::uint64_t t = 0; t < o.count_; ++t) append(o.tile_bytes(t));
    }
    return *this;
  }
  // The index of tile `t` (N x N int8, row-major), added when new.
  std::uint64_t add(const std::vector<std::int8_t>& t) {
    const std::string_view key(reinterpret_cast<const char*>(t.data()), t.size());
    if (const auto it = index_.find(key); it != index_.end()) return it->second;
    return append(key);
  }
  std::uint64_t count() const { return count_; }
  // The image, tile after tile; the store is empty afterwards.
  std::vector<std::int8_t> take() {
    std::vector<std::int8_t> out(count_ * bytes_);
    for (std::uint64_t t = 0; t < count_; ++t)
      std::memcpy(out.data() + t * bytes_, tile_bytes(t).data(), bytes_);
    index_.clear();
    slabs_.clear();
    count_ = 0;
    return out;
  }

 private:
  static constexpr std::size_t kSlabBytes = std::size_t{1} << 20;
  std::string_view tile_bytes(std::uint64_t t) const {
    return {slabs_[t / per_slab_].get() + (t % per_slab_) * bytes_, bytes_};
  }
  std::uint64_t append(std::string_view bytes) {
    if (count_ % per_slab_ == 0) slabs_.push_back(std::make_unique<char[]>(per_slab_ * bytes_));
    const std::uint64_t t = count_++;
    char* at = slabs_.back().get() + (t % per_slab_) * bytes_;
    std::memcpy(at, bytes.data(), std::min(bytes.size(), bytes_));
    index_.emplace(tile_bytes(t), t);
    return t;
  }
  std::size_t bytes_;
  std::size_t per_slab_;
  std::uint64_t count_ = 0;
  std::vector<std::unique_ptr<char[]>> slabs_;
  std::unordered_map<std::string_view, std::uint64_t> index_;
};

}  // namespace tpu::compiler::onchip
