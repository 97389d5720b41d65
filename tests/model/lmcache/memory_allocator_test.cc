// AddressManager and TensorMemoryAllocator: first fit, 4 KiB alignment, coalescing, batched
// allocation and free, LMCache's ref/pin counting and the __del__ reclamation of PyRefs.
#include "model/lmcache/memory_allocator.h"

#include <gtest/gtest.h>

#include "model/check.h"

namespace kvtwin::model::lmcache {
namespace {

TEST(AddressManager, SizesRoundUpToFourKiBAndFirstFitTakesTheLowestBlock) {
  AddressManager am(64 * 1024);
  auto a = am.allocate(5120);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, std::make_pair(uint64_t{0}, uint64_t{8192}));
  auto b = am.allocate(4096);
  auto c = am.allocate(1);
  EXPECT_EQ(b->first, 8192u);
  EXPECT_EQ(c->first, 12288u);
  am.free(0, 8192);  // hole [0, 8K) before b
  auto d = am.allocate(4096);
  EXPECT_EQ(d->first, 0u);  // lowest address that fits, not the big tail
  am.check_invariants();
}

TEST(AddressManager, FreeCoalescesWithPredecessorSuccessorAndBoth) {
  AddressManager am(5 * 4096);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(am.allocate(4096)->first, uint64_t(i) * 4096);
  am.free(1 * 4096, 4096);
  am.free(3 * 4096, 4096);
  EXPECT_EQ(am.num_free_blocks(), 2u);
  am.free(2 * 4096, 4096);  // merges with both neighbours
  EXPECT_EQ(am.free_blocks(), (std::vector<FreeBlock>{{4096, 3 * 4096}}));
  am.free(0, 4096);         // successor
  am.free(4 * 4096, 4096);  // predecessor
  EXPECT_EQ(am.free_blocks(), (std::vector<FreeBlock>{{0, 5 * 4096}}));
  EXPECT_EQ(am.total_allocated_size(), 0u);
}

TEST(AddressManager, FreeListDependsOnlyOnWhatIsAllocated) {
  AddressManager a(8 * 4096), b(8 * 4096);
  for (int i = 0; i < 8; ++i) {
    a.allocate(4096);
    b.allocate(4096);
  }
  for (int i : {6, 1, 3, 2, 7}) a.free(uint64_t(i) * 4096, 4096);
  for (int i : {2, 3, 7, 6, 1}) b.free(uint64_t(i) * 4096, 4096);
  EXPECT_EQ(a.free_blocks(), b.free_blocks());
}

TEST(AddressManager, AllocationFailsWhenNoSingleBlockIsLargeEnough) {
  AddressManager am(4 * 4096);
  for (int i = 0; i < 4; ++i) am.allocate(4096);
  am.free(0, 4096);
  am.free(2 * 4096, 4096);
  EXPECT_EQ(am.free_size(), 2u * 4096);
  EXPECT_FALSE(am.allocate(8192));  // two pages free, not adjacent
}

TEST(AddressManager, SbrkGrowsTheLastFreeBlock) {
  AddressManager am(4096);
  am.sbrk(100);
  EXPECT_EQ(am.heap_size(), 8192u);
  EXPECT_EQ(am.free_blocks(), (std::vector<FreeBlock>{{0, 8192}}));
}

TEST(TensorMemoryAllocator, BatchedAllocateTakesOneContiguousBlockSplitInAlignedUnits) {
  TensorMemoryAllocator a(64 * 1024);
  PyRef first = a.allocate(Shape{1024}, KvDtype::kUint8, MemoryFormat::kKv2LTD);
  std::vector<PyRef> objs =
      a.batched_allocate(Shape{16, 2, 48}, KvDtype::kHalf, 3, MemoryFormat::kKvT2D);
  ASSERT_EQ(objs.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(objs[i]->address, 4096u + 4096u * i);
    EXPECT_EQ(objs[i]->phy_size, 4096u);
    EXPECT_EQ(objs[i]->size, 3072u);
    EXPECT_EQ(objs[i]->byte_len, 4096u);  // a chunk of the aligned block
  }
  EXPECT_EQ(first->byte_len, 1024u);
  // Three objects need one 12 KiB block; with only scattered pages it fails.
  EXPECT_TRUE(
      a.batched_allocate(Shape{16, 2, 48}, KvDtype::kHalf, 13, MemoryFormat::kKvT2D).empty());
  a.check_invariants();
}

TEST(TensorMemoryAllocator, BatchedFreeMergesAdjacentObjects) {
  TensorMemoryAllocator a(8 * 4096);
  std::vector<PyRef> objs =
      a.batched_allocate(Shape{4096}, KvDtype::kUint8, 4, MemoryFormat::kKvT2D);
  a.batched_free({objs[2].id(), objs[0].id(), objs[1].id()});
  EXPECT_EQ(a.address_manager().free_blocks(),
            (std::vector<FreeBlock>{{0, 3 * 4096}, {4 * 4096, 4 * 4096}}));
  EXPECT_FALSE(objs[0]->valid);
  EXPECT_TRUE(objs[3]->valid);
  a.batched_free({objs[1].id()});  // already invalid: ignored
  a.check_invariants();
}

TEST(TensorMemoryAllocator, RefCountDownToZeroFreesUnlessPinnedAndUnpinFreesAfterwards) {
  TensorMemoryAllocator a(4 * 4096);
  PyRef o = a.allocate(Shape{4096}, KvDtype::kUint8, MemoryFormat::kKv2LTD);
  EXPECT_EQ(o->ref_count, 1);
  EXPECT_TRUE(o->can_evict());
  a.ref_count_up(o.id());
  EXPECT_FALSE(o->can_evict());
  a.ref_count_down(o.id());
  a.pin(o.id());
  EXPECT_FALSE(o->can_evict());
  a.ref_count_down(o.id());  // ref 0 but pinned: kept
  EXPECT_TRUE(o->valid);
  a.unpin(o.id());  // both 0: freed
  EXPECT_FALSE(o->valid);
  EXPECT_EQ(a.total_allocated_size(), 0u);
  a.ref_count_down(o.id());  // "double free": clamped, no second free
  EXPECT_EQ(o->ref_count, 0);
  a.check_invariants();
}

TEST(TensorMemoryAllocator, DroppingTheLastPythonReferenceReclaimsALeakedObject) {
  TensorMemoryAllocator a(4 * 4096);
  {
    PyRef o = a.allocate(Shape{4096}, KvDtype::kUint8, MemoryFormat::kKv2LTD);
    a.ref_count_up(o.id());  // leaked LMCache references
    PyRef copy = o;
    EXPECT_EQ(a.num_active_allocations(), 1u);
  }
  EXPECT_EQ(a.num_active_allocations(), 0u);
  EXPECT_EQ(a.num_reclaimed_by_del(), 1u);
  // The slot is reused only now.
  PyRef n = a.allocate(Shape{4096}, KvDtype::kUint8, MemoryFormat::kKv2LTD);
  EXPECT_EQ(n->address, 0u);
  a.check_invariants();
}

TEST(TensorMemoryAllocator, FreedObjectsStayReadableWhileReferenced) {
  TensorMemoryAllocator a(4096);
  PyRef o = a.allocate(Shape{100}, KvDtype::kUint8, MemoryFormat::kKv2LTD);
  a.ref_count_down(o.id());
  EXPECT_FALSE(o->valid);
  EXPECT_EQ(o->size, 100u);
  EXPECT_EQ(a.num_reclaimed_by_del(), 0u);
}

}  // namespace
}  // namespace kvtwin::model::lmcache
