// SlidingWindowManager: a token attends to the previous sliding_window - 1 tokens and itself, so
// blocks wholly before the window are freed (replaced by the null block) and a prefix hit only
// needs the last cdiv(sliding_window - 1, block_size) blocks before the hit end to be cached
// (vLLM's SlidingWindowManager).
//
//   window 4, block 2, 7 computed tokens:  [0 1 | 2 3 | 4 5 | 6 _]
//     skipped tokens = 7 - 4 + 1 = 4 → blocks 0 and 1 become null.
//
// The hit search runs right to left and stops at the first run of enough contiguous hits; with
// EAGLE one more block is needed and the last one is dropped. Positions left of the run are
// null blocks. When no run is long enough, a partial run that reaches block 0 still counts.
#pragma once

#include "model/vllm/single_type_kv_cache_manager.h"

namespace kvtwin::model::vllm {

class SlidingWindowManager : public SingleTypeKVCacheManager {
 public:
  explicit SlidingWindowManager(const SingleTypeManagerOptions& options);

  void find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes, int64_t max_length,
                              std::span<const int> group_ids, bool use_eagle,
                              int64_t alignment_tokens,
                              std::vector<std::vector<BlockId>>* out) const override;
  // max(0, num_computed_tokens - sliding_window + 1).
  int64_t get_num_skipped_tokens(int64_t num_computed_tokens) const override;
  // Always 0: the prefix positions are null blocks (no cascade attention).
  int get_num_common_prefix_blocks(RequestSlot) override { return 0; }

 private:
  int64_t sliding_window_;
};

}  // namespace kvtwin::model::vllm
