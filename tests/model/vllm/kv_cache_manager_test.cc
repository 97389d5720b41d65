#include "model/vllm/kv_cache_manager.h"

#include <gtest/gtest.h>

#include "model/vllm/request_block_hasher.h"

namespace kvtwin::model::vllm {
namespace {

using Ids = std::vector<BlockId>;
using Groups = std::vector<std::vector<BlockId>>;

KVCacheSpec spec(KVCacheSpecKind kind, int block_size) {
  KVCacheSpec s;
  s.kind = kind;
  s.block_size = block_size;
  s.num_kv_heads = 1;
  s.head_size = 8;
  s.dtype = "bfloat16";
  return s;
}

KVCacheManagerOptions options(int num_blocks, std::vector<KVCacheSpec> specs, int hash_bs) {
  KVCacheManagerOptions o;
  o.kv_cache_config.num_blocks = num_blocks;
  for (auto& s : specs) o.kv_cache_config.kv_cache_groups.push_back({{"l"}, s});
  o.max_model_len = 1024;
  o.hash_block_size = hash_bs;
  o.log_stats = true;
  return o;
}

std::vector<TokenId> tokens(int n, int start = 0) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(start + i);
  return t;
}

struct Fixture {
  explicit Fixture(const KVCacheManagerOptions& o)
      : hasher(o.hash_block_size,
               BlockHasher(HashFn::kSha256Cbor, none_hash(HashFn::kSha256Cbor, "0"))),
        m(o) {}
  std::unique_ptr<Request> request(const std::string& id, std::vector<TokenId> prompt) {
    return std::make_unique<Request>(id, std::move(prompt), RequestOptions{}, &hasher);
  }
  // Schedules the whole prompt at once (with its prefix hits), as the scheduler does.
  std::optional<KVCacheBlocks> prefill(Request& r) {
    auto hit = m.get_computed_blocks(r);
    auto out = m.allocate_slots(r, {.num_new_tokens = r.num_tokens() - hit.num_computed_tokens,
                                    .num_new_computed_tokens = hit.num_computed_tokens,
                                    .new_computed_blocks = &hit.blocks});
    if (out) r.num_computed_tokens = r.num_tokens();
    return out;
  }
  RequestBlockHasher hasher;
  KVCacheManager m;
};

TEST(KVCacheManager, PrefixHitsAreClaimedOnlyByAllocateSlots) {
  Fixture f(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(10));
  ASSERT_EQ(f.prefill(*a)->get_block_ids(), (Groups{{1, 2, 3}}));
  f.m.free(*a);
  auto b = f.request("b", tokens(10));
  auto hit = f.m.get_computed_blocks(*b);
  EXPECT_EQ(hit.blocks.get_block_ids(), (Groups{{1, 2}}));
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(f.m.block_pool().ref_cnt(1), 0);  // not touched yet
  auto out = f.m.allocate_slots(
      *b, {.num_new_tokens = 2, .num_new_computed_tokens = 8, .new_computed_blocks = &hit.blocks});
  ASSERT_TRUE(out);
  EXPECT_EQ(f.m.block_pool().ref_cnt(1), 1);
  EXPECT_FALSE(f.m.block_pool().free_block_queue().contains(1));
  // The new third block comes from the queue head (block 4, never used).
  EXPECT_EQ(out->get_block_ids(), (Groups{{4}}));
  f.m.check_invariants();
}

TEST(KVCacheManager, TheHitStopsOneTokenShortOfTheRequest) {
  Fixture f(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(8));
  f.prefill(*a);
  auto b = f.request("b", tokens(8));
  EXPECT_EQ(f.m.get_computed_blocks(*b).num_computed_tokens, 4);
}

TEST(KVCacheManager, EvictableHitsCountAgainstTheFreeBlocks) {
  Fixture f(options(4, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(9));
  f.prefill(*a);  // blocks 1, 2, 3: the pool is full
  f.m.free(*a);
  auto b = f.request("b", tokens(13));
  auto hit = f.m.get_computed_blocks(*b);
  ASSERT_EQ(hit.num_computed_tokens, 8);
  // 2 evictable hits + 2 new blocks > 3 free blocks.
  EXPECT_FALSE(f.m.allocate_slots(
      *b, {.num_new_tokens = 5, .num_new_computed_tokens = 8, .new_computed_blocks = &hit.blocks}));
  EXPECT_EQ(f.m.block_pool().ref_cnt(1), 0);  // nothing was touched
  // 2 evictable hits + 1 new block fit exactly.
  EXPECT_TRUE(f.m.allocate_slots(
      *b, {.num_new_tokens = 4, .num_new_computed_tokens = 8, .new_computed_blocks = &hit.blocks}));
  f.m.check_invariants();
}

TEST(KVCacheManager, EagleDropsTheLastMatchedBlock) {
  KVCacheManagerOptions o = options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4);
  o.use_eagle = true;
  Fixture f(o);
  auto a = f.request("a", tokens(13));
  f.prefill(*a);
  auto b = f.request("b", tokens(13));
  EXPECT_EQ(f.m.get_computed_blocks(*b).blocks.get_block_ids(), (Groups{{1, 2}}));
}

TEST(KVCacheManager, DelayedCachingWaitsForCacheBlocks) {
  Fixture f(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(9));
  ASSERT_TRUE(f.m.allocate_slots(*a, {.num_new_tokens = 9, .delay_cache_blocks = true}));
  EXPECT_EQ(f.m.block_pool().cached_block_hash_to_block().size(), 0);
  f.m.cache_blocks(*a, 9);
  EXPECT_EQ(f.m.block_pool().cached_block_hash_to_block().size(), 2);
  EXPECT_EQ(f.m.num_cached_blocks().at(0).second, (std::vector<std::optional<int>>{2}));
}

TEST(KVCacheManager, LookaheadSlotsAreAllocatedButDraftTokensNotCached) {
  Fixture f(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(7));
  auto out = f.m.allocate_slots(*a, {.num_new_tokens = 7, .num_lookahead_tokens = 3});
  EXPECT_EQ(out->get_block_ids(), (Groups{{1, 2, 3}}));
  EXPECT_EQ(f.m.block_pool().cached_block_hash_to_block().size(), 1);
}

// Decode steps inside the last block (the fast path) allocate and cache nothing; the step that
// fills the block caches it, and the next one takes a new block.
TEST(KVCacheManager, DecodeStepsFillTheLastBlockThenCacheItAndTakeANewOne) {
  Fixture f(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(6));
  ASSERT_EQ(f.prefill(*a)->get_block_ids(), (Groups{{1, 2}}));
  const auto& map = f.m.block_pool().cached_block_hash_to_block();
  EXPECT_EQ(map.size(), 1);
  auto decode = [&](TokenId t) {
    a->append_output_token_ids(std::vector<TokenId>{t});
    auto out = f.m.allocate_slots(*a, {.num_new_tokens = 1});
    a->num_computed_tokens += 1;
    f.m.check_invariants();
    return out;
  };
  auto out = decode(100);  // token 7 of 8 slots
  ASSERT_TRUE(out);
  EXPECT_EQ(out->get_block_ids(), (Groups{{}}));
  EXPECT_EQ(map.size(), 1);
  EXPECT_EQ(f.m.num_cached_blocks().at(0).second, (std::vector<std::optional<int>>{1}));
  out = decode(101);  // token 8 fills block 2: cached, still no new block
  EXPECT_EQ(out->get_block_ids(), (Groups{{}}));
  EXPECT_EQ(map.size(), 2);
  EXPECT_EQ(f.m.num_cached_blocks().at(0).second, (std::vector<std::optional<int>>{2}));
  EXPECT_EQ(decode(102)->get_block_ids(), (Groups{{3}}));
  EXPECT_EQ(f.m.get_block_ids("a"), (Groups{{1, 2, 3}}));
}

// The manager caches a request's slot in the Request; a slot released through another object
// with the same id, then reused, must not be taken for the first object's.
TEST(KVCacheManager, AStaleSlotHandleIsNotFollowed) {
  Fixture f(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto x1 = f.request("x", tokens(4));
  ASSERT_TRUE(f.m.allocate_slots(*x1, {.num_new_tokens = 4}));
  auto x2 = f.request("x", tokens(4));
  f.m.free(*x2);  // frees "x" (x1's blocks) through another object
  auto y = f.request("y", tokens(8, 50));
  ASSERT_EQ(f.m.allocate_slots(*y, {.num_new_tokens = 8})->get_block_ids(), (Groups{{2, 3}}));
  ASSERT_TRUE(f.m.allocate_slots(*x1, {.num_new_tokens = 4}));
  EXPECT_EQ(f.m.get_block_ids("y"), (Groups{{2, 3}}));
  EXPECT_EQ(f.m.get_block_ids("x").at(0).size(), 1u);
  f.m.check_invariants();
}

TEST(KVCacheManager, StatsCountEveryLookupAndPreemptedRequestsApart) {
  Fixture f(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(9));
  f.m.get_computed_blocks(*a);
  a->num_preemptions = 1;
  f.m.get_computed_blocks(*a);
  auto stats = f.m.make_prefix_cache_stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->requests, 1);
  EXPECT_EQ(stats->queries, 9);
  EXPECT_EQ(stats->preempted_requests, 1);
  EXPECT_EQ(stats->preempted_queries, 9);
  EXPECT_EQ(f.m.make_prefix_cache_stats()->requests, 0);  // reset by the snapshot
  EXPECT_TRUE(f.m.reset_prefix_cache());
  EXPECT_TRUE(f.m.make_prefix_cache_stats()->reset);
}

TEST(KVCacheManager, CommonPrefixCountsEveryRequestWithATableEntry) {
  Fixture f(options(12, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  auto a = f.request("a", tokens(9));
  auto b = f.request("b", tokens(9));
  f.prefill(*a);
  f.prefill(*b);
  EXPECT_EQ(f.m.get_num_common_prefix_blocks("a"), (std::vector<int>{2}));
  // Asking about an unknown id creates its (empty) entry, as upstream's defaultdict does.
  EXPECT_EQ(f.m.get_num_common_prefix_blocks("ghost"), (std::vector<int>{0}));
  EXPECT_EQ(f.m.get_num_common_prefix_blocks("a"), (std::vector<int>{0}));
}

TEST(KVCacheManager, HybridFreesEachGroupTailFirstInGroupOrder) {
  KVCacheSpec sw = spec(KVCacheSpecKind::kSlidingWindow, 4);
  sw.sliding_window = 8;
  Fixture f(options(12, {spec(KVCacheSpecKind::kFullAttention, 4), sw}, 4));
  auto a = f.request("a", tokens(8));
  auto out = f.prefill(*a);
  ASSERT_EQ(out->get_block_ids(), (Groups{{1, 2}, {3, 4}}));
  f.m.free(*a);
  auto q = f.m.block_pool().free_block_queue().get_all_free_blocks();
  EXPECT_EQ(Ids(q.end() - 4, q.end()), (Ids{2, 1, 4, 3}));
}

TEST(KVCacheManager, SkippedBlocksAreFreedEvenWhenTheAllocationFails) {
  KVCacheSpec sw = spec(KVCacheSpecKind::kSlidingWindow, 2);
  sw.sliding_window = 4;
  Fixture f(options(5, {sw}, 2));
  auto a = f.request("a", tokens(8));
  ASSERT_TRUE(f.m.allocate_slots(*a, {.num_new_tokens = 8}));  // blocks 1..4, pool full
  a->num_computed_tokens = 8;
  // 8 computed tokens, window 4: tokens 0-4 are skipped, so blocks 0 and 1 of the table go.
  EXPECT_FALSE(f.m.allocate_slots(*a, {.num_new_tokens = 8}));
  EXPECT_EQ(f.m.get_block_ids("a"), (Groups{{0, 0, 3, 4}}));
  EXPECT_EQ(f.m.num_free_blocks(), 2);
}

TEST(KVCacheManager, SinkBlocksAreTakenAtConstructionAndBlockReset) {
  KVCacheSpec sink = spec(KVCacheSpecKind::kSinkFullAttention, 4);
  sink.sink_len = 8;
  Fixture f(options(8, {sink}, 4));
  EXPECT_EQ(f.m.num_free_blocks(), 5);
  EXPECT_EQ(f.m.block_pool().free_block_queue().get_all_free_blocks(), (Ids{3, 4, 5, 6, 7}));
  EXPECT_FALSE(f.m.reset_prefix_cache());
  f.m.check_invariants();
}

TEST(KVCacheManager, TheCoordinatorFollowsTheConfiguration) {
  KVCacheSpec sw = spec(KVCacheSpecKind::kSlidingWindow, 8);
  sw.sliding_window = 16;
  KVCacheManagerOptions o = options(10, {spec(KVCacheSpecKind::kFullAttention, 4), sw, sw}, 4);
  KVCacheManager hybrid(o);
  EXPECT_EQ(hybrid.coordinator().name(), "HybridKVCacheCoordinator");
  const auto& h = dynamic_cast<const HybridKVCacheCoordinator&>(hybrid.coordinator());
  ASSERT_EQ(h.attention_groups().size(), 2u);
  EXPECT_EQ(h.attention_groups()[1].group_ids, (std::vector<int>{1, 2}));
  EXPECT_EQ(h.lcm_block_size(), 8);
  o.enable_caching = false;
  EXPECT_EQ(KVCacheManager(o).coordinator().name(), "KVCacheCoordinatorNoPrefixCache");
  KVCacheManager unitary(options(10, {spec(KVCacheSpecKind::kFullAttention, 4)}, 4));
  EXPECT_EQ(unitary.coordinator().name(), "UnitaryKVCacheCoordinator");
}

}  // namespace
}  // namespace kvtwin::model::vllm
