// HostSpaceAllocator: the seam between the pinned host pool (pinned_pool.h) and whoever decides
// where objects go inside it. The pool owns the bytes (one cudaHostAlloc); the allocator owns
// only offsets in [0, capacity()).
//
// LMCache's allocator (model/lmcache's AddressManager: address-ordered first fit over
// 4,096-byte-aligned sizes with immediate coalescing) sits behind this interface as
// LmcacheHostAllocator (lmcache_host_allocator.h), so the real pool places objects exactly where
// the reference model says. FirstFitAllocator below is the same rule in a few lines, written
// before model/lmcache landed; a property test checks that the two hand out the same extents.
//
// Threading: not thread-safe; one owner (the pool) serialises calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace kvtwin::cuda {

// A reserved range of the pool: [offset, offset + bytes). `bytes` is the reserved (aligned)
// length, which may exceed what was asked for.
struct HostExtent {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

class HostSpaceAllocator {
 public:
  virtual ~HostSpaceAllocator() = default;

  // Reserves at least `bytes` (> 0) bytes, or returns nullopt when no free range is large
  // enough; the caller then evicts and retries, or gives up, as LMCache's allocate() does.
  virtual std::optional<HostExtent> allocate(uint64_t bytes) = 0;

  // Returns a range obtained from allocate() on this allocator and not freed since.
  virtual void free(const HostExtent& extent) = 0;

  virtual uint64_t capacity() const = 0;
  virtual uint64_t free_bytes() const = 0;
};

// Address-ordered first fit with sizes rounded up to `alignment` and immediate coalescing.
//
// Invariant: free_ holds disjoint, non-adjacent ranges (adjacent ones are merged) whose lengths
// sum to free_bytes_; each starts at a multiple of alignment_.
class FirstFitAllocator final : public HostSpaceAllocator {
 public:
  // REQUIRES: alignment is a power of two; capacity is a multiple of alignment.
  explicit FirstFitAllocator(uint64_t capacity, uint64_t alignment = 4096);

  std::optional<HostExtent> allocate(uint64_t bytes) override;
  void free(const HostExtent& extent) override;
  uint64_t capacity() const override { return capacity_; }
  uint64_t free_bytes() const override { return free_bytes_; }

  // Number of free ranges (1 when nothing is allocated).
  size_t num_free_ranges() const { return free_.size(); }
  void check_invariants() const;

 private:
  uint64_t capacity_;
  uint64_t alignment_;
  uint64_t free_bytes_;
  std::map<uint64_t, uint64_t> free_;  // offset -> length, ordered by address
};

}  // namespace kvtwin::cuda
