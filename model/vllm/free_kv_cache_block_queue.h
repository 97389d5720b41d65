// FreeKVCacheBlockQueue: the free blocks in eviction order (vLLM's
// kv_cache_utils.FreeKVCacheBlockQueue, a doubly linked list there).
//
// The head is evicted (reused) first. At construction the queue holds every block in id order.
// Freed blocks are appended at the tail (BlockPool frees a request's blocks tail first, so the
// tail blocks of the least recently freed request are reused first); prefix hits remove blocks
// from the middle.
//
// Stored as a ring of block ids in queue order instead of links: removing from the middle
// leaves a hole (kNoBlock) that popleft skips, so popping n blocks reads the ring sequentially
// rather than chasing n links through the pool, and every operation writes one or two entries.
// pos_[b] is b's ring index (kNoBlock when b is not queued). The ring has at least twice as many
// entries as blocks; when appending finds it full (queued blocks plus holes), the queued blocks
// are first packed to the front, which leaves at least half of it free (amortised O(1)).
//
//   ring: | 3 | _ | 7 | 1 | _ |           popleft() → 3, then skips the hole → next is 7
//           ^head        ^live   ^tail     remove(7) turns 7's entry into a hole
//
// Invariants: the entries in [head, tail) are the queued blocks in order plus holes; a block is
// queued iff pos_[b] != kNoBlock, and then ring_[pos_[b]] == b; num_free_blocks() counts the
// queued blocks.
//
// Threading: none (owned by one BlockPool).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "model/vllm/kv_cache_block.h"

namespace kvtwin::model::vllm {

class FreeKVCacheBlockQueue {
 public:
  // A queue holding blocks 0 .. num_blocks-1 in id order.
  explicit FreeKVCacheBlockQueue(int num_blocks);

  int num_free_blocks() const { return num_free_blocks_; }
  bool contains(BlockId b) const { return pos_[static_cast<size_t>(b)] != kNoBlock; }
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
  // Copies up to out.size() blocks from the head, in queue order, without removing them, and
  // returns how many it copied: fewer than out.size() when the queue is shorter or when holes
  // fill the 4 x out.size() ring entries it looks at (a cache hint's look-ahead, kept bounded).
  size_t peek_front(std::span<BlockId> out) const {
    size_t n = 0;
    const uint64_t end = std::min(tail_, head_ + 4 * out.size());
    for (uint64_t p = head_; p != end && n < out.size(); ++p)
      if (at(p) != kNoBlock) out[n++] = at(p);
    return n;
  }

  // Checks the invariants above; fails a KVTWIN_CHECK when one is broken. O(num_blocks).
  void check_invariants() const;

 private:
  BlockId& at(uint64_t p) { return ring_[static_cast<size_t>(p & mask_)]; }
  BlockId at(uint64_t p) const { return ring_[static_cast<size_t>(p & mask_)]; }
  // Moves head_ past the holes at the front. REQUIRES: num_free_blocks_ > 0.
  void skip_holes() {
    while (at(head_) == kNoBlock) ++head_;
  }
  // Packs the queued blocks to the front of the ring (when it is full).
  void compact();

  int num_blocks_;
  std::vector<BlockId> ring_;  // power-of-two size >= 2 * num_blocks
  uint64_t mask_;
  uint64_t head_ = 0;         // ring position of the first entry (holes included), not wrapped
  uint64_t tail_ = 0;         // one past the last entry, not wrapped
  std::vector<BlockId> pos_;  // by block: ring index, or kNoBlock when not queued
  int num_free_blocks_;
  std::vector<BlockId> scratch_;
};

}  // namespace kvtwin::model::vllm
