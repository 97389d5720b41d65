// RemoteBackend over the shared Redis stand-in: the metadata header, existence by metadata only,
// a lost kv_bytes key (metadata deleted, the object dropped, later keys still fetched), no remote
// remove, write-back into the CPU tier, and layerwise objects (3-D shapes: not written under the
// quirk, padded to 4-D with the fix).
#include "model/lmcache/remote_backend.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "model/lmcache/layerwise_tasks.h"
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

// A layerwise engine with CPU and Redis tiers.
LMCacheEngineConfig layerwise_remote_config(const Quirks& quirks) {
  LMCacheEngineConfig cfg = toy_config(16, 0, true);
  cfg.use_layerwise = true;
  cfg.quirks = quirks;
  return cfg;
}

// store_layer / retrieve_layer driven to the end, as the connector does over a step.
void store_layers(LMCacheEngine& e, const std::vector<TokenId>& tokens) {
  auto st = e.store_layer({TokenInput::of_tokens(tokens), 0, nullptr});
  while (st->next()) {
  }
  e.end_of_operation();
}
std::unique_ptr<RetrieveLayerTask> retrieve_layers(LMCacheEngine& e,
                                                   const std::vector<TokenId>& tokens) {
  auto rt = e.retrieve_layer({tokens, 0, std::nullopt, nullptr});
  while (rt->next()) {
  }
  e.end_of_operation();
  return rt;
}

// Layerwise objects are [T, 2, H*D]. f4261ef6's RemoteMetadata asserts a 4-D shape inside the
// writer: no SET happens, so nothing is sent (the pending write moves 0 bytes), the keys never
// exist and another engine finds nothing. With the fix (#2751) the shape is padded with a trailing
// zero, and the reader strips it and loads every layer from Redis.
TEST(RemoteBackend, LayerwiseObjectsReachRedisOnlyWithTheShapePaddingFix) {
  for (bool quirk : {true, false}) {
    SCOPED_TRACE(quirk ? "quirk" : "fixed");
    LMCacheEngineConfig cfg =
        layerwise_remote_config(quirk ? Quirks::upstream() : Quirks::all_fixed());
    SharedStorage shared;
    LMCacheEngine writer(cfg, toy_metadata(), shared);
    LMCacheEngine reader(cfg, toy_metadata(), shared);
    std::vector<TokenId> a = seq(32, 1);
    store_layers(writer, a);
    // One batched put per layer, each of the two chunks' objects of that layer.
    constexpr uint64_t kLayerObjectBytes = 16 * 2 * 128 * 2;
    std::vector<PendingWrite> w = writer.storage_manager().pending_writes(0, false);
    std::vector<uint64_t> bytes;
    for (const PendingWrite& p : w)
      if (p.tier == Tier::kRemote) bytes.push_back(p.bytes);
    EXPECT_EQ(bytes, std::vector<uint64_t>(2, quirk ? 0 : 2 * kLayerObjectBytes));
    writer.storage_manager().complete_all_writes();
    const RemoteKvStore& redis = *shared.remote;
    EXPECT_EQ(writer.storage_manager().events().remote_write_errors, quirk ? 4u : 0u);
    EXPECT_EQ(redis.size(), quirk ? 0u : 4u);
    EXPECT_EQ(redis.kv_bytes_total(), quirk ? 0u : 4 * kLayerObjectBytes);
    EXPECT_EQ(lookup(reader, a).hit_tokens, quirk ? 0 : 32);
    if (quirk) continue;
    // length 8192, KV_T2D (2), float16 (2), shape [16, 2, 128] padded with a 0
    EXPECT_EQ(vllm::to_hex(*redis.entries().begin()->second.metadata),
              "00200000020000000200000010000000020000008000000000000000");
    auto rt = retrieve_layers(reader, a);
    EXPECT_EQ(rt->ret_tokens(), 32);
    ASSERT_EQ(rt->loaded().size(), 2u);
    for (const LoadedChunk& c : rt->loaded()) {
      EXPECT_EQ(c.location, "RemoteBackend");
      EXPECT_FALSE(c.bad);  // every layer object holds its own key's content
    }
  }
}

// Chunk 1's layer-1 bytes vanish from Redis. Layer 1's non-blocking get returns only what it read:
// upstream zips chunk 2's object with chunk 1's key and leaves chunk 2 unwritten, both under their
// mask bits (wrong KV, Quirks::remote_prefetch_drops_missing_chunks); the fix stops at the miss.
TEST(RemoteBackend, LayerwiseLoadPastAMissingChunkIsWrongUpstreamAndAMissWithTheFix) {
  for (bool drops : {true, false}) {
    SCOPED_TRACE(drops ? "quirk" : "fixed");
    Quirks quirks = Quirks::all_fixed();  // layer objects reach Redis
    quirks.remote_prefetch_drops_missing_chunks = drops;
    LMCacheEngineConfig cfg = layerwise_remote_config(quirks);
    SharedStorage shared;
    LMCacheEngine writer(cfg, toy_metadata(), shared);
    LMCacheEngine reader(cfg, toy_metadata(), shared);
    std::vector<TokenId> a = seq(48, 1);
    store_layers(writer, a);
    writer.storage_manager().complete_all_writes();
    auto infos = reader.chunk_infos(a, nullptr);
    shared.remote->delete_kv_bytes(infos[1].key.layer(1).to_string());
    auto rt = retrieve_layers(reader, a);
    if (drops) {
      EXPECT_EQ(rt->ret_tokens(), 48);
      ASSERT_EQ(rt->loaded().size(), 3u);
      EXPECT_FALSE(rt->loaded()[0].bad);
      EXPECT_TRUE(rt->loaded()[1].bad);  // holds chunk 2's layer 1
      EXPECT_TRUE(rt->loaded()[2].bad);  // layer 1 never written
    } else {
      EXPECT_EQ(rt->ret_tokens(), 16);
      ASSERT_EQ(rt->loaded().size(), 1u);
      EXPECT_FALSE(rt->loaded()[0].bad);
    }
    // Every object fetched from Redis was released.
    EXPECT_EQ(reader.storage_manager().allocator().total_allocated_size(),
              reader.storage_manager().local_cpu().resident_bytes());
  }
}

// The server's byte count follows every SET and DEL of a kv_bytes key (a re-SET replaces).
TEST(RemoteKvStore, KvBytesTotalFollowsSetsReplacementsAndDeletes) {
  RemoteKvStore s;
  RemoteMetadataBytes m{};
  s.set_both("a", {100, 1}, m);
  s.set_kv_bytes("b", {50, 2});
  EXPECT_EQ(s.kv_bytes_total(), 150u);
  s.set_both("a", {30, 3}, m);  // replaces a's 100 bytes
  EXPECT_EQ(s.kv_bytes_total(), 80u);
  EXPECT_EQ(s.delete_metadata("a"), 1);  // metadata only: the bytes stay
  EXPECT_EQ(s.kv_bytes_total(), 80u);
  EXPECT_EQ(s.delete_kv_bytes("a"), 1);
  EXPECT_EQ(s.delete_kv_bytes("a"), 0);
  EXPECT_EQ(s.kv_bytes_total(), 50u);
  EXPECT_EQ(s.size(), 1u);
}

}  // namespace
}  // namespace kvtwin::model::lmcache
