// LocalCPUBackend through the engine: reverse touch on pinned lookups, eviction one victim per
// failed allocation with first-fit reuse, stores that give up, clear, and local_cpu=false staging.
#include "model/lmcache/local_cpu_backend.h"

#include <gtest/gtest.h>

#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using namespace testing;

std::vector<std::string> hot_kids(LMCacheEngine& e) {
  std::vector<std::string> out;
  for (const auto& [k, id] : e.storage_manager().local_cpu().entries()) out.push_back(k.kid());
  return out;
}

std::vector<std::string> chunk_kids(LMCacheEngine& e, const std::vector<TokenId>& t) {
  std::vector<std::string> out;
  for (const ChunkInfo& c : e.chunk_infos(t, nullptr)) out.push_back(c.key.kid());
  return out;
}

TEST(LocalCPUBackend, PinnedLookupTouchesInReverseSoTheSuffixIsEvictedFirst) {
  LMCacheEngine e(toy_config(8), toy_metadata());
  std::vector<TokenId> a = seq(64, 1), b = seq(64, 500);
  store(e, a);
  store(e, b);
  auto ka = chunk_kids(e, a);
  ASSERT_EQ(lookup(e, a, "a", true).hit_tokens, 64);
  std::vector<std::string> hot = hot_kids(e);
  EXPECT_EQ(std::vector<std::string>(hot.end() - 4, hot.end()),
            (std::vector<std::string>{ka[3], ka[2], ka[1], ka[0]}));
  e.lookup_unpin("a");
  // Four new chunks evict B (older), then the store of C evicts A's suffix first.
  std::vector<TokenId> c = seq(64, 900), d = seq(32, 1500);
  store(e, c);
  e.storage_manager().events().clear();
  store(e, d);
  auto& removed = e.storage_manager().events().removed;
  ASSERT_EQ(removed.size(), 2u);
  EXPECT_EQ(removed[0].key.kid(), ka[3]);
  EXPECT_EQ(removed[1].key.kid(), ka[2]);
}

TEST(LocalCPUBackend, StoreGivesUpWithoutWaitingWhenEverythingIsPinned) {
  LMCacheEngine e(toy_config(4), toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store(e, a);
  lookup(e, a, "a", true);
  StoreResult r = store(e, seq(64, 700));
  EXPECT_FALSE(r.error);
  EXPECT_TRUE(r.stored.empty());
  e.lookup_unpin("a");
  EXPECT_EQ(store(e, seq(64, 700)).stored.size(), 4u);
}

TEST(LocalCPUBackend, EvictionReusesTheFreedAddressFirstFit) {
  LMCacheEngine e(toy_config(4), toy_metadata());
  store(e, seq(64, 1));
  const auto& a = e.storage_manager().allocator();
  uint64_t first_addr = a.obj(e.storage_manager().local_cpu().entries()[0].second).address;
  store(e, seq(16, 5000));
  auto entries = e.storage_manager().local_cpu().entries();
  EXPECT_EQ(a.obj(entries.back().second).address, first_addr);
  e.storage_manager().local_cpu().check_invariants();
  a.check_invariants();
}

TEST(LocalCPUBackend, ClearRemovesOnlyEvictableEntriesAndCountsTheirTokens) {
  LMCacheEngineConfig cfg = toy_config(8);
  cfg.save_unfull_chunk = true;
  LMCacheEngine e(cfg, toy_metadata());
  store(e, seq(40, 1));  // 16 + 16 + 8
  store(e, seq(32, 300));
  lookup(e, seq(32, 300), "p", true);
  LMCacheEngine::ClearResult r = e.clear(std::nullopt, nullptr, nullptr);
  EXPECT_EQ(r.count, 40);
  EXPECT_EQ(e.storage_manager().local_cpu().size(), 2u);
}

TEST(LocalCPUBackend, WithTheHotCacheOffThePoolOnlyStagesWrites) {
  LMCacheEngineConfig cfg = toy_config(4, 8);
  cfg.local_cpu = false;
  LMCacheEngine e(cfg, toy_metadata());
  store(e, seq(64, 1));
  EXPECT_EQ(e.storage_manager().local_cpu().size(), 0u);
  // The four staging objects are held by the pending disk writes: the next store saves nothing.
  EXPECT_EQ(e.storage_manager().allocator().total_allocated_size(), 4 * kChunkBytes);
  EXPECT_TRUE(store(e, seq(16, 900)).stored.empty());
  e.storage_manager().complete_all_writes();
  EXPECT_EQ(e.storage_manager().allocator().total_allocated_size(), 0u);
  EXPECT_EQ(lookup(e, seq(64, 1)).hit_tokens, 64);
}

}  // namespace
}  // namespace kvtwin::model::lmcache
