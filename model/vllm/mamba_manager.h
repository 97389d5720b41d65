// MambaManager: state-space (linear attention) layers keep one recurrent state per request, not a
// KV entry per token (vLLM's MambaManager). The block table holds state snapshots; only the
// block of the last computed token is needed (skipped tokens = num_computed_tokens - 1).
//
// mamba_cache_mode:
//   none / all — ordinary allocation, plus num_speculative_blocks x block_size extra tokens for
//     speculative decoding; `all` caches every full state block (with prefix caching).
//   align — at most one new block per step (plus the speculative blocks on the first
//     allocation). Earlier positions are null; the running state sits in the last
//     1 + num_speculative_blocks blocks. When the table grows, the previous speculative blocks
//     move to the end and their old slots become null, and the state block from two steps ago
//     (last_state_block_idx) is freed by remove_skipped_blocks. allocate_new_blocks therefore
//     returns the whole grown tail of the table, null and moved blocks included:
//
//       spec 0: [A] ─step→ [null? A B]: returns [.., B]; next remove_skipped_blocks frees A.
//
// Same-step guard: a request whose last prefix-hit block was cached by another request in the
// current scheduler step is refused (get_num_blocks_to_allocate returns more than the pool)
// until new_step_starts() clears the set of blocks cached this step.
#pragma once

#include <unordered_set>

#include "model/vllm/single_type_kv_cache_manager.h"

namespace kvtwin::model::vllm {

class MambaManager : public SingleTypeKVCacheManager {
 public:
  explicit MambaManager(const SingleTypeManagerOptions& options);

  int64_t get_num_blocks_to_allocate(RequestSlot slot, int64_t num_tokens,
                                     std::span<const BlockId> new_computed_blocks,
                                     int64_t total_computed_tokens,
                                     int64_t num_tokens_main_model) override;
  void allocate_new_blocks(RequestSlot slot, int64_t num_tokens, int64_t num_tokens_main_model,
                           std::vector<BlockId>* new_blocks) override;
  void cache_blocks(const Request& request, RequestSlot slot, int64_t num_tokens) override;
  void free(RequestSlot slot) override;
  void remove_skipped_blocks(RequestSlot slot, int64_t total_computed_tokens) override;
  int64_t get_num_skipped_tokens(int64_t num_computed_tokens) const override {
    return num_computed_tokens - 1;
  }
  int get_num_common_prefix_blocks(RequestSlot) override { return 0; }
  void new_step_starts() override { cached_blocks_this_step_.clear(); }
  // The last hit at or before max_length whose end is aligned: null blocks, then that block.
  void find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes, int64_t max_length,
                              std::span<const int> group_ids, bool use_eagle,
                              int64_t alignment_tokens,
                              std::vector<std::vector<BlockId>>* out) const override;
  void reserve_slot(RequestSlot slot) override;

 private:
  struct KeyHash {
    size_t operator()(const BlockHashWithGroupId& k) const {
      return prefix_key_hash64(k.block_hash(), k.group_id());
    }
  };
  struct AlignState {
    int32_t last_state_block_idx = -1;  // -1: no entry
    bool allocated = false;             // in upstream's _allocated_block_reqs
  };
  void allocate_new_blocks_align(RequestSlot slot, int64_t num_tokens_main_model,
                                 std::vector<BlockId>* new_blocks);

  MambaCacheMode mode_;
  int64_t num_speculative_blocks_;
  std::unordered_set<BlockHashWithGroupId, KeyHash> cached_blocks_this_step_;
  std::vector<AlignState> align_;  // by slot, align mode only
};

}  // namespace kvtwin::model::vllm
