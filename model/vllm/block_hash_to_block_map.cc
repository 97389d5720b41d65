#include "model/vllm/block_hash_to_block_map.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

BlockHashToBlockMap::BlockHashToBlockMap(int num_blocks)
    : chain_prev_(static_cast<size_t>(num_blocks), kNoBlock),
      chain_next_(static_cast<size_t>(num_blocks), kNoBlock),
      in_chain_(static_cast<size_t>(num_blocks), 0),
      head_slot_(static_cast<size_t>(num_blocks), 0) {
  size_t capacity = 16;
  while (capacity < 2 * static_cast<size_t>(num_blocks)) capacity *= 2;
  table_.resize(capacity);
  mask_ = capacity - 1;
}

size_t BlockHashToBlockMap::find_slot(std::span<const KVCacheBlock> blocks, uint64_t hash,
                                      std::span<const uint8_t> hash_bytes,
                                      uint32_t group_id) const {
  for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
    const Slot& s = table_[i];
    if (s.head == kNoBlock) return i;
    if (s.hash == hash &&
        blocks[static_cast<size_t>(s.head)].block_hash.matches(hash_bytes, group_id))
      return i;
  }
}

BlockId BlockHashToBlockMap::get_one_block(std::span<const KVCacheBlock> blocks,
                                           std::span<const uint8_t> hash_bytes,
                                           uint32_t group_id) const {
  uint64_t h = prefix_key_hash64(hash_bytes, group_id);
  return table_[find_slot(blocks, h, hash_bytes, group_id)].head;
}

void BlockHashToBlockMap::insert(std::span<const KVCacheBlock> blocks, BlockId block) {
  const BlockHashWithGroupId& key = blocks[static_cast<size_t>(block)].block_hash;
  KVTWIN_CHECK(!key.empty()) << "inserting block " << block << " without a hash";
  KVTWIN_CHECK(!in_chain(block)) << "block " << block << " is already cached";
  uint32_t group = key.group_id();
  uint64_t h = prefix_key_hash64(key.block_hash(), group);
  size_t i = find_slot(blocks, h, key.block_hash(), group);
  Slot& s = table_[i];
  in_chain_[static_cast<size_t>(block)] = 1;
  chain_next_[static_cast<size_t>(block)] = kNoBlock;
  if (s.head == kNoBlock) {
    s = Slot{h, block, block};
    head_slot_[static_cast<size_t>(block)] = static_cast<uint32_t>(i);
    chain_prev_[static_cast<size_t>(block)] = kNoBlock;
    ++size_;
    KVTWIN_CHECK_LE(static_cast<size_t>(size_), table_.size() / 2) << "prefix cache overfull";
    return;
  }
  chain_next_[static_cast<size_t>(s.tail)] = block;
  chain_prev_[static_cast<size_t>(block)] = s.tail;
  s.tail = block;
}

bool BlockHashToBlockMap::pop(std::span<const KVCacheBlock> blocks, BlockId block) {
  if (blocks[static_cast<size_t>(block)].block_hash.empty() || !in_chain(block)) return false;
  // The chain's table slot, found from its head (chains are short: usually one block).
  BlockId head = block;
  while (chain_prev_[static_cast<size_t>(head)] != kNoBlock)
    head = chain_prev_[static_cast<size_t>(head)];
  size_t i = head_slot_[static_cast<size_t>(head)];
  Slot& s = table_[i];
  KVTWIN_CHECK_EQ(s.head, head) << "stale table slot of chain head " << head;
  BlockId prev = chain_prev_[static_cast<size_t>(block)];
  BlockId next = chain_next_[static_cast<size_t>(block)];
  if (prev == kNoBlock) {
    s.head = next;
    if (next != kNoBlock) head_slot_[static_cast<size_t>(next)] = static_cast<uint32_t>(i);
  } else {
    chain_next_[static_cast<size_t>(prev)] = next;
  }
  if (next == kNoBlock) {
    s.tail = prev;
  } else {
    chain_prev_[static_cast<size_t>(next)] = prev;
  }
  chain_prev_[static_cast<size_t>(block)] = chain_next_[static_cast<size_t>(block)] = kNoBlock;
  in_chain_[static_cast<size_t>(block)] = 0;
  if (s.head == kNoBlock) {
    erase_slot(i);
    --size_;
  }
  return true;
}

// Backward-shift deletion keeps every remaining key reachable from its home slot without
// tombstones.
void BlockHashToBlockMap::erase_slot(size_t i) {
  table_[i] = Slot{};
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    if (table_[j].head == kNoBlock) return;
    size_t home = table_[j].hash & mask_;
    bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
    if (movable) {
      table_[i] = table_[j];
      head_slot_[static_cast<size_t>(table_[i].head)] = static_cast<uint32_t>(i);
      table_[j] = Slot{};
      i = j;
    }
  }
}

void BlockHashToBlockMap::clear() {
  for (Slot& s : table_) {
    for (BlockId b = s.head; b != kNoBlock;) {
      BlockId next = chain_next_[static_cast<size_t>(b)];
      chain_prev_[static_cast<size_t>(b)] = chain_next_[static_cast<size_t>(b)] = kNoBlock;
      in_chain_[static_cast<size_t>(b)] = 0;
      b = next;
    }
    s = Slot{};
  }
  size_ = 0;
}

void BlockHashToBlockMap::check_invariants(std::span<const KVCacheBlock> blocks) const {
  int keys = 0;
  size_t chained = 0;
  for (size_t i = 0; i < table_.size(); ++i) {
    const Slot& s = table_[i];
    if (s.head == kNoBlock) continue;
    ++keys;
    const BlockHashWithGroupId& key = blocks[static_cast<size_t>(s.head)].block_hash;
    KVTWIN_CHECK(!key.empty()) << "chain head " << s.head << " has no key";
    KVTWIN_CHECK_EQ(s.hash, prefix_key_hash64(key.block_hash(), key.group_id()));
    KVTWIN_CHECK_EQ(find_slot(blocks, s.hash, key.block_hash(), key.group_id()), i)
        << "key unreachable from its home slot";
    KVTWIN_CHECK_EQ(head_slot_[static_cast<size_t>(s.head)], i) << "stale head slot";
    BlockId prev = kNoBlock;
    for (BlockId b = s.head; b != kNoBlock; b = chain_next_[static_cast<size_t>(b)]) {
      KVTWIN_CHECK(in_chain(b)) << "block " << b << " linked but not marked";
      KVTWIN_CHECK(blocks[static_cast<size_t>(b)].block_hash == key)
          << "block " << b << " cached under another key";
      KVTWIN_CHECK_EQ(chain_prev_[static_cast<size_t>(b)], prev);
      prev = b;
      ++chained;
      KVTWIN_CHECK_LE(chained, blocks.size()) << "chain cycle";
    }
    KVTWIN_CHECK_EQ(s.tail, prev) << "chain tail mismatch";
  }
  KVTWIN_CHECK_EQ(keys, size_) << "key count out of sync";
  size_t with_key = 0;
  for (const KVCacheBlock& b : blocks) {
    bool has = !b.block_hash.empty();
    KVTWIN_CHECK_EQ(has, in_chain(b.block_id))
        << "block " << b.block_id << ": hash and prefix-cache membership disagree";
    with_key += has;
  }
  KVTWIN_CHECK_EQ(with_key, chained);
}

}  // namespace kvtwin::model::vllm
