#include "model/vllm/block_hash_to_block_map.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

BlockHashToBlockMap::BlockHashToBlockMap(int num_blocks) : links_(static_cast<size_t>(num_blocks)) {
  size_t capacity = 16;
  while (capacity < 2 * static_cast<size_t>(num_blocks)) capacity *= 2;
  table_.resize(capacity);
  mask_ = capacity - 1;
}

void BlockHashToBlockMap::insert(std::span<const KVCacheBlock> blocks, BlockId block) {
  const BlockHashWithGroupId& key = blocks[static_cast<size_t>(block)].block_hash;
  KVTWIN_CHECK(!key.empty()) << "inserting block " << block << " without a hash";
  insert(blocks, block, prefix_key_hash64(key.block_hash(), key.group_id()));
}

void BlockHashToBlockMap::insert(std::span<const KVCacheBlock> blocks, BlockId block, uint64_t h) {
  const BlockHashWithGroupId& key = blocks[static_cast<size_t>(block)].block_hash;
  KVTWIN_CHECK(!key.empty()) << "inserting block " << block << " without a hash";
  KVTWIN_CHECK(!in_chain(block)) << "block " << block << " is already cached";
  const size_t n = key.size() - 4;
  const uint8_t* bytes = key.bytes().data();
  const uint32_t group = uint32_t{bytes[n]} << 24 | uint32_t{bytes[n + 1]} << 16 |
                         uint32_t{bytes[n + 2]} << 8 | bytes[n + 3];
  size_t i = find_slot(blocks, h, {bytes, n}, group);
  Slot& s = table_[i];
  Link& l = link(block);
  l.in_chain = 1;
  l.next = kNoBlock;
  if (s.head == kNoBlock) {
    s = Slot{h, block, block};
    l.head_slot = static_cast<uint32_t>(i);
    l.prev = kNoBlock;
    ++size_;
    KVTWIN_CHECK_LE(static_cast<size_t>(size_), table_.size() / 2) << "prefix cache overfull";
    return;
  }
  link(s.tail).next = block;
  l.prev = s.tail;
  s.tail = block;
}

bool BlockHashToBlockMap::pop(std::span<const KVCacheBlock> blocks, BlockId block) {
  if (blocks[static_cast<size_t>(block)].block_hash.empty() || !in_chain(block)) return false;
  // The chain's table slot, found from its head (chains are short: usually one block).
  BlockId head = block;
  while (link(head).prev != kNoBlock) head = link(head).prev;
  size_t i = link(head).head_slot;
  Slot& s = table_[i];
  KVTWIN_CHECK_EQ(s.head, head) << "stale table slot of chain head " << head;
  Link& l = link(block);
  BlockId prev = l.prev;
  BlockId next = l.next;
  if (prev == kNoBlock) {
    s.head = next;
    if (next != kNoBlock) link(next).head_slot = static_cast<uint32_t>(i);
  } else {
    link(prev).next = next;
  }
  if (next == kNoBlock) {
    s.tail = prev;
  } else {
    link(next).prev = prev;
  }
  l = Link{};
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
      link(table_[i].head).head_slot = static_cast<uint32_t>(i);
      table_[j] = Slot{};
      i = j;
    }
  }
}

void BlockHashToBlockMap::clear() {
  for (Slot& s : table_) {
    for (BlockId b = s.head; b != kNoBlock;) {
      BlockId next = link(b).next;
      link(b) = Link{};
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
    KVTWIN_CHECK_EQ(link(s.head).head_slot, i) << "stale head slot";
    BlockId prev = kNoBlock;
    for (BlockId b = s.head; b != kNoBlock; b = link(b).next) {
      KVTWIN_CHECK(in_chain(b)) << "block " << b << " linked but not marked";
      KVTWIN_CHECK(blocks[static_cast<size_t>(b)].block_hash == key)
          << "block " << b << " cached under another key";
      KVTWIN_CHECK_EQ(link(b).prev, prev);
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
    if (!has) {
      const Link& l = link(b.block_id);
      KVTWIN_CHECK(l.prev == kNoBlock && l.next == kNoBlock)
          << "uncached block " << b.block_id << " still linked";
    }
  }
  KVTWIN_CHECK_EQ(with_key, chained);
}

}  // namespace kvtwin::model::vllm
