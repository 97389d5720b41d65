// SingleTypeKVCacheManager: the block table of every request for one KV cache group, and the
// attention-type rules on top of it (vLLM's single_type_kv_cache_manager.py). Subclasses, one
// file each: FullAttentionManager (also MLA), SinkFullAttentionManager, SlidingWindowManager,
// ChunkedLocalAttentionManager, MambaManager, CrossAttentionManager.
//
// Per request (addressed by a RequestSlot, a dense handle KVCacheManager assigns to each
// request id that has state here) the manager keeps:
//   - req_to_blocks: the block table. Upstream's defaultdict: an entry appears as soon as a
//     method indexes it (allocate_new_blocks, cache_blocks, remove_skipped_blocks with skipped
//     tokens, get_num_common_prefix_blocks, Mamba's align paths) and disappears only in free.
//     FullAttentionManager's get_num_common_prefix_blocks counts these entries.
//   - num_cached_block: how many leading blocks are cached; present for running requests
//     (set by allocate_new_computed_blocks and cache_blocks, removed by free). A request with an
//     entry takes the "running request" fast path of get_num_blocks_to_allocate.
//
// Skipped positions (outside a sliding window or local chunk, old Mamba states) hold the null
// block; their blocks are freed by remove_skipped_blocks.
//
// Threading: none. The manager borrows the BlockPool it is given (shared by all groups).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "model/vllm/block_hash_with_group_id.h"
#include "model/vllm/block_pool.h"
#include "model/vllm/kv_cache_blocks.h"
#include "model/vllm/kv_cache_interface.h"
#include "model/vllm/math_utils.h"
#include "model/vllm/request.h"

namespace kvtwin::model::vllm {

using RequestSlot = int32_t;

struct SingleTypeManagerOptions {
  KVCacheSpec kv_cache_spec;
  BlockPool* block_pool = nullptr;
  bool enable_caching = true;
  int kv_cache_group_id = 0;
  int dcp_world_size = 1;
  int pcp_world_size = 1;
};

class SingleTypeKVCacheManager {
 public:
  explicit SingleTypeKVCacheManager(const SingleTypeManagerOptions& options);
  virtual ~SingleTypeKVCacheManager() = default;
  SingleTypeKVCacheManager(const SingleTypeKVCacheManager&) = delete;
  SingleTypeKVCacheManager& operator=(const SingleTypeKVCacheManager&) = delete;

  // The upstream class name (as in the golden header's derived.managers).
  std::string_view name() const { return manager_name(spec_.kind); }
  const KVCacheSpec& kv_cache_spec() const { return spec_; }
  // The spec's block size times dcp x pcp.
  int block_size() const { return block_size_; }
  int kv_cache_group_id() const { return group_id_; }

  // Blocks to take from the pool to give the request num_tokens slots, counting prefix hits
  // (new_computed_blocks) that sit evictable in the free queue.
  virtual int64_t get_num_blocks_to_allocate(RequestSlot slot, int64_t num_tokens,
                                             std::span<const BlockId> new_computed_blocks,
                                             int64_t total_computed_tokens,
                                             int64_t num_tokens_main_model);
  // Adds prefix hits to a new request's table (touching them, null-padding skipped ones) and
  // allocates blocks for external computed tokens. No-op for a running request.
  virtual void allocate_new_computed_blocks(RequestSlot slot,
                                            std::span<const BlockId> new_computed_blocks,
                                            int64_t num_local_computed_tokens,
                                            int64_t num_external_computed_tokens);
  // Grows the table to cover num_tokens slots; appends the new blocks to *new_blocks.
  virtual void allocate_new_blocks(RequestSlot slot, int64_t num_tokens,
                                   int64_t num_tokens_main_model, std::vector<BlockId>* new_blocks);
  // Caches the request's full blocks up to num_tokens (a no-op below num_cached_block).
  virtual void cache_blocks(const Request& request, RequestSlot slot, int64_t num_tokens);
  // Frees the table tail first and forgets the request.
  virtual void free(RequestSlot slot);
  virtual int get_num_common_prefix_blocks(RequestSlot slot) = 0;
  // Frees blocks no longer needed for attention and puts the null block in their place.
  virtual void remove_skipped_blocks(RequestSlot slot, int64_t total_computed_tokens);
  virtual int64_t get_num_skipped_tokens(int64_t /*num_computed_tokens*/) const { return 0; }
  virtual void new_step_starts() {}

