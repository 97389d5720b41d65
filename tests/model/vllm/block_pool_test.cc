#include "model/vllm/block_pool.h"

#include <gtest/gtest.h>

#include "model/check.h"
#include "model/vllm/request_block_hasher.h"

namespace kvtwin::model::vllm {
namespace {

using Ids = std::vector<BlockId>;

RequestBlockHasher make_hasher(int block_size) {
  return RequestBlockHasher(block_size,
                            BlockHasher(HashFn::kSha256Cbor, none_hash(HashFn::kSha256Cbor, "0")));
}

std::vector<TokenId> tokens(int n, int start = 0) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(start + i);
  return t;
}

BlockPool make_pool(int n, bool events = false, bool int_hashes = false) {
  return BlockPool(BlockPoolOptions{n, true, 4, events, int_hashes});
}

TEST(BlockPool, BlockZeroIsTheNullBlockAndNeverFree) {
  BlockPool pool = make_pool(5);
  EXPECT_EQ(pool.null_block(), 0);
  EXPECT_TRUE(pool.block(0).is_null);
  EXPECT_EQ(pool.get_num_free_blocks(), 4);
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (Ids{1, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(pool.get_usage(), 0.0);
  pool.check_invariants();
}

TEST(BlockPool, FreedBlocksGoToTheTailInTheGivenOrder) {
  BlockPool pool = make_pool(6);
  Ids a;
  pool.get_new_blocks(3, &a);
  EXPECT_EQ(a, (Ids{1, 2, 3}));
  pool.free_blocks_reversed(a);
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (Ids{4, 5, 3, 2, 1}));
  pool.check_invariants();
}

TEST(BlockPool, UsageCountsEveryBlockButTheNullBlock) {
  BlockPool pool = make_pool(5);
  Ids a;
  pool.get_new_blocks(1, &a);
  EXPECT_DOUBLE_EQ(pool.get_usage(), 0.25);
  pool.get_new_blocks(3, &a);
  EXPECT_DOUBLE_EQ(pool.get_usage(), 1.0);
  EXPECT_THROW(pool.get_new_blocks(1, &a), CheckFailedError);
}

TEST(BlockPool, CachedBlocksStayFindableUntilTheirReuseEvictsThem) {
  RequestBlockHasher hasher = make_hasher(4);
  Request req("r", tokens(8), {}, &hasher);
  BlockPool pool = make_pool(3, /*events=*/true);
  Ids blocks;
  pool.get_new_blocks(2, &blocks);
  pool.cache_full_blocks(req, blocks, 0, 2, 4, 0);
  pool.free_blocks_reversed(blocks);
  // Freed but cached: still found.
  const int groups[1] = {0};
  BlockId hit[1];
  ASSERT_TRUE(pool.get_cached_block(req.block_hashes()[0].bytes(), groups, hit));
  EXPECT_EQ(hit[0], 1);
  pool.check_invariants();
  (void)pool.take_events();
  // Reusing the queue head (block 2, freed first) evicts it, and only it.
  Ids next;
  pool.get_new_blocks(1, &next);
  EXPECT_EQ(next, (Ids{2}));
  EXPECT_FALSE(pool.get_cached_block(req.block_hashes()[1].bytes(), groups, hit));
  EXPECT_TRUE(pool.get_cached_block(req.block_hashes()[0].bytes(), groups, hit));
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 1u);
  const auto& removed = std::get<BlockRemoved>(events[0]);
  ASSERT_EQ(removed.block_hashes.size(), 1u);
  EXPECT_EQ(removed.block_hashes[0].bytes,
            std::vector<uint8_t>(req.block_hashes()[1].bytes().begin(),
                                 req.block_hashes()[1].bytes().end()));
  pool.check_invariants();
}

TEST(BlockPool, TouchingAFreeCachedBlockTakesItOutOfTheQueue) {
  BlockPool pool = make_pool(4);
  Ids a;
  pool.get_new_blocks(2, &a);
  pool.free_blocks(a);
  pool.touch(Ids{2});
  EXPECT_EQ(pool.ref_cnt(2), 1);
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (Ids{3, 1}));
  pool.touch(Ids{2});
  EXPECT_EQ(pool.ref_cnt(2), 2);
  pool.check_invariants();
}

