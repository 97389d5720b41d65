// The single-type managers on their own (vLLM's test_single_type_kv_cache_manager.py shapes).
#include <gtest/gtest.h>

#include "model/vllm/chunked_local_attention_manager.h"
#include "model/vllm/full_attention_manager.h"
#include "model/vllm/mamba_manager.h"
#include "model/vllm/request_block_hasher.h"
#include "model/vllm/sliding_window_manager.h"

namespace kvtwin::model::vllm {
namespace {

using Ids = std::vector<BlockId>;

struct ManagerRig {
  ManagerRig(KVCacheSpec spec, int num_blocks)
      : pool(BlockPoolOptions{num_blocks, true, spec.block_size, false, false}),
        hasher(spec.block_size,
               BlockHasher(HashFn::kSha256Cbor, none_hash(HashFn::kSha256Cbor, "0"))) {
    SingleTypeManagerOptions o;
    o.kv_cache_spec = spec;
    o.block_pool = &pool;
    manager = make_single_type_manager(o);
    for (RequestSlot s = 0; s < 4; ++s) manager->reserve_slot(s);
  }
  // Caches `n` blocks of a request over tokens [0, n*bs) and frees them (they stay cached).
  std::vector<BlockHash> cache_and_free(int n, RequestSlot slot) {
    int bs = manager->block_size();
    std::vector<TokenId> t;
    for (int i = 0; i < n * bs; ++i) t.push_back(i);
    Request r("r" + std::to_string(slot), t, {}, &hasher);
    Ids out;
    manager->allocate_new_blocks(slot, n * bs, n * bs, &out);
    manager->cache_blocks(r, slot, n * bs);
    manager->free(slot);
    return r.block_hashes();
  }
  void find(const std::vector<BlockHash>& hashes, int64_t max_length, Ids* out,
            bool eagle = false) {
    BlockHashListWithBlockSize list(hashes, manager->block_size(), manager->block_size());
    const int groups[1] = {0};
    std::vector<std::vector<BlockId>> hit;
    manager->find_longest_cache_hit(list, max_length, groups, eagle, manager->block_size(), &hit);
    *out = hit[0];
  }
  BlockPool pool;
  RequestBlockHasher hasher;
  std::unique_ptr<SingleTypeKVCacheManager> manager;
};

KVCacheSpec attention(KVCacheSpecKind kind, int block_size) {
  KVCacheSpec s;
  s.kind = kind;
  s.block_size = block_size;
  return s;
}

TEST(SlidingWindowManager, SkipsTokensBeforeTheWindow) {
  KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, 2);
  s.sliding_window = 4;
  ManagerRig x(s, 10);
  EXPECT_EQ(x.manager->get_num_skipped_tokens(3), 0);
  EXPECT_EQ(x.manager->get_num_skipped_tokens(7), 4);
}

TEST(SlidingWindowManager, RemoveSkippedBlocksFreesBackwardsDownToTheFirstNull) {
  KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, 2);
  s.sliding_window = 4;
  ManagerRig x(s, 12);
  Ids out;
  x.manager->allocate_new_blocks(0, 20, 20, &out);  // blocks 1..10
  x.manager->remove_skipped_blocks(0, 7);           // 4 skipped tokens: blocks 0, 1
  EXPECT_EQ(x.pool.free_block_queue().get_all_free_blocks(), (Ids{11, 2, 1}));
  x.manager->remove_skipped_blocks(0, 11);  // 8 skipped: blocks 2, 3 (stops at the null)
  EXPECT_EQ(x.pool.free_block_queue().get_all_free_blocks(), (Ids{11, 2, 1, 4, 3}));
  auto table = x.manager->req_blocks(0);
  EXPECT_EQ(Ids(table.begin(), table.begin() + 5), (Ids{0, 0, 0, 0, 5}));
  x.pool.check_invariants();
}

