// CacheEngineKey strings, disk file names, tags and layer keys against LMCache's own output
// (../shared/golden/lmcache/public/lmcache_hash_vectors.json).
#include "model/lmcache/cache_engine_key.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "model/lmcache/token_database.h"
#include "tests/support/paths.h"

namespace kvtwin::model::lmcache {
namespace {

struct VectorCase {
  TokenDatabaseConfig tdb;
  LMCacheMetadata metadata;
  int64_t mask_false;
  RequestConfigs configs;
  bool has_configs;
  std::vector<TokenId> tokens;
};

VectorCase read_case(simdjson::dom::element c) {
  VectorCase v;
  v.tdb.chunk_size = static_cast<int>(int64_t(c["chunk_size"]));
  v.tdb.save_unfull_chunk = bool(c["save_unfull_chunk"]);
  v.tdb.pre_caching_hash_algorithm = "sha256_cbor";
  v.tdb.python_hash_seed = "0";
  v.metadata.model_name = std::string(std::string_view(c["model_name"]));
  v.metadata.world_size = static_cast<int>(int64_t(c["world_size"]));
  v.metadata.worker_id = static_cast<int>(int64_t(c["worker_id"]));
  v.metadata.kv_dtype = *dtype_from_name(std::string_view(c["dtype"]));
  v.metadata.use_mla = bool(c["use_mla"]);
  v.mask_false = int64_t(c["mask_false"]);
  v.has_configs = !c["request_configs"].is_null();
  if (v.has_configs) {
    for (auto [k, val] : c["request_configs"].get_object())
      v.configs.emplace_back(std::string(k), ConfigValue::str(std::string(std::string_view(val))));
  }
  for (int64_t t : c["tokens"].get_array()) v.tokens.push_back(t);
  return v;
}

TEST(CacheEngineKey, StringsDiskFilesAndLayerKeysMatchLmcacheVectors) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc =
      parser.load(kvtwin::testing::shared_path("golden/lmcache/public/lmcache_hash_vectors.json"));
  int chunks = 0, layer_keys = 0, tagged = 0, mla = 0, slashes = 0;
  for (simdjson::dom::element c : doc["cases"].get_array()) {
    VectorCase v = read_case(c);
    KeyScopeRegistry registry;
    // save_only_first_rank defaults to use_mla: MLA keys carry world size 1.
    ChunkedTokenDatabase db(v.tdb, v.metadata, v.metadata.use_mla, &registry);
    const KeyScope* scope = db.key_scope(v.has_configs ? &v.configs : nullptr);
    std::vector<ChunkSpan> spans = db.process_tokens(v.tokens, v.mask_false);
    simdjson::dom::array expected = c["chunks"].get_array();
    ASSERT_EQ(spans.size(), expected.size());
    size_t i = 0;
    for (simdjson::dom::element ch : expected) {
      CacheEngineKey key = ChunkedTokenDatabase::make_key(spans[i].hash, scope);
      EXPECT_EQ(spans[i].start, int64_t(ch["start"]));
      EXPECT_EQ(spans[i].end, int64_t(ch["end"]));
      EXPECT_EQ(key.to_string(), std::string_view(ch["key"]));
      EXPECT_EQ(key.disk_file_name(), std::string_view(ch["disk_file"]));
      if (!ch["layer_keys"].error()) {
        int l = 0;
        for (simdjson::dom::element lk : ch["layer_keys"].get_array()) {
          EXPECT_EQ(key.layer(l++).to_string(), std::string_view(lk));
          ++layer_keys;
        }
      }
      ++i;
      ++chunks;
    }
    tagged += v.has_configs ? 1 : 0;
    mla += v.metadata.use_mla ? 1 : 0;
    slashes += v.metadata.model_name.find('/') != std::string::npos ? 1 : 0;
  }
  EXPECT_GT(chunks, 30);
  EXPECT_GT(layer_keys, 0);
  EXPECT_GT(tagged, 0);
  EXPECT_GT(mla, 0);
  EXPECT_GT(slashes, 0);
}

TEST(CacheEngineKey, FirstChunkCborBytesMatchTheVectors) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc =
      parser.load(kvtwin::testing::shared_path("golden/lmcache/public/lmcache_hash_vectors.json"));
  vllm::BlockHash none = vllm::none_hash(vllm::HashFn::kSha256Cbor, "0");
  for (simdjson::dom::element c : doc["cases"].get_array()) {
    VectorCase v = read_case(c);
    // The first returned chunk's parent is the previous chunk's hash (or NONE_HASH).
    KeyScopeRegistry registry;
    ChunkedTokenDatabase db(v.tdb, v.metadata, false, &registry);
    std::vector<ChunkSpan> all = db.process_tokens(v.tokens, 0);
    std::vector<ChunkSpan> shown = db.process_tokens(v.tokens, v.mask_false);
    ASSERT_FALSE(shown.empty());
    size_t first = all.size() - shown.size();
    vllm::BlockHash parent = first == 0 ? none : all[first - 1].hash.digest();
    std::vector<uint8_t> bytes;
    std::span<const TokenId> toks(v.tokens);
    vllm::encode_block_key_cbor(parent.bytes(),
                                toks.subspan(static_cast<size_t>(shown[0].start),
                                             static_cast<size_t>(shown[0].end - shown[0].start)),
                                nullptr, &bytes);
    EXPECT_EQ(vllm::to_hex(bytes), std::string_view(c["cbor_hex_first_chunk"]));
  }
}

