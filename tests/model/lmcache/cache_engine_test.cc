// LMCacheEngine: store/lookup/retrieve across tiers, the engine-level quirks with their fixes,
// freeze, health, and the layerwise generators' yield protocol.
#include "model/lmcache/cache_engine.h"

#include <gtest/gtest.h>

#include "model/lmcache/layerwise_tasks.h"
#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using namespace testing;

TEST(LMCacheEngine, APrefixSplitAcrossCpuAndDiskIsFoundAndRetrievedTierByTier) {
  LMCacheEngine e(toy_config(4, 8), toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  std::vector<std::string> cpu_only{"LocalCPUBackend"};
  auto infos = e.chunk_infos(a, nullptr);
  e.storage_manager().remove(infos[2].key, &cpu_only);
  e.storage_manager().remove(infos[3].key, &cpu_only);
  LookupResult l = lookup(e, a, "a", true);
  EXPECT_EQ(l.hit_tokens, 64);
  const PinMap* pins = e.lookup_pins_of("a");
  ASSERT_NE(pins, nullptr);
  ASSERT_EQ(pins->size(), 2u);
  EXPECT_EQ((*pins)[0].first, "LocalCPUBackend");
  EXPECT_EQ((*pins)[1].first, "LocalDiskBackend");
  RetrieveResult r = retrieve(e, a, "a");
  EXPECT_EQ(r.ret_tokens, 64);
  ASSERT_EQ(r.gets.size(), 2u);
  EXPECT_EQ(r.gets[1].location, "LocalDiskBackend");
  EXPECT_EQ(r.loaded[3].location, "LocalDiskBackend");
  e.lookup_unpin("a");
  EXPECT_EQ(e.storage_manager().local_cpu().size(), 4u);  // disk chunks written back
}

TEST(LMCacheEngine, PartialRetrieveBookkeepingQuirkAndItsFix) {
  for (bool quirk : {true, false}) {
    LMCacheEngineConfig cfg = toy_config(8, 0, true);
    cfg.quirks = quirk ? Quirks::upstream() : Quirks::all_fixed();
    LMCacheEngine e(cfg, toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store(e, a);
    e.storage_manager().complete_all_writes();
    e.clear(std::nullopt, nullptr, nullptr);
    auto infos = e.chunk_infos(a, nullptr);
    e.storage_manager().shared().remote->delete_kv_bytes(infos[2].key.to_string());
    RetrieveResult r = retrieve(e, a);
    // Upstream drops the chunk ending at the failure start but keeps its mask bits.
    EXPECT_EQ(r.ret_tokens, 32);
    EXPECT_EQ(r.loaded.size(), quirk ? 1u : 2u);
    EXPECT_EQ(e.storage_manager().allocator().total_allocated_size(), 0u);
    // The lost chunk's buffer is always dropped by the Redis connector; with the quirk the
    // truncated and trailing objects are leaked too and reclaimed by __del__.
    EXPECT_EQ(e.storage_manager().allocator().num_reclaimed_by_del(), quirk ? 3u : 1u);
  }
}

// Two tiers fail in one retrieve: disk serves chunks 0-2 but chunk 1's file is gone, Redis serves
// chunks 3-5 but chunk 4's bytes are gone. Upstream keeps the *largest* failing start (64) and
// would hand back Redis's chunk 3 after the hole at chunk 1; the fix keeps the smallest (16):
// only chunk 0 is retrieved and every other fetched object is released.
TEST(LMCacheEngine, FixedPartialRetrieveStopsAtTheEarliestFailureAcrossTiers) {
  LMCacheEngineConfig cfg = toy_config(8, 8, true);
  cfg.quirks = Quirks::all_fixed();
  LMCacheEngine e(cfg, toy_metadata());
  std::vector<TokenId> a = seq(96, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  e.clear(std::nullopt, nullptr, nullptr);  // the CPU tier only
  auto infos = e.chunk_infos(a, nullptr);
  std::vector<std::string> disk_only{"LocalDiskBackend"};
  for (int i : {3, 4, 5}) e.storage_manager().remove(infos[i].key, &disk_only);
  e.storage_manager().shared().disk->remove(infos[1].key.disk_file_name());
  e.storage_manager().shared().remote->delete_kv_bytes(infos[4].key.to_string());
  RetrieveResult r = retrieve(e, a);
  ASSERT_FALSE(r.error);
  ASSERT_EQ(r.gets.size(), 2u);
  EXPECT_EQ(r.gets[0].location, "LocalDiskBackend");
  EXPECT_EQ(r.gets[0].num_keys, 3);
  EXPECT_EQ(r.gets[0].leading_non_null, 1);
  EXPECT_EQ(r.gets[1].location, "RemoteBackend");
  EXPECT_EQ(r.gets[1].num_keys, 3);
  EXPECT_EQ(r.gets[1].leading_non_null, 1);
  EXPECT_EQ(r.ret_tokens, 16);
  ASSERT_EQ(r.loaded.size(), 1u);
  EXPECT_EQ(r.loaded[0].start, 0);
  // Nothing fetched outlives the operation except what the CPU tier holds.
  EXPECT_EQ(e.storage_manager().allocator().total_allocated_size(),
            e.storage_manager().local_cpu().resident_bytes());
}

TEST(LMCacheEngine, PinnedLookupWithoutAnIdLeaksItsPinsWithTheQuirk) {
  for (bool quirk : {true, false}) {
    LMCacheEngineConfig cfg = toy_config(8);
    cfg.quirks = quirk ? Quirks::upstream() : Quirks::all_fixed();
    LMCacheEngine e(cfg, toy_metadata());
    std::vector<TokenId> a = seq(32, 1);
    store(e, a);
    LookupResult l = lookup(e, a, std::nullopt, true);
    ASSERT_TRUE(l.error);
    EXPECT_EQ(*l.error, PyError::kAssertionError);
    int pinned = 0;
    for (const auto& [k, id] : e.storage_manager().local_cpu().entries())
      pinned += e.storage_manager().allocator().obj(id).pin_count;
    EXPECT_EQ(pinned, quirk ? 2 : 0);
  }
}

TEST(LMCacheEngine, StoreAllocatesAgainForChunksAlreadyCached) {
  LMCacheEngine e(toy_config(8), toy_metadata());
  std::vector<TokenId> a = seq(32, 1);
  store(e, a);
  StoreResult again = store(e, a);
  EXPECT_EQ(again.stored.size(), 2u);  // no existence check; the hot cache keeps the first copy
  EXPECT_EQ(e.storage_manager().local_cpu().size(), 2u);
  EXPECT_EQ(e.storage_manager().allocator().total_allocated_size(), 2 * kChunkBytes);
}

TEST(LMCacheEngine, AStoreThatRaisesInItsPutsReportsItsChunksAsCopied) {
  // LFU with the stale-entry quirk: the disk tier's policy holds keys whose writes are still
  // pending, and the next disk eviction's scan raises KeyError on the first of them, inside
  // batched_put: after the GPU -> CPU copy.
  LMCacheEngineConfig cfg = toy_config(8, 4);
  cfg.cache_policy = CachePolicyKind::kLfu;
  LMCacheEngine e(cfg, toy_metadata());
  StoreResult first = store(e, seq(64, 1));
  ASSERT_FALSE(first.error);
  EXPECT_TRUE(first.copied);
  StoreResult second = store(e, seq(32, 5000));
  ASSERT_TRUE(second.error);
  EXPECT_EQ(*second.error, PyError::kKeyError);
  EXPECT_TRUE(second.copied);
  EXPECT_EQ(second.stored, (std::vector<TokenRange>{{0, 16}, {16, 32}}));
}

TEST(LMCacheEngine, AStoreThatRaisesInItsAllocationsCopiedNothing) {
  // force_store_wait: the allocation busy-waits while nothing is evictable, and the CPU copies
  // that pending disk writes hold are not. The raise comes before the GPU -> CPU copy.
  LMCacheEngineConfig cfg = toy_config(5, 8);
  cfg.force_store_wait = true;
  LMCacheEngine e(cfg, toy_metadata());
  ASSERT_FALSE(store(e, seq(64, 1)).error);  // 4 chunks, their disk writes pending
  StoreResult r = store(e, seq(32, 5000));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(*r.error, PyError::kWouldBusyWait);
  EXPECT_FALSE(r.copied);
  EXPECT_EQ(r.stored, (std::vector<TokenRange>{{0, 16}}));  // allocated, never copied
}

TEST(LMCacheEngine, FreezeSkipsStoresAndReadsOnlyTheCpuTier) {
  LMCacheEngine e(toy_config(4, 8), toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  e.clear(std::nullopt, nullptr, nullptr);
  e.freeze(true);
  EXPECT_EQ(lookup(e, a).hit_tokens, 0);
  EXPECT_TRUE(store(e, seq(32, 500)).stored.empty());
  e.freeze(false);
  EXPECT_EQ(lookup(e, a).hit_tokens, 64);
}

TEST(LMCacheEngine, AnUnhealthyEngineDoesNothing) {
  LMCacheEngine e(toy_config(4), toy_metadata());
  e.set_healthy(false);
  EXPECT_TRUE(store(e, seq(32)).stored.empty());
  EXPECT_EQ(lookup(e, seq(32)).hit_tokens, 0);
  EXPECT_EQ(retrieve(e, seq(32)).ret_tokens, 0);
  EXPECT_EQ(e.health(), 0);
}

TEST(LMCacheEngine, LayerwiseStoreAndRetrieveFollowTheGeneratorProtocol) {
  LMCacheEngineConfig cfg = toy_config(16, 16);
  cfg.use_layerwise = true;
  cfg.save_unfull_chunk = true;
  LMCacheEngine e(cfg, toy_metadata());
  std::vector<TokenId> a = seq(40, 1);
  auto st = e.store_layer({TokenInput::of_tokens(a), 0, nullptr});
  int yields = 0;
  while (st->next()) ++yields;
  EXPECT_EQ(yields, e.num_layers() + 1);
  EXPECT_EQ(st->stored().size(), 3u);
  // One object per layer per chunk, allocated as one block per chunk.
  EXPECT_EQ(e.storage_manager().local_cpu().size(), 6u);
  EXPECT_EQ(e.storage_manager().pending_writes().size(), 6u);
  e.storage_manager().complete_all_writes();
  // store_layer skips chunks whose layer-0 key exists.
  auto again = e.store_layer({TokenInput::of_tokens(a), 0, nullptr});
  while (again->next()) {
  }
  EXPECT_TRUE(again->stored().empty());
  EXPECT_EQ(lookup(e, a).hit_tokens, 40);
  auto rt = e.retrieve_layer({a, 0, std::nullopt, nullptr});
  yields = 0;
  while (rt->next()) ++yields;
  EXPECT_EQ(yields, e.num_layers() + 2);
  EXPECT_EQ(rt->first_yield(), 40);
  EXPECT_EQ(rt->ret_tokens(), 40);
  ASSERT_EQ(rt->loaded().size(), 3u);
  for (const LoadedChunk& c : rt->loaded()) EXPECT_FALSE(c.bad);
}

TEST(LMCacheEngine, ALayerwisePutThatRaisesCountsItsLayerAsCopied) {
  // LFU over a disk of two chunks: A's layer objects fill it with pending writes, and the disk
  // eviction that B's first layer needs meets one of them: KeyError, in the put of B's layer 0,
  // which upstream had copied off the GPU just before.
  LMCacheEngineConfig cfg = toy_config(16, 2);
  cfg.use_layerwise = true;
  cfg.cache_policy = CachePolicyKind::kLfu;
  LMCacheEngine e(cfg, toy_metadata());
  auto a = e.store_layer({TokenInput::of_tokens(seq(32, 1)), 0, nullptr});
  while (a->next()) {
  }
  EXPECT_EQ(a->layers_put(), e.num_layers());
  EXPECT_EQ(a->layers_copied(), e.num_layers());
  auto b = e.store_layer({TokenInput::of_tokens(seq(32, 5000)), 0, nullptr});
  ASSERT_TRUE(b->next());  // allocation
  EXPECT_EQ(b->layers_copied(), 0);
  try {
    b->next();
    ADD_FAILURE() << "no raise";
  } catch (const UpstreamError& err) {
    EXPECT_EQ(err.kind(), PyError::kKeyError);
  }
  EXPECT_EQ(b->layers_put(), 0);
  EXPECT_EQ(b->layers_copied(), 1);
}

TEST(LMCacheEngine, LayerwiseRetrieveWithZeroHitsFailsInItsLastStepWithTheQuirk) {
  for (bool quirk : {true, false}) {
    LMCacheEngineConfig cfg = toy_config(8);
    cfg.use_layerwise = true;
    cfg.quirks = quirk ? Quirks::upstream() : Quirks::all_fixed();
    LMCacheEngine e(cfg, toy_metadata());
    auto rt = e.retrieve_layer({seq(32), 0, std::nullopt, nullptr});
    int yields = 0;
    bool raised = false;
    try {
      while (rt->next()) ++yields;
    } catch (const UpstreamError& err) {
      raised = err.kind() == PyError::kUnboundLocalError;
    }
    EXPECT_EQ(raised, quirk);
    EXPECT_EQ(yields, e.num_layers() + (quirk ? 1 : 2));
  }
}

TEST(LMCacheEngine, LayerwiseRetrieveAssertsThatAllChunksComeFromOneTier) {
  LMCacheEngineConfig cfg = toy_config(16, 16);
  cfg.use_layerwise = true;
  LMCacheEngine e(cfg, toy_metadata());
  std::vector<TokenId> a = seq(32, 1);
  auto st = e.store_layer({TokenInput::of_tokens(a), 0, nullptr});
  while (st->next()) {
  }
  e.storage_manager().complete_all_writes();
  std::vector<std::string> cpu_only{"LocalCPUBackend"};
  auto infos = e.chunk_infos(a, nullptr);
  for (int l = 0; l < e.num_layers(); ++l)
    e.storage_manager().remove(infos[1].key.layer(l), &cpu_only);
  auto rt = e.retrieve_layer({a, 0, std::nullopt, nullptr});
  try {
    rt->next();
    FAIL() << "no assertion";
  } catch (const UpstreamError& err) {
    EXPECT_EQ(err.kind(), PyError::kAssertionError);
  }
}

TEST(LMCacheEngine, MlaObjectsUseTheMlaFormatAndOneKvPlane) {
  LMCacheMetadata m = toy_metadata();
  m.use_mla = true;
  m.num_kv_heads = 1;
  m.head_size = 576;
  LMCacheEngineConfig cfg = toy_config(64);
  LMCacheEngine e(cfg, m);
  EXPECT_EQ(e.fmt(), MemoryFormat::kKvMlaFmt);
  store(e, seq(16));
  const MemoryObj& o =
      e.storage_manager().allocator().obj(e.storage_manager().local_cpu().entries()[0].second);
  EXPECT_EQ(o.fmt, MemoryFormat::kKvMlaFmt);
  EXPECT_EQ(o.shape, (Shape{1, 2, 16, 576}));
  EXPECT_EQ(o.size, 1u * 2 * 16 * 576 * 2);
}

}  // namespace
}  // namespace kvtwin::model::lmcache