TEST(SlidingWindowManager, HitsAreFoundRightToLeftWithNullPadding) {
  KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, 2);
  s.sliding_window = 4;  // needs cdiv(3, 2) = 2 contiguous blocks
  ManagerRig x(s, 12);
  std::vector<BlockHash> hashes = x.cache_and_free(5, 0);
  Ids hit;
  x.find(hashes, 10, &hit);
  EXPECT_EQ(hit, (Ids{0, 0, 0, 4, 5}));
  x.pool.evict_blocks(Ids{4});  // break the run at block index 3
  x.find(hashes, 10, &hit);
  EXPECT_EQ(hit, (Ids{0, 2, 3}));            // the next run of 2 to the left, null-padded
  x.find(hashes, 10, &hit, /*eagle=*/true);  // needs 3 contiguous, drops the last
  EXPECT_EQ(hit, (Ids{1, 2}));
}

// Upstream needs cdiv(sliding_window - 1, block_size) contiguous blocks: the last token of the hit
// attends to itself and the sliding_window - 1 tokens before it. Window 3, block size 2: one
// block (cdiv(2, 2) = 1), not cdiv(3, 2) = 2.
TEST(SlidingWindowManager, AHitNeedsOnlyTheWindowMinusOneTokensOfContiguousBlocks) {
  KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, 2);
  s.sliding_window = 3;
  ManagerRig x(s, 6);
  std::vector<BlockHash> hashes = x.cache_and_free(2, 0);  // blocks 1, 2
  x.pool.evict_blocks(Ids{1});                             // block index 0 is a miss
  Ids hit;
  x.find(hashes, 4, &hit);  // index 1 hits and is a run of 1 >= 1: done, index 0 null-padded
  EXPECT_EQ(hit, (Ids{0, 2}));
}

// Upstream's get_num_blocks_to_allocate skips the first num_skipped_blocks - num_req_blocks
// prefix hits when it counts evictable ones: they fall out of the window and are never touched.
TEST(SlidingWindowManager, HitsOutsideTheWindowNeedNoCapacity) {
  KVCacheSpec s = attention(KVCacheSpecKind::kSlidingWindow, 2);
  s.sliding_window = 4;
  ManagerRig x(s, 12);
  std::vector<BlockHash> hashes = x.cache_and_free(5, 0);  // blocks 1..5, free and cached
  Ids hit;
  x.find(hashes, 10, &hit);
  ASSERT_EQ(hit, (Ids{0, 0, 0, 4, 5}));
  // 10 local hit tokens + 4 external = 14 computed, 2 new: num_required = cdiv(16, 2) = 8;
  // skipped tokens 14 - 4 + 1 = 11 -> 5 skipped blocks, so all 5 hits are skipped and the
  // evictable blocks 4 and 5 count for nothing; new = 8 - max(5, 5) = 3.
  EXPECT_EQ(x.manager->get_num_blocks_to_allocate(1, 16, hit, 14, 16), 3);
  // With 6 local hit tokens (hits [0, 0, 3]) + 8 external: still 5 skipped blocks > 3 hits.
  EXPECT_EQ(x.manager->get_num_blocks_to_allocate(1, 16, Ids{0, 0, 3}, 14, 16), 3);
  // Computed 8: 5 skipped tokens -> 2 skipped blocks; hits [0, 0, 3, 4] keep 3 and 4 in the
  // window: 2 evictable + (cdiv(10, 2) = 5) - max(2, 4) = 1 new.
  EXPECT_EQ(x.manager->get_num_blocks_to_allocate(1, 10, Ids{0, 0, 3, 4}, 8, 10), 3);
}

TEST(ChunkedLocalAttentionManager, OnlyTheCurrentChunkIsLookedUp) {
  KVCacheSpec s = attention(KVCacheSpecKind::kChunkedLocalAttention, 2);
  s.attention_chunk_size = 4;
  ManagerRig x(s, 12);
  EXPECT_EQ(x.manager->get_num_skipped_tokens(7), 4);
  EXPECT_EQ(x.manager->get_num_skipped_tokens(8), 8);
  std::vector<BlockHash> hashes = x.cache_and_free(5, 0);
  Ids hit;
  x.find(hashes, 10, &hit);  // chunk [8, 12): blocks 0..3 are null, block 4 is looked up
  EXPECT_EQ(hit, (Ids{0, 0, 0, 0, 5}));
  x.find(hashes, 7, &hit);  // chunk [4, 8): block 2 hits, block 3 (tokens 6-8) is too long
  EXPECT_EQ(hit, (Ids{0, 0, 3}));
}

