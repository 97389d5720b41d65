// FreeKVCacheBlockQueue: the doubly linked list of free blocks, in eviction order
// (vLLM's kv_cache_utils.FreeKVCacheBlockQueue).
//
// The head is evicted (reused) first. At construction the queue holds every block in id order.
// Freed blocks are appended at the tail (BlockPool frees a request's blocks tail first, so the
// tail blocks of the least recently freed request are reused first); prefix hits remove blocks
// from the middle. Links are indices: links_[b] = {prev, next} for block b (one 8-byte entry, so
// that relinking a block touches one cache line), with two sentinels (head = num_blocks,
// tail = num_blocks + 1) as upstream's fake head and tail blocks.
//
//   head ⇄ b3 ⇄ b7 ⇄ b1 ⇄ tail        popleft() → b3; append(b9) → ... ⇄ b1 ⇄ b9 ⇄ tail
//
// Invariants: a block is linked iff its prev != kNoBlock (then its next != kNoBlock too);
// walking next from the head reaches the tail after exactly num_free_blocks() distinct blocks,
// and prev mirrors next.
//
// Threading: none (owned by one BlockPool).
#pragma once

#include <span>
#include <vector>

#include "model/vllm/kv_cache_block.h"

namespace kvtwin::model::vllm {

class FreeKVCacheBlockQueue {
 public:
  // A queue holding blocks 0 .. num_blocks-1 in id order.
  explicit FreeKVCacheBlockQueue(int num_blocks);

  int num_free_blocks() const { return num_free_blocks_; }
  bool contains(BlockId b) const { return links_[static_cast<size_t>(b)].prev != kNoBlock; }
  // Hints the cache that block b's links are about to be read or written.
  void prefetch(BlockId b) const { __builtin_prefetch(&links_[static_cast<size_t>(b)], 1); }

  // Removes and returns the head block. REQUIRES: num_free_blocks() > 0.
  BlockId popleft();
  // Removes the first n blocks and appends them, head first, to *out.
  // REQUIRES: n <= num_free_blocks().
  void popleft_n(int n, std::vector<BlockId>* out);
  // Unlinks block b from anywhere in the queue. REQUIRES: contains(b).
  void remove(BlockId b);
  // Links block b at the tail. REQUIRES: !contains(b).
  void append(BlockId b);
  // Links the blocks at the tail, in the given order.
  void append_n(std::span<const BlockId> blocks);

  // The free blocks head → tail (for tests and snapshots).
  std::vector<BlockId> get_all_free_blocks() const;

  // Checks the invariants above; fails a KVTWIN_CHECK when one is broken. O(num_blocks).
  void check_invariants() const;

 private:
  struct Link {
    BlockId prev = kNoBlock;
    BlockId next = kNoBlock;
  };
  Link& link(BlockId b) { return links_[static_cast<size_t>(b)]; }
  const Link& link(BlockId b) const { return links_[static_cast<size_t>(b)]; }
  void link_after(BlockId prev, BlockId b);

  int num_blocks_;
  BlockId head_;  // sentinel index num_blocks
  BlockId tail_;  // sentinel index num_blocks + 1
  std::vector<Link> links_;
  int num_free_blocks_;
};

}  // namespace kvtwin::model::vllm
