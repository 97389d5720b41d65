#include "cuda/host_space_allocator.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <vector>

#include "cuda/lmcache_host_allocator.h"
#include "model/check.h"

namespace kvtwin::cuda {
namespace {

TEST(FirstFitAllocator, RoundsUpToTheAlignmentAndTakesTheLowestFit) {
  FirstFitAllocator a(16 * 4096);
  const auto x = a.allocate(1);
  const auto y = a.allocate(4097);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->offset, 0u);
  EXPECT_EQ(x->bytes, 4096u);
  EXPECT_EQ(y->offset, 4096u);
  EXPECT_EQ(y->bytes, 8192u);
  a.free(*x);
  const auto z = a.allocate(4096);  // the hole at 0 comes first
  ASSERT_TRUE(z);
  EXPECT_EQ(z->offset, 0u);
  EXPECT_EQ(a.free_bytes(), 13u * 4096);
}

TEST(FirstFitAllocator, ReturnsNothingWhenNoHoleIsLargeEnough) {
  FirstFitAllocator a(3 * 4096);
  const auto x = a.allocate(4096);
  const auto y = a.allocate(4096);
  const auto z = a.allocate(4096);
  ASSERT_TRUE(x && y && z);
  EXPECT_FALSE(a.allocate(1));
  a.free(*x);
  a.free(*z);  // two one-page holes, not adjacent: fragmentation, as in LMCache
  EXPECT_EQ(a.free_bytes(), 2u * 4096);
  EXPECT_FALSE(a.allocate(2 * 4096));
  EXPECT_TRUE(a.allocate(4096));
}

TEST(FirstFitAllocator, CoalescesNeighboursOnFree) {
  FirstFitAllocator a(3 * 4096);
  const auto x = a.allocate(4096);
  const auto y = a.allocate(4096);
  const auto z = a.allocate(4096);
  a.free(*x);
  a.free(*z);
  EXPECT_EQ(a.num_free_ranges(), 2u);
  a.free(*y);
  EXPECT_EQ(a.num_free_ranges(), 1u);
  EXPECT_TRUE(a.allocate(3 * 4096));
}

TEST(FirstFitAllocator, RejectsADoubleFree) {
  FirstFitAllocator a(4 * 4096);
  const auto x = a.allocate(4096);
  a.free(*x);
  EXPECT_THROW(a.free(*x), model::CheckFailedError);
}

RC_GTEST_PROP(FirstFitAllocator, LiveExtentsNeverOverlapAndFreeingAllRestoresOneRange, ()) {
  const uint64_t pages = *rc::gen::inRange<uint64_t>(1, 64);
  FirstFitAllocator a(pages * 4096);
  std::vector<HostExtent> live;
  const auto ops = *rc::gen::container<std::vector<std::pair<bool, uint64_t>>>(
      rc::gen::pair(rc::gen::arbitrary<bool>(), rc::gen::inRange<uint64_t>(1, 5 * 4096)));
  for (const auto& [alloc, size] : ops) {
    if (alloc || live.empty()) {
      if (auto e = a.allocate(size)) {
        RC_ASSERT(e->bytes >= size && e->offset + e->bytes <= a.capacity());
        for (const HostExtent& o : live) {
          RC_ASSERT(e->offset + e->bytes <= o.offset || o.offset + o.bytes <= e->offset);
        }
        live.push_back(*e);
      }
    } else {
      const size_t i = size % live.size();
      a.free(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    a.check_invariants();
  }
  for (const HostExtent& e : live) a.free(e);
  RC_ASSERT(a.free_bytes() == a.capacity());
  RC_ASSERT(a.num_free_ranges() == 1u);
}

TEST(LmcacheHostAllocator, PlacesObjectsWithLmcachesAddressManager) {
  LmcacheHostAllocator a(4 * 4096);
  const auto x = a.allocate(100);
  const auto y = a.allocate(5000);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->offset, 0u);
  EXPECT_EQ(x->bytes, 4096u);
  EXPECT_EQ(y->offset, 4096u);
  EXPECT_EQ(y->bytes, 8192u);
  EXPECT_FALSE(a.allocate(8192));
  a.free(*x);
  EXPECT_EQ(a.free_bytes(), 2u * 4096);
  EXPECT_EQ(a.address_manager().num_free_blocks(), 2u);
  a.address_manager().check_invariants();
}

// The stand-in and LMCache's allocator implement one rule: on any sequence of allocations and
// frees they hand out the same extents.
RC_GTEST_PROP(LmcacheHostAllocator, AgreesWithFirstFitOnEverySequence, ()) {
  const uint64_t pages = *rc::gen::inRange<uint64_t>(1, 64);
  FirstFitAllocator ff(pages * 4096);
  LmcacheHostAllocator lm(pages * 4096);
  std::vector<HostExtent> live;
  const auto ops = *rc::gen::container<std::vector<std::pair<bool, uint64_t>>>(
      rc::gen::pair(rc::gen::arbitrary<bool>(), rc::gen::inRange<uint64_t>(1, 5 * 4096)));
  for (const auto& [alloc, size] : ops) {
    if (alloc || live.empty()) {
      const auto a = ff.allocate(size);
      const auto b = lm.allocate(size);
      RC_ASSERT(a.has_value() == b.has_value());
      if (a) {
        RC_ASSERT(a->offset == b->offset && a->bytes == b->bytes);
        live.push_back(*a);
      }
    } else {
      const size_t i = size % live.size();
      ff.free(live[i]);
      lm.free(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    }
    RC_ASSERT(ff.free_bytes() == lm.free_bytes());
  }
}

}  // namespace
}  // namespace kvtwin::cuda
