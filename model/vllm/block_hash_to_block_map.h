// BlockHashToBlockMap: the prefix cache, BlockHashWithGroupId → cached blocks
// (vLLM's block_pool.BlockHashToBlockMap).
//
// vLLM does not de-duplicate: the same content cached twice gives two blocks under one key.
// Upstream keeps, per key, one block or an insertion-ordered dict {block_id: block}; a lookup
// returns the first block inserted and still present, and pop removes one given block id. We keep
// the same order with an intrusive doubly linked chain per key (links_[block] = {prev, next,
// table slot when head, in-chain flag}: one 16-byte entry per block, so that unlinking a block
// touches one cache line) and an open-addressing table of chain heads:
//
//   table slot: {hash64, head, tail}      key K: head=5 ⇄ 9 ⇄ 2=tail   (inserted 5, 9, 2)
//
// The key bytes are not stored in the table: every block in a chain carries its key in
// KVCacheBlock::block_hash, so lookups compare against the head block's key. That is why the
// methods that compare keys take the pool's block array.
//
// Invariants: a block is in a chain iff it has a key, and then it is in the chain of exactly
// that key; chains are non-empty; size() is the number of keys. Capacity is fixed at
// construction (at most one key per block), so the table never grows.
//
// Threading: none (owned by one BlockPool).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/vllm/kv_cache_block.h"

namespace kvtwin::model::vllm {

class BlockHashToBlockMap {
 public:
  explicit BlockHashToBlockMap(int num_blocks);

  // The first block cached under hash_bytes ‖ group_id, or kNoBlock (get_one_block).
  BlockId get_one_block(std::span<const KVCacheBlock> blocks, std::span<const uint8_t> hash_bytes,
                        uint32_t group_id) const {
    return get_one_block(blocks, prefix_key_hash64(hash_bytes, group_id), hash_bytes, group_id);
  }
  // The same with hash = prefix_key_hash64(hash_bytes, group_id) computed by the caller.
  BlockId get_one_block(std::span<const KVCacheBlock> blocks, uint64_t hash,
                        std::span<const uint8_t> hash_bytes, uint32_t group_id) const {
    return table_[find_slot(blocks, hash, hash_bytes, group_id)].head;
  }

  // Cache hints for a pipelined run of lookups (they change nothing): prefetch_slot brings the
  // home slot of a key hash in; prefetch_head (issued later, once that slot has arrived) brings
  // in the block its chain starts with, whose key a lookup compares.
  void prefetch_slot(uint64_t hash) const { __builtin_prefetch(&table_[hash & mask_]); }
  void prefetch_head(std::span<const KVCacheBlock> blocks, uint64_t hash) const {
    BlockId head = table_[hash & mask_].head;
    if (head != kNoBlock) __builtin_prefetch(&blocks[static_cast<size_t>(head)]);
  }
  // Hints for pop(block): its links, then (once they have arrived) its chain's table slot.
  void prefetch_links(BlockId block) const {
    __builtin_prefetch(&links_[static_cast<size_t>(block)], 1);
  }
  void prefetch_pop_slot(BlockId block) const {
    const Link& l = links_[static_cast<size_t>(block)];
    if (l.in_chain && l.prev == kNoBlock) __builtin_prefetch(&table_[l.head_slot], 1);
  }
  // A demand load for a batch of pops (it changes nothing): reads what pop(block) reads first,
  // the block's links, then its chain's table slot, and returns a value the caller must consume
  // (e.g. an asm sink) so the loads are kept. A pass of these over a run of blocks before popping
  // them lets the out-of-order core overlap the run's cache misses. On the development VM (AMD
  // EPYC) the prefetch hints above did not hide the misses of the slot, whose address needs the
  // links first; this pass did (the eviction path's share of the samples, Mooncake run, 8
  // instances, first 1,800 s: 17.6 % → 15.4 %).
  // The slot after the chain's also: erase_slot's backward shift reads it (a quarter of the slots
  // end a cache line).
  uint32_t warm_pop(BlockId block) const {
    const Link& l = links_[static_cast<size_t>(block)];
    if (!l.in_chain || l.prev != kNoBlock) return 0;
    return static_cast<uint32_t>(table_[l.head_slot].head) +
           static_cast<uint32_t>(table_[(l.head_slot + 1) & mask_].head);
  }
  // Appends `block` to the chain of its key blocks[block].block_hash. REQUIRES: the block has a
  // key and is in no chain.
  void insert(std::span<const KVCacheBlock> blocks, BlockId block);
  // The same with hash = prefix_key_hash64 of the block's key computed by the caller.
  void insert(std::span<const KVCacheBlock> blocks, BlockId block, uint64_t hash);
  // Removes `block` from the chain of its key; returns false (and changes nothing) when the
  // block is not cached under that key (upstream's pop returning None).
  bool pop(std::span<const KVCacheBlock> blocks, BlockId block);
  // Forgets every key (the blocks' keys are reset by the caller).
  void clear();

  // Number of keys (len() of upstream's dict).
  int size() const { return size_; }

  // Calls fn(head_block) for every key, in table order (not insertion order: callers that
  // print must not depend on it), then the chain can be walked with chain_next().
  template <typename Fn>
  void for_each_key(Fn fn) const {
    for (const Slot& s : table_)
      if (s.head != kNoBlock) fn(s.head);
  }
  BlockId chain_next(BlockId b) const { return links_[static_cast<size_t>(b)].next; }
  bool in_chain(BlockId b) const { return links_[static_cast<size_t>(b)].in_chain != 0; }

  // Checks chains against the blocks' keys; O(num_blocks).
  void check_invariants(std::span<const KVCacheBlock> blocks) const;

 private:
  struct Slot {
    uint64_t hash = 0;
    BlockId head = kNoBlock;
    BlockId tail = kNoBlock;
  };
  // Index of the slot holding the key, or of the empty slot where it would go.
  // Inline: it is the inner loop of every prefix-cache lookup.
  size_t find_slot(std::span<const KVCacheBlock> blocks, uint64_t hash,
                   std::span<const uint8_t> hash_bytes, uint32_t group_id) const {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = table_[i];
      if (s.head == kNoBlock) return i;
      if (s.hash == hash &&
          blocks[static_cast<size_t>(s.head)].block_hash.matches(hash_bytes, group_id))
        return i;
    }
  }
  void erase_slot(size_t i);

  struct Link {
    BlockId prev = kNoBlock;
    BlockId next = kNoBlock;
    // Table slot of the chain (valid for heads only), so that pop needs no probing.
    uint32_t head_slot = 0;
    uint8_t in_chain = 0;
  };
  Link& link(BlockId b) { return links_[static_cast<size_t>(b)]; }
  const Link& link(BlockId b) const { return links_[static_cast<size_t>(b)]; }

  std::vector<Slot> table_;
  size_t mask_;
  int size_ = 0;
  std::vector<Link> links_;
};

}  // namespace kvtwin::model::vllm
