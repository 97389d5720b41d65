#include "model/vllm/free_kv_cache_block_queue.h"

#include <gtest/gtest.h>

#include "model/check.h"

namespace kvtwin::model::vllm {
namespace {

using Ids = std::vector<BlockId>;

TEST(FreeKVCacheBlockQueue, StartsWithEveryBlockInIdOrder) {
  FreeKVCacheBlockQueue q(5);
  EXPECT_EQ(q.num_free_blocks(), 5);
  EXPECT_EQ(q.get_all_free_blocks(), (Ids{0, 1, 2, 3, 4}));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, PopleftTakesTheHeadAndAppendGoesToTheTail) {
  FreeKVCacheBlockQueue q(4);
  EXPECT_EQ(q.popleft(), 0);
  EXPECT_EQ(q.popleft(), 1);
  q.append(0);
  EXPECT_EQ(q.get_all_free_blocks(), (Ids{2, 3, 0}));
  EXPECT_FALSE(q.contains(1));
  EXPECT_TRUE(q.contains(0));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, PopleftNReturnsHeadFirstAndRelinksTheRest) {
  FreeKVCacheBlockQueue q(6);
  Ids out;
  q.popleft_n(0, &out);
  EXPECT_TRUE(out.empty());
  q.popleft_n(4, &out);
  EXPECT_EQ(out, (Ids{0, 1, 2, 3}));
  EXPECT_EQ(q.get_all_free_blocks(), (Ids{4, 5}));
  q.popleft_n(2, &out);
  EXPECT_EQ(q.num_free_blocks(), 0);
  EXPECT_TRUE(q.get_all_free_blocks().empty());
  q.check_invariants();
  q.append_n(Ids{5, 1});
  EXPECT_EQ(q.get_all_free_blocks(), (Ids{5, 1}));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, RemoveUnlinksFromTheMiddleHeadAndTail) {
  FreeKVCacheBlockQueue q(5);
  q.remove(2);
  q.remove(0);
  q.remove(4);
  EXPECT_EQ(q.get_all_free_blocks(), (Ids{1, 3}));
  EXPECT_EQ(q.num_free_blocks(), 2);
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, AppendNKeepsTheGivenOrder) {
  FreeKVCacheBlockQueue q(5);
  Ids out;
  q.popleft_n(5, &out);
  q.append_n(Ids{3, 0, 4});
  q.append(1);
  EXPECT_EQ(q.get_all_free_blocks(), (Ids{3, 0, 4, 1}));
  q.check_invariants();
}

TEST(FreeKVCacheBlockQueue, PeekFrontShowsTheHeadBlocksWithoutRemovingThem) {
  FreeKVCacheBlockQueue q(6);
  q.remove(1);
  EXPECT_EQ(q.popleft(), 0);
  BlockId out[3] = {-7, -7, -7};
  ASSERT_EQ(q.peek_front(out), 3u);
  EXPECT_EQ(std::vector<BlockId>(out, out + 3), (std::vector<BlockId>{2, 3, 4}));
  EXPECT_EQ(q.num_free_blocks(), 4);
  EXPECT_EQ(q.get_all_free_blocks(), (std::vector<BlockId>{2, 3, 4, 5}));
  BlockId many[8];
  EXPECT_EQ(q.peek_front(many), 4u);  // the queue is shorter than the request
}

TEST(FreeKVCacheBlockQueue, PoppingFromAnEmptyQueueIsABug) {
  FreeKVCacheBlockQueue q(1);
  q.popleft();
  EXPECT_THROW(q.popleft(), CheckFailedError);
  Ids out;
  EXPECT_THROW(q.popleft_n(1, &out), CheckFailedError);
}

TEST(FreeKVCacheBlockQueue, AppendingAQueuedBlockOrRemovingAFreeOneIsABug) {
  FreeKVCacheBlockQueue q(3);
  EXPECT_THROW(q.append(1), CheckFailedError);
  q.remove(1);
  EXPECT_THROW(q.remove(1), CheckFailedError);
}

}  // namespace
}  // namespace kvtwin::model::vllm
