#include "model/vllm/block_hash_to_block_map.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvtwin::model::vllm {
namespace {

BlockHash hash_of(uint8_t seed, size_t size = 32) {
  std::vector<uint8_t> b(size);
  for (size_t i = 0; i < size; ++i) b[i] = static_cast<uint8_t>(seed * 31 + i);
  return BlockHash(b);
}

struct MapFixture {
  explicit MapFixture(int n) : blocks(static_cast<size_t>(n)), map(n) {
    for (int i = 0; i < n; ++i) blocks[static_cast<size_t>(i)].block_id = i;
  }
  void cache(BlockId b, const BlockHash& h, uint32_t group) {
    blocks[static_cast<size_t>(b)].block_hash = BlockHashWithGroupId(h.bytes(), group);
    map.insert(blocks, b);
  }
  bool pop(BlockId b) {
    bool ok = map.pop(blocks, b);
    if (ok) blocks[static_cast<size_t>(b)].block_hash.reset();
    return ok;
  }
  BlockId get(const BlockHash& h, uint32_t group) const {
    return map.get_one_block(blocks, h.bytes(), group);
  }
  std::vector<KVCacheBlock> blocks;
  BlockHashToBlockMap map;
};

TEST(BlockHashToBlockMap, DuplicatesShareAKeyAndTheFirstInsertedIsReturned) {
  MapFixture f(8);
  BlockHash h = hash_of(1);
  f.cache(5, h, 0);
  f.cache(2, h, 0);
  f.cache(7, h, 0);
  EXPECT_EQ(f.map.size(), 1);
  EXPECT_EQ(f.get(h, 0), 5);
  EXPECT_TRUE(f.pop(5));
  EXPECT_EQ(f.get(h, 0), 2);
  EXPECT_TRUE(f.pop(7));
  EXPECT_EQ(f.get(h, 0), 2);
  EXPECT_TRUE(f.pop(2));
  EXPECT_EQ(f.get(h, 0), kNoBlock);
  EXPECT_EQ(f.map.size(), 0);
  f.map.check_invariants(f.blocks);
}

TEST(BlockHashToBlockMap, TheGroupIdIsPartOfTheKey) {
  MapFixture f(4);
  BlockHash h = hash_of(3);
  f.cache(1, h, 0);
  EXPECT_EQ(f.get(h, 1), kNoBlock);
  f.cache(2, h, 1);
  EXPECT_EQ(f.get(h, 0), 1);
  EXPECT_EQ(f.get(h, 1), 2);
  EXPECT_EQ(f.map.size(), 2);
}

TEST(BlockHashToBlockMap, PoppingAnUncachedBlockChangesNothing) {
  MapFixture f(4);
  f.cache(1, hash_of(1), 0);
  EXPECT_FALSE(f.pop(3));
  EXPECT_EQ(f.map.size(), 1);
  f.map.check_invariants(f.blocks);
}

TEST(BlockHashToBlockMap, KeysStayReachableAfterManyInsertionsAndRemovals) {
  const int n = 300;
  MapFixture f(n);
  for (int b = 0; b < n; ++b) f.cache(b, hash_of(static_cast<uint8_t>(b % 97), 16 + b % 2 * 16), 0);
  f.map.check_invariants(f.blocks);
  for (int b = 0; b < n; b += 3) ASSERT_TRUE(f.pop(b));
  f.map.check_invariants(f.blocks);
  for (int b = 1; b < n; b += 3) {
    const BlockHash h = hash_of(static_cast<uint8_t>(b % 97), 16 + b % 2 * 16);
    EXPECT_NE(f.get(h, 0), kNoBlock);
  }
  f.map.clear();
  EXPECT_EQ(f.map.size(), 0);
}

TEST(BlockHashToBlockMap, MergedKeysLongerThanTheInlineBufferWork) {
  MapFixture f(4);
  std::vector<uint8_t> merged(64, 7);
  merged[63] = 9;
  f.blocks[3].block_hash = BlockHashWithGroupId(merged, 2);
  f.map.insert(f.blocks, 3);
  EXPECT_EQ(f.map.get_one_block(f.blocks, merged, 2), 3);
  merged[63] = 8;
  EXPECT_EQ(f.map.get_one_block(f.blocks, merged, 2), kNoBlock);
  EXPECT_EQ(f.blocks[3].block_hash.size(), 68u);
  EXPECT_EQ(f.blocks[3].block_hash.group_id(), 2u);
}

TEST(BlockHashWithGroupId, AssignInPlaceGivesTheSameKeyAsConstruction) {
  // Digest sizes of xxh3-128, sha256 and a merged pair (past the inline buffer), over a key that
  // held another size before, so that stale bytes or a stale heap buffer would show.
  for (size_t n : {16u, 32u, 64u}) {
    for (size_t before : {16u, 32u, 64u}) {
      std::vector<uint8_t> bytes(n), old(before, 0xee);
      for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(7 * i + n);
      BlockHashWithGroupId key(old, 9);
      key.assign(bytes, 0x01020304u);
      BlockHashWithGroupId expected(bytes, 0x01020304u);
      EXPECT_TRUE(key == expected) << n << " after " << before;
      EXPECT_EQ(key.group_id(), 0x01020304u);
      EXPECT_TRUE(key.matches(bytes, 0x01020304u));
      EXPECT_EQ(key.hex(), expected.hex());
    }
  }
}

}  // namespace
}  // namespace kvtwin::model::vllm
