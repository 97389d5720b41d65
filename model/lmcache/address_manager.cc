#include "model/lmcache/address_manager.h"

#include "model/check.h"

namespace kvtwin::model::lmcache {

AddressManager::AddressManager(uint64_t size, uint64_t align_bytes)
    : size_(size), align_(align_bytes) {
  KVTWIN_CHECK(align_ > 0 && (align_ & (align_ - 1)) == 0) << "alignment " << align_;
  // Upstream seeds the list with one block [0, size) even when size is 0.
  if (size_ > 0) free_.emplace(0, size_);
}

std::optional<std::pair<uint64_t, uint64_t>> AddressManager::allocate(uint64_t size) {
  uint64_t aligned = compute_aligned_size(size);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < aligned) continue;
    uint64_t start = it->first;
    uint64_t block_size = it->second;
    free_.erase(it);
    if (block_size > aligned) free_.emplace(start + aligned, block_size - aligned);
    total_allocated_size_ += aligned;
    return std::make_pair(start, aligned);
  }
  return std::nullopt;
}

void AddressManager::free(uint64_t address, uint64_t size) {
  KVTWIN_CHECK(size > 0) << "free of an empty range at " << address;
  KVTWIN_CHECK_LE(address + size, size_);
  auto succ = free_.lower_bound(address);
  auto prev = succ == free_.begin() ? free_.end() : std::prev(succ);
  if (succ != free_.end()) {
    KVTWIN_CHECK(address + size <= succ->first)
        << "freed range [" << address << ", " << address + size << ") overlaps free block at "
        << succ->first;
  }
  if (prev != free_.end()) {
    KVTWIN_CHECK(prev->first + prev->second <= address)
        << "freed range at " << address << " overlaps free block at " << prev->first;
  }
  bool merge_prev = prev != free_.end() && prev->first + prev->second == address;
  bool merge_succ = succ != free_.end() && address + size == succ->first;
  if (merge_prev && merge_succ) {
    prev->second += size + succ->second;
    free_.erase(succ);
  } else if (merge_prev) {
    prev->second += size;
  } else if (merge_succ) {
    uint64_t succ_size = succ->second;
    free_.erase(succ);
    free_.emplace(address, size + succ_size);
  } else {
    free_.emplace(address, size);
  }
  KVTWIN_CHECK_LE(size, total_allocated_size_);
  total_allocated_size_ -= size;
}

void AddressManager::sbrk(uint64_t size) {
  size = compute_aligned_size(size);
  if (size == 0) return;
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == size_) {
      last->second += size;
      size_ += size;
      return;
    }
  }
  free_.emplace(size_, size);
  size_ += size;
}

std::vector<FreeBlock> AddressManager::free_blocks() const {
  std::vector<FreeBlock> out;
  out.reserve(free_.size());
  for (const auto& [start, size] : free_) out.push_back({start, size});
  return out;
}

bool AddressManager::check_consistency() const {
  uint64_t total_free = 0;
  uint64_t prev_end = 0;
  bool first = true;
  for (const auto& [start, size] : free_) {
    if (!first && prev_end >= start) return false;  // overlapping or adjacent (not coalesced)
    prev_end = start + size;
    first = false;
    total_free += size;
  }
  return total_free + total_allocated_size_ == size_;
}

void AddressManager::check_invariants() const {
  uint64_t total_free = 0;
  uint64_t prev_end = 0;
  bool first = true;
  for (const auto& [start, size] : free_) {
    KVTWIN_CHECK(size > 0) << "empty free block at " << start;
    KVTWIN_CHECK(first || prev_end < start)
        << "free blocks overlap or touch at " << start << " (previous ends at " << prev_end << ")";
    KVTWIN_CHECK_LE(start + size, size_);
    prev_end = start + size;
    first = false;
    total_free += size;
  }
  KVTWIN_CHECK_EQ(total_free + total_allocated_size_, size_);
}

}  // namespace kvtwin::model::lmcache
