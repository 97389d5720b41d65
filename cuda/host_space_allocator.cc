#include "cuda/host_space_allocator.h"

#include <iterator>

#include "model/check.h"

namespace kvtwin::cuda {

FirstFitAllocator::FirstFitAllocator(uint64_t capacity, uint64_t alignment)
    : capacity_(capacity), alignment_(alignment), free_bytes_(capacity) {
  KVTWIN_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0) << "alignment " << alignment;
  KVTWIN_CHECK(capacity % alignment == 0) << "capacity " << capacity << " % " << alignment;
  if (capacity > 0) free_.emplace(0, capacity);
}

std::optional<HostExtent> FirstFitAllocator::allocate(uint64_t bytes) {
  KVTWIN_CHECK(bytes > 0) << "empty allocation";
  const uint64_t want = (bytes + alignment_ - 1) & ~(alignment_ - 1);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < want) continue;
    const HostExtent got{it->first, want};
    const uint64_t rest = it->second - want;
    free_.erase(it);
    if (rest > 0) free_.emplace(got.offset + want, rest);
    free_bytes_ -= want;
    return got;
  }
  return std::nullopt;
}

void FirstFitAllocator::free(const HostExtent& extent) {
  KVTWIN_CHECK(extent.bytes > 0 && extent.offset % alignment_ == 0 &&
               extent.bytes % alignment_ == 0 && extent.offset + extent.bytes <= capacity_)
      << "bad extent " << extent.offset << "+" << extent.bytes;
  uint64_t start = extent.offset;
  uint64_t length = extent.bytes;
  auto next = free_.lower_bound(start);
  KVTWIN_CHECK(next == free_.end() || start + length <= next->first) << "double free";
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    KVTWIN_CHECK_LE(prev->first + prev->second, start) << "double free";
    if (prev->first + prev->second == start) {  // merge with the range before
      start = prev->first;
      length += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && start + length == next->first) {  // and with the one after
    length += next->second;
    free_.erase(next);
  }
  free_.emplace(start, length);
  free_bytes_ += extent.bytes;
}

void FirstFitAllocator::check_invariants() const {
  uint64_t sum = 0;
  uint64_t end = 0;
  bool first = true;
  for (const auto& [offset, length] : free_) {
    KVTWIN_CHECK(length > 0 && offset % alignment_ == 0 && offset + length <= capacity_);
    KVTWIN_CHECK(first || offset > end) << "free ranges overlap or touch at " << offset;
    end = offset + length;
    first = false;
    sum += length;
  }
  KVTWIN_CHECK_EQ(sum, free_bytes_);
}

}  // namespace kvtwin::cuda
