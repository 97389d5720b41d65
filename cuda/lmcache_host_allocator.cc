#include "cuda/lmcache_host_allocator.h"

#include "model/check.h"

namespace kvtwin::cuda {

std::optional<HostExtent> LmcacheHostAllocator::allocate(uint64_t bytes) {
  KVTWIN_CHECK(bytes > 0) << "empty allocation";
  const auto got = manager_.allocate(bytes);
  if (!got) return std::nullopt;
  return HostExtent{got->first, got->second};
}

void LmcacheHostAllocator::free(const HostExtent& extent) {
  manager_.free(extent.offset, extent.bytes);
}

}  // namespace kvtwin::cuda
