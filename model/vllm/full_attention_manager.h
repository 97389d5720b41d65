// FullAttentionManager: every token attends to every earlier token, so a request keeps all its
// blocks and a prefix hit is the longest run of cached blocks from the start (vLLM's
// FullAttentionManager; MLA groups use it too).
//
// Hits are downward-closed: if block i hits, so did blocks 0..i-1 (block hashes chain their
// parents), so a left-to-right scan that stops at the first miss finds the longest hit.
#pragma once

#include "model/vllm/single_type_kv_cache_manager.h"

namespace kvtwin::model::vllm {

class FullAttentionManager : public SingleTypeKVCacheManager {
 public:
  using SingleTypeKVCacheManager::SingleTypeKVCacheManager;

  void find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes, int64_t max_length,
                              std::span<const int> group_ids, bool use_eagle,
                              int64_t alignment_tokens,
                              std::vector<std::vector<BlockId>>* out) const override;
  // Leading blocks whose ref_cnt equals the number of requests with a req_to_blocks entry
  // (creating the entry of `slot` first, as upstream's defaultdict does).
  int get_num_common_prefix_blocks(RequestSlot slot) override;

 private:
  // The hit scan for one group with unmerged hashes: appends the hits to *hit.
  void find_hits_one_group(std::span<const BlockHash> hashes, uint32_t group_id,
                           std::vector<BlockId>* hit) const;
};

}  // namespace kvtwin::model::vllm