TEST(BlockPool, TouchAndFreeOfTheNullBlockDriftItsCounter) {
  BlockPool pool = make_pool(3);
  pool.touch(Ids{0, 0});
  EXPECT_EQ(pool.ref_cnt(0), 2);
  pool.free_blocks(Ids{0, 0, 0});
  EXPECT_EQ(pool.ref_cnt(0), -1);
  EXPECT_EQ(pool.get_num_free_blocks(), 2);
  pool.check_invariants();
}

// Upstream's free_blocks appends only blocks with ref_cnt == 0 that are not the null block; the
// reversed variant (a request's table, tail first) must skip the null block as well.
TEST(BlockPool, FreeBlocksReversedNeverQueuesTheNullBlock) {
  BlockPool pool = make_pool(3);
  Ids table{0};
  pool.get_new_blocks(1, &table);  // [null, 1]
  pool.touch(Ids{0});              // a hit padded with the null block: its counter goes to 1
  pool.free_blocks_reversed(table);
  EXPECT_EQ(pool.ref_cnt(0), 0);
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), (Ids{2, 1}));
  EXPECT_EQ(pool.get_num_free_blocks(), 2);
  pool.check_invariants();
}

TEST(BlockPool, CachingSkipsNullBlocksAndTheEventSaysSo) {
  RequestBlockHasher hasher = make_hasher(4);
  RequestOptions opts;
  opts.cache_salt = "s";
  Request req("r", tokens(12), opts, &hasher);
  BlockPool pool = make_pool(4, /*events=*/true);
  Ids blocks{0};
  pool.get_new_blocks(2, &blocks);  // table [null, 1, 2]
  pool.cache_full_blocks(req, blocks, 0, 3, 4, 0);
  EXPECT_TRUE(pool.block(0).block_hash.empty());
  EXPECT_FALSE(pool.block(1).block_hash.empty());
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 1u);
  const auto& stored = std::get<BlockStored>(events[0]);
  EXPECT_EQ(stored.block_hashes.size(), 2u);  // the null block's hash is skipped
  EXPECT_EQ(stored.token_ids.size(), 12u);    // its tokens are not
  EXPECT_FALSE(stored.parent_block_hash.has_value());
  ASSERT_TRUE(stored.extra_keys.has_value());
  EXPECT_EQ(stored.extra_keys->size(), 2u);
  EXPECT_FALSE((*stored.extra_keys)[0].has_value());  // the salt is on block 0, which was null
  pool.check_invariants();
}

TEST(BlockPool, IntHashEventsCarryTheLow64Bits) {
  RequestBlockHasher hasher = make_hasher(4);
  Request req("r", tokens(8), {}, &hasher);
  BlockPool pool = make_pool(3, /*events=*/true, /*int_hashes=*/true);
  Ids blocks;
  pool.get_new_blocks(2, &blocks);
  pool.cache_full_blocks(req, blocks, 1, 2, 4, 0);
  auto events = pool.take_events();
  const auto& stored = std::get<BlockStored>(events.at(0));
  ASSERT_TRUE(stored.parent_block_hash.has_value());
  EXPECT_TRUE(stored.parent_block_hash->is_int);
  EXPECT_EQ(stored.parent_block_hash->int_value, req.block_hashes()[0].low64());
  EXPECT_EQ(stored.block_hashes.at(0).int_value, req.block_hashes()[1].low64());
}

TEST(BlockPool, EvictBlocksStripsHashesEvenOfBlocksInUse) {
  RequestBlockHasher hasher = make_hasher(4);
  Request req("r", tokens(4), {}, &hasher);
  BlockPool pool = make_pool(3);
  Ids blocks;
  pool.get_new_blocks(1, &blocks);
  pool.cache_full_blocks(req, blocks, 0, 1, 4, 0);
  pool.evict_blocks(blocks);
  EXPECT_TRUE(pool.block(blocks[0]).block_hash.empty());
  EXPECT_EQ(pool.ref_cnt(blocks[0]), 1);
  EXPECT_EQ(pool.cached_block_hash_to_block().size(), 0);
  EXPECT_THROW(pool.evict_blocks(Ids{3}), CheckFailedError);
  pool.check_invariants();
}