  // KVCacheManager's decode fast path: true only when, for the running request in `slot` and no
  // prefix hits, allocate_slots' calls on this group — remove_skipped_blocks,
  // get_num_blocks_to_allocate (then 0), allocate_new_blocks for num_tokens slots and, unless
  // num_tokens_to_cache < 0, cache_blocks up to num_tokens_to_cache — would change no state and
  // allocate no block. Exact for the full-attention managers, which keep the base versions of
  // those calls and skip no tokens; every other kind answers false.
  bool allocation_is_noop(RequestSlot slot, int64_t num_tokens, int64_t num_tokens_to_cache) const {
    if (!full_attention_) return false;
    const ReqState& s = state(slot);
    if (s.num_cached_block < 0 || !s.has_blocks_entry) return false;
    if (cdiv(num_tokens, block_size_) > static_cast<int64_t>(s.blocks.size())) return false;
    return num_tokens_to_cache < 0 ||
           floor_div(num_tokens_to_cache, block_size_) <= s.num_cached_block;
  }

  // Upstream's classmethod find_longest_cache_hit, for the groups group_ids that share this
  // manager's spec: the longest hit of at most max_length tokens whose length is a multiple of
  // alignment_tokens; (*out)[i] receives the blocks of group_ids[i] (null blocks at skipped
  // positions). With use_eagle the last matched block is dropped.
  virtual void find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes,
                                      int64_t max_length, std::span<const int> group_ids,
                                      bool use_eagle, int64_t alignment_tokens,
                                      std::vector<std::vector<BlockId>>* out) const = 0;

  // State access (snapshots, tests, invariants).
  bool has_req_entry(RequestSlot slot) const;
  std::span<const BlockId> req_blocks(RequestSlot slot) const;
  std::optional<int> num_cached_block(RequestSlot slot) const;
  int num_req_entries() const { return num_req_entries_; }
  // Grows per-slot storage to cover slot (KVCacheManager calls it when it creates a slot).
  virtual void reserve_slot(RequestSlot slot);
  // Checks per-request state: block ids valid, entry counts consistent.
  virtual void check_invariants() const;

 protected:
  struct ReqState {
    std::vector<BlockId> blocks;
    int32_t num_cached_block = -1;  // -1: no entry
    bool has_blocks_entry = false;
  };
  // req_to_blocks[request_id] of the defaultdict: creates the entry.
  std::vector<BlockId>& req_blocks_entry(RequestSlot slot);
  ReqState& state(RequestSlot slot) { return reqs_[static_cast<size_t>(slot)]; }
  const ReqState& state(RequestSlot slot) const { return reqs_[static_cast<size_t>(slot)]; }
  static int count_evictable_blocks(const BlockPool& pool, std::span<const BlockId> blocks);

  KVCacheSpec spec_;
  int block_size_;
  BlockPool* block_pool_;
  bool enable_caching_;
  int group_id_;
  int dcp_world_size_;
  int pcp_world_size_;
  BlockId null_block_;
  bool full_attention_;  // FullAttentionManager or its sink variant (full / MLA / sink specs)
  std::vector<ReqState> reqs_;
  int num_req_entries_ = 0;
  std::vector<BlockId> scratch_;
};

// Builds the manager for spec.kind (vLLM's get_manager_for_kv_cache_spec).
std::unique_ptr<SingleTypeKVCacheManager> make_single_type_manager(
    const SingleTypeManagerOptions& options);

}  // namespace kvtwin::model::vllm
