// PinnedPool: LMCache's local CPU memory as real bytes. One cudaHostAlloc of the configured size
// (LMCache's max_local_cpu_size) at start, never grown; objects are carved out of it by a
// HostSpaceAllocator, which owns placement (LmcacheHostAllocator: model/lmcache's AddressManager).
// Pinned and mapped, so every object is both a DMA target for the copy engines (staged path) and
// directly addressable by kernels (zero-copy path).
//
// Ownership: the pool owns the buffer and the allocator; a PinnedBlock is a view that stays valid
// until freed or until the pool is destroyed.
// Threading: not thread-safe (the allocator is not).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "cuda/cuda_handles.h"
#include "cuda/host_space_allocator.h"
#include "cuda/status.h"

namespace kvtwin::cuda {

struct PinnedBlock {
  HostExtent extent;          // where the allocator placed it
  uint8_t* host = nullptr;    // host address of its first byte
  uint8_t* device = nullptr;  // device alias of host (zero-copy)
};

class PinnedPool {
 public:
  PinnedPool() = default;
  // Pins `bytes` of host memory and hands placement to `allocator`.
  // REQUIRES (KVTWIN_CHECK): allocator->capacity() <= bytes.
  static Status create(uint64_t bytes, std::unique_ptr<HostSpaceAllocator> allocator,
                       PinnedPool* out);

  // A block of at least `bytes`, or nullopt when the allocator finds no room (the caller evicts
  // or counts a failed store, as LMCache does).
  std::optional<PinnedBlock> allocate(uint64_t bytes);
  void free(const PinnedBlock& block);

  // The block at [offset, offset + bytes) without allocating it: for callers whose own allocator
  // already placed the object (model/lmcache's TensorMemoryAllocator hands out MemoryObj
  // addresses in the same [0, capacity) space), so the real bytes sit at the model's address.
  // REQUIRES (KVTWIN_CHECK): the range lies inside the pool.
  PinnedBlock view(uint64_t offset, uint64_t bytes) const;

  uint64_t capacity() const { return allocator_ ? allocator_->capacity() : 0; }
  uint64_t free_bytes() const { return allocator_ ? allocator_->free_bytes() : 0; }
  const PinnedBuffer& buffer() const { return buffer_; }

 private:
  PinnedBuffer buffer_;
  std::unique_ptr<HostSpaceAllocator> allocator_;
};

}  // namespace kvtwin::cuda
