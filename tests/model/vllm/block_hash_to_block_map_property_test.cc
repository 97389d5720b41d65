// BlockHashToBlockMap against a simple reference (an ordered map from key to the blocks cached
// under it, in insertion order), under random inserts, pops and lookups with few distinct keys
// (long chains) and a small table (long probe runs, wrap-around, backward-shift deletion).
// RC_PARAMS=max_success=1000 in CI.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <utility>
#include <vector>

#include "model/vllm/block_hash_to_block_map.h"

namespace kvtwin::model::vllm {
namespace {

// Digest-like bytes for key k: 32 bytes, or 16 (xxhash-sized) for odd k.
std::vector<uint8_t> key_bytes(int k) {
  std::vector<uint8_t> b(k % 2 ? 16 : 32);
  uint64_t x = 0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(k + 1);
  for (uint8_t& byte : b) {
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    byte = static_cast<uint8_t>(x >> 56);
  }
  return b;
}

RC_GTEST_PROP(BlockHashToBlockMapProperty, AgreesWithAnInsertionOrderedReference, ()) {
  const int num_blocks = *rc::gen::inRange(1, 40);
  const int num_keys = *rc::gen::inRange(1, 12);
  const int num_groups = *rc::gen::inRange(1, 3);
  std::vector<KVCacheBlock> blocks(static_cast<size_t>(num_blocks));
  for (int i = 0; i < num_blocks; ++i) blocks[static_cast<size_t>(i)].block_id = i;
  BlockHashToBlockMap map(num_blocks);
  std::map<std::pair<int, int>, std::list<BlockId>> ref;  // (key, group) → blocks, oldest first
  std::vector<std::pair<int, int>> key_of(static_cast<size_t>(num_blocks), {-1, -1});

  const int num_ops = *rc::gen::inRange(1, 300);
  for (int op = 0; op < num_ops; ++op) {
    const int kind = *rc::gen::inRange(0, 3);
    const BlockId b = *rc::gen::inRange(0, num_blocks);
    const std::pair<int, int> key = {*rc::gen::inRange(0, num_keys),
                                     *rc::gen::inRange(0, num_groups)};
    auto& slot = key_of[static_cast<size_t>(b)];
    if (kind == 0 && slot.first < 0) {  // insert an uncached block
      blocks[static_cast<size_t>(b)].block_hash =
          BlockHashWithGroupId(key_bytes(key.first), static_cast<uint32_t>(key.second));
      map.insert(blocks, b);
      ref[key].push_back(b);
      slot = key;
    } else if (kind == 1) {  // pop (a no-op for an uncached block)
      bool cached = slot.first >= 0;
      RC_ASSERT(map.pop(blocks, b) == cached);
      if (cached) {
        ref[slot].remove(b);
        if (ref[slot].empty()) ref.erase(slot);
        blocks[static_cast<size_t>(b)].block_hash.reset();
        slot = {-1, -1};
      }
    } else {  // lookup
      auto it = ref.find(key);
      BlockId expected = it == ref.end() ? kNoBlock : it->second.front();
      RC_ASSERT(map.get_one_block(blocks, key_bytes(key.first),
                                  static_cast<uint32_t>(key.second)) == expected);
    }
    map.check_invariants(blocks);
    RC_ASSERT(map.size() == static_cast<int>(ref.size()));
  }
  // Every chain, walked from its head, lists its blocks in insertion order.
  int chains = 0;
  map.for_each_key([&](BlockId head) {
    std::vector<BlockId> chain;
    for (BlockId b = head; b != kNoBlock; b = map.chain_next(b)) chain.push_back(b);
    const auto& expected = ref.at(key_of[static_cast<size_t>(head)]);
    RC_ASSERT(chain == std::vector<BlockId>(expected.begin(), expected.end()));
    ++chains;
  });
  RC_ASSERT(chains == static_cast<int>(ref.size()));
}

}  // namespace
}  // namespace kvtwin::model::vllm
