// ChunkedTokenDatabase: chunk boundaries, the prefix chain, masks and the hashes+offsets mode
// (LMCache's tests/v1/test_token_database.py, restated).
#include "model/lmcache/token_database.h"

#include <gtest/gtest.h>

#include "model/lmcache/upstream_error.h"
#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using testing::seq;
using testing::toy_metadata;

ChunkedTokenDatabase make_db(KeyScopeRegistry* r, int chunk, bool unfull,
                             std::string algo = "sha256_cbor", std::string seed = "0") {
  return ChunkedTokenDatabase({chunk, unfull, algo, seed}, toy_metadata(), false, r);
}

TEST(ChunkedTokenDatabase, ChunkBoundariesForEveryChunkSizeAndUnfullSetting) {
  std::vector<TokenId> tokens = seq(2500);
  for (int chunk : {16, 64, 256}) {
    for (bool unfull : {false, true}) {
      KeyScopeRegistry r;
      std::vector<ChunkSpan> spans = make_db(&r, chunk, unfull).process_tokens(tokens);
      size_t full = 2500 / chunk;
      ASSERT_EQ(spans.size(), full + (unfull && 2500 % chunk ? 1 : 0)) << chunk << unfull;
      for (size_t i = 0; i < spans.size(); ++i) {
        EXPECT_EQ(spans[i].start, static_cast<int64_t>(i) * chunk);
        EXPECT_EQ(spans[i].end, std::min<int64_t>(spans[i].start + chunk, 2500));
      }
    }
  }
}

TEST(ChunkedTokenDatabase, MaskingKChunksRemovesExactlyTheFirstK) {
  KeyScopeRegistry r;
  ChunkedTokenDatabase db = make_db(&r, 64, true);
  std::vector<TokenId> tokens = seq(1000);
  std::vector<ChunkSpan> all = db.process_tokens(tokens);
  for (int k = 0; k <= 4; ++k) {
    std::vector<ChunkSpan> masked = db.process_tokens(tokens, 64 * k);
    ASSERT_EQ(masked.size(), all.size() - k);
    for (size_t i = 0; i < masked.size(); ++i) {
      EXPECT_EQ(masked[i].start, all[i + k].start);
      EXPECT_EQ(masked[i].hash, all[i + k].hash);  // the chain still covers masked chunks
    }
  }
}

TEST(ChunkedTokenDatabase, MaskThatIsNotAChunkMultipleRaisesValueError) {
  KeyScopeRegistry r;
  ChunkedTokenDatabase db = make_db(&r, 16, false);
  try {
    db.process_tokens(seq(64), 8);
    FAIL() << "no error";
  } catch (const UpstreamError& e) {
    EXPECT_EQ(e.kind(), PyError::kValueError);
  }
}

TEST(ChunkedTokenDatabase, PartialChunkKeyDiffersFromTheFullChunkAtThatPosition) {
  KeyScopeRegistry r;
  ChunkedTokenDatabase db = make_db(&r, 16, true);
  std::vector<TokenId> t = seq(40);
  std::vector<ChunkSpan> short_seq = db.process_tokens(std::span(t).first(24));
  std::vector<ChunkSpan> long_seq = db.process_tokens(t);
  EXPECT_EQ(short_seq[0].hash, long_seq[0].hash);
  EXPECT_FALSE(short_seq[1].hash == long_seq[1].hash);
}

TEST(ChunkedTokenDatabase, HashesAndOffsetsYieldRunningSumsUpToTheShorterList) {
  KeyScopeRegistry r;
  ChunkedTokenDatabase db = make_db(&r, 16, true);
  std::vector<ChunkHash> hashes = {ChunkHash::from_int(1), ChunkHash::from_int(2),
                                   ChunkHash::from_int(3)};
  std::vector<int64_t> offsets = {16, 5};
  std::vector<ChunkSpan> spans = db.process_hashes(hashes, offsets);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].start, 16);
  EXPECT_EQ(spans[1].end, 21);
  EXPECT_EQ(spans[1].hash, ChunkHash::from_int(2));
}

TEST(ChunkedTokenDatabase, BuiltinModeIsAnOpaqueDeterministicIntChainPerSeed) {
  KeyScopeRegistry r;
  std::vector<TokenId> t = seq(48);
  auto a = make_db(&r, 16, false, "builtin", "0").process_tokens(t);
  auto b = make_db(&r, 16, false, "builtin", "0").process_tokens(t);
  auto c = make_db(&r, 16, false, "builtin", "1").process_tokens(t);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_FALSE(a[0].hash.is_digest());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i].hash, b[i].hash);
    EXPECT_FALSE(a[i].hash == c[i].hash);
  }
}

