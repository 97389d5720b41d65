#include "model/vllm/cross_attention_manager.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

void CrossAttentionManager::allocate_new_computed_blocks(
    RequestSlot /*slot*/, std::span<const BlockId> new_computed_blocks,
    int64_t /*num_local_computed_tokens*/, int64_t /*num_external_computed_tokens*/) {
  KVTWIN_CHECK(new_computed_blocks.empty()) << "cross-attention blocks are never cached";
}

void CrossAttentionManager::cache_blocks(const Request& /*request*/, RequestSlot /*slot*/,
                                         int64_t /*num_tokens*/) {
  KVTWIN_CHECK(false) << "Should not be called as prefix caching is disabled.";
}

void CrossAttentionManager::find_longest_cache_hit(
    const BlockHashListWithBlockSize& /*block_hashes*/, int64_t /*max_length*/,
    std::span<const int> /*group_ids*/, bool /*use_eagle*/, int64_t /*alignment_tokens*/,
    std::vector<std::vector<BlockId>>* /*out*/) const {
  KVTWIN_CHECK(false) << "CrossAttentionManager does not support caching";
}

}  // namespace kvtwin::model::vllm