TEST(BlockPool, CountsEveryEvictedCachedBlockWithOrWithoutEvents) {
  for (bool events : {false, true}) {
    RequestBlockHasher hasher = make_hasher(4);
    Request req("r", tokens(12), {}, &hasher);
    BlockPool pool = make_pool(5, events);
    Ids blocks;
    pool.get_new_blocks(3, &blocks);
    pool.cache_full_blocks(req, blocks, 0, 3, 4, 0);
    pool.free_blocks_reversed(blocks);  // queue: 4, 3, 2, 1
    EXPECT_EQ(pool.num_evicted_blocks(), 0u);
    Ids next;
    pool.get_new_blocks(2, &next);  // block 4 was never cached; block 3 was
    EXPECT_EQ(next, (Ids{4, 3}));
    EXPECT_EQ(pool.num_evicted_blocks(), 1u);
    pool.evict_blocks(Ids{1, 3});  // 3 lost its hash already: only 1 counts
    EXPECT_EQ(pool.num_evicted_blocks(), 2u);
    pool.free_blocks(next);
    EXPECT_TRUE(pool.reset_prefix_cache());  // clearing is not an eviction
    EXPECT_EQ(pool.num_evicted_blocks(), 2u);
    if (events) {
      size_t removed = 0;
      for (const auto& e : pool.take_events())
        if (const auto* r = std::get_if<BlockRemoved>(&e)) removed += r->block_hashes.size();
      EXPECT_EQ(removed, pool.num_evicted_blocks());
    }
    pool.check_invariants();
  }
}

TEST(BlockPool, ResetPrefixCacheNeedsEveryBlockFreeAndKeepsTheQueueOrder) {
  RequestBlockHasher hasher = make_hasher(4);
  Request req("r", tokens(8), {}, &hasher);
  BlockPool pool = make_pool(4, /*events=*/true);
  Ids blocks;
  pool.get_new_blocks(2, &blocks);
  pool.cache_full_blocks(req, blocks, 0, 2, 4, 0);
  EXPECT_FALSE(pool.reset_prefix_cache());
  pool.free_blocks_reversed(blocks);
  Ids order = pool.free_block_queue().get_all_free_blocks();
  (void)pool.take_events();
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_EQ(pool.free_block_queue().get_all_free_blocks(), order);
  EXPECT_EQ(pool.cached_block_hash_to_block().size(), 0);
  auto events = pool.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(events[0]));
  pool.check_invariants();
}

// The hash stream lists what the full events say, hash by hash, in their order: the stored
// blocks (null blocks skipped), each eviction, the clear; recorded with the full events off too.
TEST(BlockPool, TheHashStreamMirrorsTheEvents) {
  RequestBlockHasher hasher = make_hasher(4);
  Request req("r", tokens(12), {}, &hasher);
  auto int_of = [&](int i) {
    return int_block_hash(req.block_hashes()[static_cast<size_t>(i)].bytes());
  };
  for (bool full : {true, false}) {
    BlockPool pool(BlockPoolOptions{4, true, 4, full, /*int_hashes=*/true, /*hash_events=*/true});
    Ids blocks;
    pool.get_new_blocks(3, &blocks);  // 1, 2, 3
    pool.cache_full_blocks(req, blocks, 0, 2, 4, 0);
    pool.cache_full_blocks(req, blocks, 2, 3, 4, 0);
    pool.free_blocks_reversed(blocks);  // queue: 3, 2, 1
    Ids next;
    pool.get_new_blocks(1, &next);  // evicts block 3 (the third hash)
    pool.free_blocks(next);
    ASSERT_TRUE(pool.reset_prefix_cache());
    std::vector<KvHashEvent> stream;
    pool.take_hash_events(&stream);
    const std::vector<KvHashEvent> want = {{KvHashEvent::kStored, int_of(0)},
                                           {KvHashEvent::kStored, int_of(1)},
                                           {KvHashEvent::kStored, int_of(2)},
                                           {KvHashEvent::kRemoved, int_of(2)},
                                           {KvHashEvent::kCleared, 0}};
    EXPECT_EQ(stream, want) << "full events " << full;
    std::vector<KVCacheEvent> events = pool.take_events();
    EXPECT_EQ(events.size(), full ? 4u : 0u);
    pool.take_hash_events(&stream);
    EXPECT_TRUE(stream.empty());
  }
}

}  // namespace
}  // namespace kvtwin::model::vllm
