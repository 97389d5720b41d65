#include "model/vllm/chunked_local_attention_manager.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

ChunkedLocalAttentionManager::ChunkedLocalAttentionManager(const SingleTypeManagerOptions& options)
    : SingleTypeKVCacheManager(options),
      attention_chunk_size_(options.kv_cache_spec.attention_chunk_size) {
  KVTWIN_CHECK(attention_chunk_size_ > 0) << "attention chunk size " << attention_chunk_size_;
}

int64_t ChunkedLocalAttentionManager::get_num_skipped_tokens(int64_t num_computed_tokens) const {
  return floor_div(num_computed_tokens, attention_chunk_size_) * attention_chunk_size_;
}

void ChunkedLocalAttentionManager::find_longest_cache_hit(
    const BlockHashListWithBlockSize& block_hashes, int64_t max_length,
    std::span<const int> group_ids, bool use_eagle, int64_t alignment_tokens,
    std::vector<std::vector<BlockId>>* out) const {
  KVTWIN_CHECK(!use_eagle) << "eagle is not supported with chunked local attention";
  KVTWIN_CHECK(dcp_world_size_ == 1 && pcp_world_size_ == 1)
      << "DCP/PCP do not support chunked local attention";
  KVTWIN_CHECK_EQ(block_size_, alignment_tokens)
      << "groups with different block sizes are not compatible with chunked local attention";
  int64_t max_num_blocks = floor_div(max_length, block_size_);
  int64_t local_start_idx =
      max_length > 0 ? floor_div(max_length, attention_chunk_size_) * attention_chunk_size_ : 0;
  int64_t local_start_block = floor_div(local_start_idx, block_size_);
  out->resize(group_ids.size());
  for (auto& blocks : *out) blocks.assign(static_cast<size_t>(local_start_block), null_block_);
  std::vector<uint8_t> scratch;
  BlockId hit[KVCacheBlocks::kMaxGroups];
  for (int64_t i = local_start_block; i < max_num_blocks; ++i) {
    if (!block_pool_->get_cached_block(block_hashes.at(static_cast<int>(i), &scratch), group_ids,
                                       hit))
      break;
    for (size_t g = 0; g < group_ids.size(); ++g) (*out)[g].push_back(hit[g]);
  }
}

}  // namespace kvtwin::model::vllm
