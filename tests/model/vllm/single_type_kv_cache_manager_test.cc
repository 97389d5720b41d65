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

TEST(MambaManager, KeepsOnlyTheLastHitAndPadsWithNulls) {
  KVCacheSpec s;
  s.kind = KVCacheSpecKind::kMamba;
  s.block_size = 2;
  s.mamba_cache_mode = MambaCacheMode::kAll;
  ManagerRig x(s, 12);
  std::vector<BlockHash> hashes = x.cache_and_free(4, 0);
  Ids hit;
  x.find(hashes, 7, &hit);
  EXPECT_EQ(hit, (Ids{0, 0, 3}));
}

TEST(MambaManager, AlignModeGrowsOneBlockPerStepAndFreesTheStateFromTwoStepsAgo) {
  KVCacheSpec s;
  s.kind = KVCacheSpecKind::kMamba;
  s.block_size = 2;
  s.mamba_cache_mode = MambaCacheMode::kAlign;
  ManagerRig x(s, 12);
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
