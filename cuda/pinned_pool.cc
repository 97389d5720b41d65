#include "cuda/pinned_pool.h"

#include <utility>

#include "model/check.h"

namespace kvtwin::cuda {

Status PinnedPool::create(uint64_t bytes, std::unique_ptr<HostSpaceAllocator> allocator,
                          PinnedPool* out) {
  KVTWIN_CHECK(allocator != nullptr);
  KVTWIN_CHECK_LE(allocator->capacity(), bytes) << "allocator larger than the pool";
  PinnedPool p;
  KVTWIN_RETURN_IF_ERROR(PinnedBuffer::allocate(bytes, &p.buffer_));
  p.allocator_ = std::move(allocator);
  *out = std::move(p);
  return Status();
}

std::optional<PinnedBlock> PinnedPool::allocate(uint64_t bytes) {
  KVTWIN_CHECK(allocator_ != nullptr) << "pool not created";
  const std::optional<HostExtent> e = allocator_->allocate(bytes);
  if (!e) return std::nullopt;
  PinnedBlock b;
  b.extent = *e;
  b.host = buffer_.host() + e->offset;
  b.device = buffer_.device_alias(b.host);
  return b;
}

void PinnedPool::free(const PinnedBlock& block) {
  KVTWIN_CHECK(allocator_ != nullptr) << "pool not created";
  KVTWIN_CHECK(block.host == buffer_.host() + block.extent.offset) << "block not from this pool";
  allocator_->free(block.extent);
}

PinnedBlock PinnedPool::view(uint64_t offset, uint64_t bytes) const {
  KVTWIN_CHECK(offset + bytes <= buffer_.size() && offset + bytes >= offset)
      << "[" << offset << ", +" << bytes << ") outside a pool of " << buffer_.size();
  PinnedBlock b;
  b.extent = HostExtent{offset, bytes};
  b.host = buffer_.host() + offset;
  b.device = buffer_.device_alias(b.host);
  return b;
}

}  // namespace kvtwin::cuda