TEST(CacheEngineKey, TagsFollowInsertionOrderAndIgnoreOtherConfigs) {
  KeyScopeRegistry registry;
  RequestConfigs configs = {{"lmcache.tag.user", ConfigValue::str("alice")},
                            {"lmcache.other", ConfigValue::str("x")},
                            {"lmcache.tag.app", ConfigValue::integer(7)}};
  const KeyScope* s = registry.intern("m/x", 2, 1, KvDtype::kBfloat16, tags_of(&configs));
  CacheEngineKey k{s, ChunkHash::from_int(255), -1};
  EXPECT_EQ(k.to_string(), "m/x@2@1@ff@bfloat16@user%alice@app%7");
  EXPECT_EQ(k.layer(3).to_string(), "m/x@2@1@ff@bfloat16@3@user%alice@app%7");
  EXPECT_EQ(k.disk_file_name(), "m-x@2@1@ff@bfloat16@user%alice@app%7.pt");
  EXPECT_EQ(k.kid(), "ff@bfloat16@user%alice@app%7");
}

TEST(CacheEngineKey, NegativeBuiltinHashPrintsLikePythonFormat) {
  KeyScopeRegistry registry;
  const KeyScope* s = registry.intern("m", 1, 0, KvDtype::kHalf, {});
  EXPECT_EQ((CacheEngineKey{s, ChunkHash::from_int(-26), -1}).kid(), "-1a@half");
  EXPECT_EQ((CacheEngineKey{s, ChunkHash::from_int(INT64_MIN), -1}).kid(),
            "-8000000000000000@half");
}

TEST(CacheEngineKey, LayerKeysNeverEqualChunkKeysAndScopesCompareByContent) {
  KeyScopeRegistry a, b;
  const KeyScope* sa = a.intern("m", 1, 0, KvDtype::kHalf, {});
  const KeyScope* sb = b.intern("m", 1, 0, KvDtype::kHalf, {});
  CacheEngineKey ka{sa, ChunkHash::from_int(5), -1};
  CacheEngineKey kb{sb, ChunkHash::from_int(5), -1};
  EXPECT_EQ(ka, kb);
  EXPECT_EQ(ka.fingerprint(), kb.fingerprint());
  EXPECT_FALSE(ka == ka.layer(0));
  EXPECT_FALSE(ka.layer(0) == ka.layer(1));
  const KeyScope* other_worker = a.intern("m", 1, 1, KvDtype::kHalf, {});
  EXPECT_FALSE(ka == (CacheEngineKey{other_worker, ChunkHash::from_int(5), -1}));
  // A tag "1" and a tag 1 are different tuple entries upstream.
  RequestConfigs s1 = {{"lmcache.tag.t", ConfigValue::str("1")}};
  RequestConfigs i1 = {{"lmcache.tag.t", ConfigValue::integer(1)}};
  EXPECT_NE(a.intern("m", 1, 0, KvDtype::kHalf, tags_of(&s1)),
            a.intern("m", 1, 0, KvDtype::kHalf, tags_of(&i1)));
}

}  // namespace
}  // namespace kvtwin::model::lmcache
