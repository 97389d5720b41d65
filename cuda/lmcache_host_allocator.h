// LmcacheHostAllocator: model/lmcache's AddressManager behind the pinned pool's
// HostSpaceAllocator seam, so the real pool places objects exactly where the reference model
// places them (address-ordered first fit over 4,096-byte-aligned sizes, immediate coalescing;
// LMCache's memory_management.AddressManager). CudaMover uses it by default.
//
// Threading: not thread-safe (neither is the AddressManager).
#pragma once

#include <cstdint>
#include <optional>

#include "cuda/host_space_allocator.h"
#include "model/lmcache/address_manager.h"

namespace kvtwin::cuda {

class LmcacheHostAllocator final : public HostSpaceAllocator {
 public:
  explicit LmcacheHostAllocator(uint64_t capacity,
                                uint64_t align_bytes = model::lmcache::AddressManager::kAlignBytes)
      : manager_(capacity, align_bytes) {}

  std::optional<HostExtent> allocate(uint64_t bytes) override;
  void free(const HostExtent& extent) override;
  uint64_t capacity() const override { return manager_.heap_size(); }
  uint64_t free_bytes() const override { return manager_.free_size(); }

  const model::lmcache::AddressManager& address_manager() const { return manager_; }

 private:
  model::lmcache::AddressManager manager_;
};

}  // namespace kvtwin::cuda