// Upstream's chunked local attention hit is the cached run from the start of the current chunk,
// stopping at the first miss: a later cached block of the chunk is not part of the hit.
TEST(ChunkedLocalAttentionManager, TheHitStopsAtTheFirstMissInsideTheChunk) {
  KVCacheSpec s = attention(KVCacheSpecKind::kChunkedLocalAttention, 2);
  s.attention_chunk_size = 8;
  ManagerRig x(s, 12);
  std::vector<BlockHash> hashes = x.cache_and_free(7, 0);  // block index i holds block i + 1
  x.pool.evict_blocks(Ids{6});                             // miss at index 5
  Ids hit;
  x.find(hashes, 14, &hit);  // chunk [8, 16): indices 4, 5, 6 are looked up; 5 misses
  EXPECT_EQ(hit, (Ids{0, 0, 0, 0, 5}));
}

// A Mamba group of 2-token blocks in `mode`.
KVCacheSpec mamba_spec(MambaCacheMode mode) {
  KVCacheSpec s;
  s.kind = KVCacheSpecKind::kMamba;
  s.block_size = 2;
  s.mamba_cache_mode = mode;
  return s;
}

TEST(MambaManager, KeepsOnlyTheLastHitAndPadsWithNulls) {
  ManagerRig x(mamba_spec(MambaCacheMode::kAll), 12);
  std::vector<BlockHash> hashes = x.cache_and_free(4, 0);
  Ids hit;
  x.find(hashes, 7, &hit);
  EXPECT_EQ(hit, (Ids{0, 0, 3}));
}

TEST(MambaManager, AlignModeGrowsOneBlockPerStepAndFreesTheStateFromTwoStepsAgo) {
  ManagerRig x(mamba_spec(MambaCacheMode::kAlign), 12);
  Ids out;
  x.manager->allocate_new_blocks(0, 4, 4, &out);  // [null, 1]
  EXPECT_EQ(out, (Ids{0, 1}));
  out.clear();
  x.manager->allocate_new_blocks(0, 6, 6, &out);  // [null, 1, 2]
  EXPECT_EQ(out, (Ids{2}));
  x.manager->remove_skipped_blocks(0, 6);  // state block 1 (index 1 < cdiv(6,2)-1) is freed
  EXPECT_EQ(Ids(x.manager->req_blocks(0).begin(), x.manager->req_blocks(0).end()), (Ids{0, 0, 2}));
  x.pool.check_invariants();
}

// Upstream frees last_state_block_idx only when it is < cdiv(num_computed_tokens, block_size) - 1:
// while the last computed token still lies in that block its state is the running one.
TEST(MambaManager, AlignModeKeepsThePreviousStateBlockWhileTheLastComputedTokenIsInIt) {
  ManagerRig x(mamba_spec(MambaCacheMode::kAlign), 12);
  Ids out;
  x.manager->allocate_new_blocks(0, 4, 4, &out);  // [null, 1]
  x.manager->allocate_new_blocks(0, 6, 6, &out);  // [null, 1, 2], last_state_block_idx = 1
  const Ids free_before = x.pool.free_block_queue().get_all_free_blocks();
  // 4 computed: the base frees floor(3 / 2) = 1 skipped block (index 0, already null); index 1
  // is not < cdiv(4, 2) - 1 = 1, so block 1 stays.
  x.manager->remove_skipped_blocks(0, 4);
  EXPECT_EQ(Ids(x.manager->req_blocks(0).begin(), x.manager->req_blocks(0).end()), (Ids{0, 1, 2}));
  EXPECT_EQ(x.pool.free_block_queue().get_all_free_blocks(), free_before);
  EXPECT_EQ(x.pool.ref_cnt(1), 1);
  x.pool.check_invariants();
}

TEST(FullAttentionManager, HitsAreTheLongestCachedPrefix) {
  ManagerRig x(attention(KVCacheSpecKind::kFullAttention, 2), 12);
  std::vector<BlockHash> hashes = x.cache_and_free(4, 0);
  Ids hit;
  x.find(hashes, 7, &hit);
  EXPECT_EQ(hit, (Ids{1, 2, 3}));
  x.pool.evict_blocks(Ids{2});
  x.find(hashes, 7, &hit);
  EXPECT_EQ(hit, (Ids{1}));
}

}  // namespace
}  // namespace kvtwin::model::vllm
