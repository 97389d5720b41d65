// CrossAttentionManager: the encoder states of an encoder-decoder model (Whisper-like). They are
// allocated once, from num_encoder_tokens on the first allocation, never cached and never shared
// (vLLM's CrossAttentionManager). Only used with prefix caching off.
#pragma once

#include "model/vllm/single_type_kv_cache_manager.h"

namespace kvtwin::model::vllm {

class CrossAttentionManager : public SingleTypeKVCacheManager {
 public:
  using SingleTypeKVCacheManager::SingleTypeKVCacheManager;

  // REQUIRES: new_computed_blocks empty (nothing is ever cached).
  void allocate_new_computed_blocks(RequestSlot slot, std::span<const BlockId> new_computed_blocks,
                                    int64_t num_local_computed_tokens,
                                    int64_t num_external_computed_tokens) override;
  // Never valid: cross-attention blocks are not cached.
  void cache_blocks(const Request& request, RequestSlot slot, int64_t num_tokens) override;
  int get_num_common_prefix_blocks(RequestSlot) override { return 0; }
  // Never valid: cross-attention does not support prefix caching.
  void find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes, int64_t max_length,
                              std::span<const int> group_ids, bool use_eagle,
                              int64_t alignment_tokens,
                              std::vector<std::vector<BlockId>>* out) const override;
};

}  // namespace kvtwin::model::vllm
