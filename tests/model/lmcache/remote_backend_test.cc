// RemoteBackend over the shared Redis stand-in: the metadata header, existence by metadata only,
// a lost kv_bytes key (metadata deleted, the object dropped, later keys still fetched), no remote
// remove, and write-back into the CPU tier.
#include "model/lmcache/remote_backend.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model/vllm/block_hash.h"
#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using namespace testing;

TEST(RemoteBackend, PutWritesKvBytesAndTheTwentyEightByteMetadataAtCompletion) {
  LMCacheEngine e(toy_config(8, 0, true), toy_metadata());
  std::vector<TokenId> a = seq(32, 1);
  StoreResult r = store(e, a);
  ASSERT_EQ(r.stored.size(), 2u);
  const RemoteKvStore& redis = *e.storage_manager().shared().remote;
  EXPECT_EQ(redis.size(), 0u);                                 // held until completion
  EXPECT_EQ(e.storage_manager().pending_writes().size(), 1u);  // one job per batched put
  EXPECT_EQ(e.storage_manager().pending_writes()[0].keys.size(), 2u);
  std::vector<PendingWrite> sizes = e.storage_manager().pending_writes(0, /*with_keys=*/false);
  ASSERT_EQ(sizes.size(), 1u);
  EXPECT_EQ(sizes[0].tier, Tier::kRemote);
  EXPECT_EQ(sizes[0].bytes, 2 * kChunkBytes);
  EXPECT_TRUE(sizes[0].keys.empty());
  e.storage_manager().complete_all_writes();
  ASSERT_EQ(redis.size(), 2u);
  const std::map<std::string, RemoteKvStore::Entry> sorted = redis.entries();
  const auto& [key, entry] = *sorted.begin();
  EXPECT_EQ(entry.kv_bytes->length, kChunkBytes);
  // length 16384, KV_2LTD, float16 code 2, shape [2, 2, 16, 128]
  EXPECT_EQ(vllm::to_hex(*entry.metadata),
            "00400000010000000200000002000000020000001000000080000000");
  for (const auto& [k, id] : e.storage_manager().local_cpu().entries())
    EXPECT_EQ(e.storage_manager().allocator().obj(id).ref_count, 1);
}

TEST(RemoteBackend, LostKvBytesDeletesMetadataAndLaterKeysAreStillFetched) {
  LMCacheEngine e(toy_config(8, 0, true), toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  e.clear(std::nullopt, nullptr, nullptr);
  auto infos = e.chunk_infos(a, nullptr);
  RemoteKvStore& redis = *e.storage_manager().shared().remote;
  redis.delete_kv_bytes(infos[1].key.to_string());
  EXPECT_EQ(lookup(e, a, "a", true).hit_tokens, 64);  // EXISTS looks at the metadata only
  RetrieveResult r = retrieve(e, a, "a");
  ASSERT_EQ(r.gets.size(), 1u);
  EXPECT_EQ(r.gets[0].num_keys, 4);
  EXPECT_EQ(r.gets[0].leading_non_null, 1);
  EXPECT_EQ(r.gets[0].non_null, 3);
  EXPECT_EQ(redis.metadata(infos[1].key.to_string()), nullptr);
  // The partial-retrieve quirk: the chunk ending at the failure is dropped but its tokens count.
  EXPECT_EQ(r.ret_tokens, 16);
  EXPECT_TRUE(r.loaded.empty());
  // Every fetched object was leaked by LMCache and reclaimed when its last reference went.
  EXPECT_EQ(e.storage_manager().allocator().total_allocated_size(), 0u);
}

TEST(RemoteBackend, RemoveIsNotImplementedAndClearOnlyTouchesTheCpuTier) {
  LMCacheEngine e(toy_config(8, 0, true), toy_metadata());
  std::vector<TokenId> a = seq(32, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  std::vector<std::string> remote_only{"RemoteBackend"};
  EXPECT_EQ(e.clear(std::span<const TokenId>(a), &remote_only, nullptr).count, 0);
  e.clear(std::nullopt, nullptr, nullptr);
  EXPECT_EQ(e.storage_manager().shared().remote->size(), 2u);
}

TEST(RemoteBackend, ACompleteRemoteGetIsWrittenBackIntoTheCpuTier) {
  LMCacheEngine e(toy_config(8, 0, true), toy_metadata());
  std::vector<TokenId> a = seq(32, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  e.clear(std::nullopt, nullptr, nullptr);
  RetrieveResult r = retrieve(e, a);
  ASSERT_EQ(r.loaded.size(), 2u);
  EXPECT_EQ(r.loaded[0].location, "RemoteBackend");
  EXPECT_FALSE(r.loaded[0].bad);
  EXPECT_EQ(e.storage_manager().local_cpu().size(), 2u);
  RetrieveResult again = retrieve(e, a);
  EXPECT_EQ(again.loaded[0].location, "LocalCPUBackend");
}

TEST(RemoteBackend, SharedStoreServesAnotherEngineOfTheSameRank) {
  SharedStorage shared;
  LMCacheEngine writer(toy_config(8, 0, true), toy_metadata(), shared);
  LMCacheEngine reader(toy_config(8, 0, true), toy_metadata(), shared);
  std::vector<TokenId> a = seq(32, 1);
  store(writer, a);
  writer.storage_manager().complete_all_writes();
  EXPECT_EQ(lookup(reader, a).hit_tokens, 32);
  // Another rank's keys differ (worker id): no hit.
  LMCacheEngine rank1(toy_config(8, 0, true), toy_metadata(1, 2), shared);
  EXPECT_EQ(lookup(rank1, a).hit_tokens, 0);
}

}  // namespace
}  // namespace kvtwin::model::lmcache