TEST(ChunkedTokenDatabase, AChainMemoOfAGrowingSequenceGivesTheSameSpansAsNoMemo) {
  std::vector<TokenId> t = seq(1000);
  for (const char* algo : {"sha256_cbor", "builtin"}) {
    for (bool unfull : {false, true}) {
      KeyScopeRegistry r;
      ChunkedTokenDatabase db = make_db(&r, 64, unfull, algo);
      ChunkHashChain chain;
      for (size_t len : {0, 30, 64, 200, 200, 640, 1000}) {
        std::span<const TokenId> prefix = std::span(t).first(len);
        for (int64_t masked : {0, 64, 128}) {
          std::vector<ChunkSpan> plain = db.process_tokens(prefix, masked);
          std::vector<ChunkSpan> memo = db.process_tokens(prefix, masked, &chain);
          ASSERT_EQ(plain.size(), memo.size()) << algo << unfull << len;
          for (size_t i = 0; i < plain.size(); ++i) {
            EXPECT_EQ(plain[i].start, memo[i].start);
            EXPECT_EQ(plain[i].end, memo[i].end);
            EXPECT_TRUE(plain[i].hash == memo[i].hash) << algo << unfull << len << " chunk " << i;
          }
        }
        EXPECT_EQ(chain.hashes.size(), len / 64) << "only full chunks are memoised";
      }
    }
  }
}

// The memo may cover more of its sequence than a call's tokens (a store of a tracker shorter than
// the request its lookups saw): a trailing partial chunk at an index the memo holds as full is
// hashed from its own tokens, and the memo is left as it was.
TEST(ChunkedTokenDatabase, AShorterPrefixAfterALongerOneHashesItsPartialChunkFromItsTokens) {
  std::vector<TokenId> t = seq(1000);
  for (const char* algo : {"sha256_cbor", "builtin"}) {
    KeyScopeRegistry r;
    ChunkedTokenDatabase db = make_db(&r, 64, /*unfull=*/true, algo);
    ChunkHashChain chain;
    db.process_tokens(t, 0, &chain);
    const std::vector<ChunkHash> full = chain.hashes;
    ASSERT_EQ(full.size(), 15u);
    for (size_t len : {30, 100, 200, 650, 900}) {  // each len / 64 < 15
      std::span<const TokenId> prefix = std::span(t).first(len);
      std::vector<ChunkSpan> plain = db.process_tokens(prefix);
      std::vector<ChunkSpan> memo = db.process_tokens(prefix, 0, &chain);
      ASSERT_EQ(plain.size(), memo.size()) << algo << len;
      ASSERT_EQ(plain.back().end - plain.back().start, static_cast<int64_t>(len % 64));
      for (size_t i = 0; i < plain.size(); ++i)
        EXPECT_TRUE(plain[i].hash == memo[i].hash) << algo << len << " chunk " << i;
      EXPECT_FALSE(memo.back().hash == full[len / 64]) << "the full chunk's hash";
      EXPECT_EQ(chain.hashes, full);
    }
  }
}

TEST(ChunkedTokenDatabase, AChainMemoFromAnotherConfigurationIsDiscarded) {
  std::vector<TokenId> t = seq(512);
  KeyScopeRegistry r;
  ChunkedTokenDatabase a = make_db(&r, 64, false, "sha256_cbor", "0");
  ChunkedTokenDatabase b = make_db(&r, 64, false, "sha256_cbor", "1");
  ChunkedTokenDatabase c = make_db(&r, 128, false, "sha256_cbor", "0");
  ChunkHashChain chain;
  a.process_tokens(t, 0, &chain);
  for (ChunkedTokenDatabase* db : {&b, &c}) {
    std::vector<ChunkSpan> plain = db->process_tokens(t);
    std::vector<ChunkSpan> memo = db->process_tokens(t, 0, &chain);
    ASSERT_EQ(plain.size(), memo.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(plain[i].hash == memo[i].hash) << i;
  }
}

TEST(ChunkedTokenDatabase, MlaWithSaveOnlyFirstRankWritesWorldSizeOneIntoKeys) {
  KeyScopeRegistry r;
  LMCacheMetadata m = toy_metadata(3, 8);
  m.use_mla = true;
  ChunkedTokenDatabase db({16, false, "sha256_cbor", "0"}, m, true, &r);
  EXPECT_EQ(db.key_world_size(), 1);
  EXPECT_EQ(db.key_scope(nullptr)->prefix, "toy-model@1@3@");
}

}  // namespace
}  // namespace kvtwin::model::lmcache
