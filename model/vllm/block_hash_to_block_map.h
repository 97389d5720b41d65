// BlockHashToBlockMap: the prefix cache, BlockHashWithGroupId → cached blocks
// (vLLM's block_pool.BlockHashToBlockMap).
//
// vLLM does not de-duplicate: the same content cached twice gives two blocks under one key.
// Upstream keeps, per key, one block or an insertion-ordered dict {block_id: block}; a lookup
// returns the first block inserted and still present, and pop removes one given block id. We keep
// the same order with an intrusive doubly linked chain per key (chain_prev_/chain_next_ indexed
// by block id) and an open-addressing table of chain heads:
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
                        uint32_t group_id) const;
  // Appends `block` to the chain of its key blocks[block].block_hash. REQUIRES: the block has a
  // key and is in no chain.
  void insert(std::span<const KVCacheBlock> blocks, BlockId block);
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
  BlockId chain_next(BlockId b) const { return chain_next_[static_cast<size_t>(b)]; }
  bool in_chain(BlockId b) const { return in_chain_[static_cast<size_t>(b)] != 0; }

  // Checks chains against the blocks' keys; O(num_blocks).
  void check_invariants(std::span<const KVCacheBlock> blocks) const;

 private:
  struct Slot {
    uint64_t hash = 0;
    BlockId head = kNoBlock;
    BlockId tail = kNoBlock;
  };
  // Index of the slot holding the key, or of the empty slot where it would go.
  size_t find_slot(std::span<const KVCacheBlock> blocks, uint64_t hash,
                   std::span<const uint8_t> hash_bytes, uint32_t group_id) const;
  void erase_slot(size_t i);

  std::vector<Slot> table_;
  size_t mask_;
  int size_ = 0;
  std::vector<BlockId> chain_prev_;
  std::vector<BlockId> chain_next_;
  std::vector<uint8_t> in_chain_;
  // Table slot of each chain head (valid for heads only), so that pop needs no probing.
  std::vector<uint32_t> head_slot_;
};

}  // namespace kvtwin::model::vllm
