// ChunkedLocalAttentionManager: tokens attend only within their attention chunk, so everything
// before the current chunk is skipped (null blocks) and a prefix hit can only extend inside the
// current chunk (vLLM's ChunkedLocalAttentionManager).
//
//   chunk 8, block 4, max hit length 15: tokens 0-7 are before the chunk → [null, null],
//   then blocks 2, 3, ... are looked up left to right until the first miss.
#pragma once

#include "model/vllm/single_type_kv_cache_manager.h"

namespace kvtwin::model::vllm {

class ChunkedLocalAttentionManager : public SingleTypeKVCacheManager {
 public:
  explicit ChunkedLocalAttentionManager(const SingleTypeManagerOptions& options);

  void find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes, int64_t max_length,
                              std::span<const int> group_ids, bool use_eagle,
                              int64_t alignment_tokens,
                              std::vector<std::vector<BlockId>>* out) const override;
  // (num_computed_tokens // chunk) * chunk: the tokens left of the current chunk.
  int64_t get_num_skipped_tokens(int64_t num_computed_tokens) const override;
  int get_num_common_prefix_blocks(RequestSlot) override { return 0; }

 private:
  int64_t attention_chunk_size_;
};

}  // namespace kvtwin::model::vllm
