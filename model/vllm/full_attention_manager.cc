#include "model/vllm/full_attention_manager.h"

namespace kvtwin::model::vllm {

void FullAttentionManager::find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes,
                                                  int64_t max_length,
                                                  std::span<const int> group_ids, bool use_eagle,
                                                  int64_t alignment_tokens,
                                                  std::vector<std::vector<BlockId>>* out) const {
  out->resize(group_ids.size());
  for (auto& blocks : *out) blocks.clear();
  // block_size_ already includes dcp x pcp, as upstream scales the spec's block size here.
  int64_t max_num_blocks =
      std::min<int64_t>(floor_div(max_length, block_size_), block_hashes.size());
  std::vector<uint8_t> scratch;
  BlockId hit[KVCacheBlocks::kMaxGroups];
  for (int64_t i = 0; i < max_num_blocks; ++i) {
    std::span<const uint8_t> h = block_hashes.at(static_cast<int>(i), &scratch);
    if (!block_pool_->get_cached_block(h, group_ids, hit)) break;
    for (size_t g = 0; g < group_ids.size(); ++g) (*out)[g].push_back(hit[g]);
  }
  if (use_eagle && !(*out)[0].empty()) {
    for (auto& blocks : *out) blocks.pop_back();  // recompute the last block for the drafter
  }
  while (block_size_ != alignment_tokens &&
         static_cast<int64_t>((*out)[0].size()) * block_size_ % alignment_tokens != 0) {
    for (auto& blocks : *out) blocks.pop_back();
  }
}

int FullAttentionManager::get_num_common_prefix_blocks(RequestSlot slot) {
  const std::vector<BlockId>& blocks = req_blocks_entry(slot);
  int n = 0;
  for (BlockId b : blocks) {
    if (block_pool_->block(b).ref_cnt != num_req_entries_) break;
    ++n;
  }
  return n;
}

}  // namespace kvtwin::model::vllm
