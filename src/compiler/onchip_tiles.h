// The on-chip compiler's weight memory image (onchip_compiler.h): the
// distinct N x N tiles the lowering asks for, each stored once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace tpu::compiler::onchip {

// The weight memory's image: N x N tiles, each distinct tile once. The set
// holds tile indices, hashed and compared by their bytes in the image (no
// second copy of the weights as keys). An ordered map keyed by the tiles'
// bytes took 60% of the compile of ResNet-18 on small4 (733 k tiles), most
// of it comparing keys.
class TileStore {
 public:
  explicit TileStore(std::uint64_t n) : bytes_(n * n) {}
  TileStore(const TileStore& o) : bytes_(o.bytes_), weights_(o.weights_) { index_all(); }
  TileStore& operator=(const TileStore& o) {
    if (this != &o) {
      bytes_ = o.bytes_;
      weights_ = o.weights_;
      index_all();
    }
    return *this;
  }
  // The index of tile `t` (N x N int8, row-major), added when new.
  std::uint64_t add(const std::vector<std::int8_t>& t) {
    const std::uint64_t index = count();
    weights_.insert(weights_.end(), t.begin(), t.end());
    const auto [it, inserted] = set_.insert(index);
    if (!inserted) weights_.resize(index * bytes_);  // an equal tile exists: taken back
    return *it;
  }
  std::uint64_t count() const { return bytes_ ? weights_.size() / bytes_ : 0; }
  std::vector<std::int8_t> take() {
    set_.clear();
    return std::move(weights_);
  }

 private:
  std::string_view tile_bytes(std::uint64_t tile) const {
    return {reinterpret_cast<const char*>(weights_.data()) + tile * bytes_, bytes_};
  }
  struct Hash {
    const TileStore* store;
    std::size_t operator()(std::uint64_t t) const { return std::hash<std::string_view>()(store->tile_bytes(t)); }
  };
  struct Equal {
    const TileStore* store;
    bool operator()(std::uint64_t a, std::uint64_t b) const { return store->tile_bytes(a) == store->tile_bytes(b); }
  };
  void index_all() {
    set_.clear();
    set_.reserve(count());
    for (std::uint64_t t = 0; t < count(); ++t) set_.insert(t);
  }
  std::size_t bytes_;
  std::vector<std::int8_t> weights_;
  // Points at this store: copies re-index (above), and there are no moves.
  std::unordered_set<std::uint64_t, Hash, Equal> set_{0, Hash{this}, Equal{this}};
};

}  // namespace tpu::compiler::onchip
