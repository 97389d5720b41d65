// AddressManager: LMCache's explicit free list over a virtual address space [0, size)
// (memory_management.AddressManager, ALIGN_BYTES = 4096).
//
//   allocate(n): round n up to the alignment, walk the free blocks from the lowest address and
//                take the first one that is large enough (address-ordered first fit); the rest of
//                that block stays free at [start + aligned, end).
//   free(a, n):  put [a, a+n) back and merge it with the free block that ends at a and/or the one
//                that starts at a+n (immediate coalescing).
//
// Invariants (check_invariants):
//   - free blocks are disjoint, sorted by start, and no two are adjacent (fully coalesced);
//   - total free + total_allocated_size == heap size.
// Because coalescing is immediate and complete, the free list depends only on the set of
// allocated ranges, never on the order in which they were freed.
//
// Threading: none (the model is single-threaded; upstream takes a lock per call).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace kvtwin::model::lmcache {

struct FreeBlock {
  uint64_t start = 0;
  uint64_t size = 0;
  friend bool operator==(const FreeBlock&, const FreeBlock&) = default;
};

class AddressManager {
 public:
  static constexpr uint64_t kAlignBytes = 4096;

  explicit AddressManager(uint64_t size, uint64_t align_bytes = kAlignBytes);

  uint64_t compute_aligned_size(uint64_t raw_size) const {
    return (raw_size + align_ - 1) & ~(align_ - 1);
  }

  // First fit. Returns (start, aligned size), or nullopt when no free block is large enough
  // (upstream raises RuntimeError, which its callers turn into None).
  std::optional<std::pair<uint64_t, uint64_t>> allocate(uint64_t size);
  // REQUIRES: [address, address+size) is allocated (not overlapping any free block).
  void free(uint64_t address, uint64_t size);
  // Grows the space by size (aligned) at its end.
  void sbrk(uint64_t size);

  uint64_t heap_size() const { return size_; }
  uint64_t total_allocated_size() const { return total_allocated_size_; }
  uint64_t free_size() const { return size_ - total_allocated_size_; }
  uint64_t align_bytes() const { return align_; }
  // The free list in address order.
  std::vector<FreeBlock> free_blocks() const;
  size_t num_free_blocks() const { return free_.size(); }
  // LMCache's check_consistency(): coalesced and sizes add up.
  bool check_consistency() const;
  // KVTWIN_CHECKs the invariants above.
  void check_invariants() const;

 private:
  uint64_t size_;
  uint64_t align_;
  std::map<uint64_t, uint64_t> free_;  // start -> size
  uint64_t total_allocated_size_ = 0;
};

}  // namespace kvtwin::model::lmcache
