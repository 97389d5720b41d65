// BlockPool: every KV-cache block, the free queue and the prefix cache (vLLM's
// block_pool.BlockPool).
//
// Life of a block (caching on):
//
//   free queue ──get_new_blocks──► in use (ref_cnt ≥ 1) ──free_blocks (ref 0)──► free queue tail
//        ▲   (pops the head; a cached block is evicted          │ cache_full_blocks: key set,
//        │    now: key dropped, BlockRemoved)                   │ inserted into the hash map
//        └──────────── touch (prefix hit on a free cached block: removed from the middle) ◄┘
//
// Eviction is lazy: a freed cached block keeps its key and stays findable until get_new_blocks
// pops it. The null block (id 0) is popped at construction and never returns to the queue.
//
// Invariants (check_invariants):
//   - a block other than the null block and the sink blocks is in the free queue iff its
//     ref_cnt == 0; no ref_cnt is negative except the null block's;
//   - a block has a key iff the hash map lists it under that key (see BlockHashToBlockMap);
//   - the null block has no key.
//
// Threading: none.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/vllm/block_hash_to_block_map.h"
#include "model/vllm/free_kv_cache_block_queue.h"
#include "model/vllm/kv_cache_block.h"
#include "model/vllm/kv_events.h"
#include "model/vllm/request.h"

namespace kvtwin::model::vllm {

struct BlockPoolOptions {
  int num_gpu_blocks = 0;
  bool enable_caching = true;
  int hash_block_size = 16;
  bool enable_kv_cache_events = false;
  // VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES: event hashes as the low 64 bits.
  bool kv_events_use_int_block_hashes = false;
  // Records the hash stream (KvHashEvent; take_hash_events), independently of the full events.
  bool record_hash_events = false;
};

class BlockPool {
 public:
  explicit BlockPool(const BlockPoolOptions& options);

  int num_gpu_blocks() const { return options_.num_gpu_blocks; }
  bool enable_caching() const { return options_.enable_caching; }
  int hash_block_size() const { return options_.hash_block_size; }
  BlockId null_block() const { return null_block_; }
  std::span<const KVCacheBlock> blocks() const { return blocks_; }
  const KVCacheBlock& block(BlockId b) const { return blocks_[static_cast<size_t>(b)]; }
  // Number of requests holding block b (upstream's KVCacheBlock.ref_cnt; the null block's drifts,
  // see kv_cache_block.h). Kept in a dense array indexed by block id.
  int32_t ref_cnt(BlockId b) const { return ref_cnt_[static_cast<size_t>(b)]; }
  std::span<const int32_t> ref_cnts() const { return ref_cnt_; }
  const FreeKVCacheBlockQueue& free_block_queue() const { return free_block_queue_; }
  // Mutable access for SinkFullAttentionManager, which pops its sink blocks directly.
  FreeKVCacheBlockQueue& mutable_free_block_queue() { return free_block_queue_; }
  const BlockHashToBlockMap& cached_block_hash_to_block() const { return cached_; }

  // The first cached block of hash_bytes for each group in group_ids, written to out[i];
  // false (a miss) if any group misses. REQUIRES: out.size() >= group_ids.size().
  bool get_cached_block(std::span<const uint8_t> hash_bytes, std::span<const int> group_ids,
                        std::span<BlockId> out) const;

  // Caches blocks[num_cached_blocks, num_full_blocks) of `request` for group group_id, skipping
  // null blocks; their hashes are the request's block hashes at block_size (merged when
  // block_size is a multiple of hash_block_size). Emits one BlockStored when events are on.
  // REQUIRES: the request has at least num_full_blocks hashes at block_size; the blocks to
  // cache have no key.
  void cache_full_blocks(const Request& request, std::span<const BlockId> blocks,
                         int num_cached_blocks, int num_full_blocks, int block_size, int group_id);

  // Pops n blocks from the free-queue head, evicting any key they carry (in pop order), and
  // appends them to *out with ref_cnt == 1. REQUIRES: n <= get_num_free_blocks().
  void get_new_blocks(int n, std::vector<BlockId>* out);

  // ref_cnt += 1 for each block; a non-null block with ref_cnt 0 first leaves the free queue.
  void touch(std::span<const BlockId> blocks);

  // ref_cnt -= 1 for each block, then appends those now at 0 (the null block excepted) to the
  // free-queue tail in the given order (the first is evicted first).
  void free_blocks(std::span<const BlockId> ordered_blocks);
  // The same with the order reversed (a request's table, tail block first).
  void free_blocks_reversed(std::span<const BlockId> blocks);

  // Drops the keys of the given blocks from the prefix cache, even of blocks in use.
  // REQUIRES: every id < num_gpu_blocks().
  void evict_blocks(std::span<const BlockId> block_ids);

  // Clears every key if no block but the null block is in use; returns whether it did.
  bool reset_prefix_cache();

  int get_num_free_blocks() const { return free_block_queue_.num_free_blocks(); }
  // 1 - free / (num_gpu_blocks - 1), the null block excluded.
  double get_usage() const;

  // Returns and clears the queued events (empty when events are off).
  std::vector<KVCacheEvent> take_events();
  bool has_events() const { return !kv_event_queue_.empty(); }
  // Moves the recorded hash stream into *out (replacing its contents; empty unless
  // record_hash_events). Swaps buffers, so a caller that keeps *out allocates nothing in the end.
  void take_hash_events(std::vector<KvHashEvent>* out) {
    out->clear();
    out->swap(hash_events_);
  }

  // Cached blocks whose hash was dropped since construction: evicted by reuse in
  // get_new_blocks or by evict_blocks (one BlockRemoved each when events are on). Not
  // part of upstream, which only reports evictions through KV events; reset_prefix_cache
  // (AllBlocksCleared) does not count.
  uint64_t num_evicted_blocks() const { return num_evicted_blocks_; }

  // Marks blocks that left the free queue without a reference (sink blocks) so that
  // check_invariants does not expect them in the queue.
  void mark_detached(std::span<const BlockId> blocks);

  void check_invariants() const;

 private:
  // Batch size of the demand-load pass before evictions (see BlockHashToBlockMap::warm_pop):
  // long enough to overlap many misses, short enough that a run's lines stay in L1.
  static constexpr int kWarmRun = 32;
  bool maybe_evict_cached_block(BlockId b);
  void prefetch_next_evictions() const;
  ExternalBlockHash external_hash(std::span<const uint8_t> bytes) const;

  BlockPoolOptions options_;
  std::vector<KVCacheBlock> blocks_;
  std::vector<int32_t> ref_cnt_;  // by block id
  FreeKVCacheBlockQueue free_block_queue_;
  BlockHashToBlockMap cached_;
  BlockId null_block_;
  std::vector<KVCacheEvent> kv_event_queue_;
  std::vector<KvHashEvent> hash_events_;
  std::vector<uint8_t> detached_;  // sink blocks (see mark_detached)
  std::vector<uint8_t> scratch_;
  std::vector<BlockId> to_append_;
  uint64_t num_evicted_blocks_ = 0;
};

}  // namespace kvtwin::model::vllm
