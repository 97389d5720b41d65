#include "model/vllm/sliding_window_manager.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

SlidingWindowManager::SlidingWindowManager(const SingleTypeManagerOptions& options)
    : SingleTypeKVCacheManager(options), sliding_window_(options.kv_cache_spec.sliding_window) {
  KVTWIN_CHECK(sliding_window_ > 0) << "sliding window " << sliding_window_;
}

int64_t SlidingWindowManager::get_num_skipped_tokens(int64_t num_computed_tokens) const {
  return std::max<int64_t>(0, num_computed_tokens - sliding_window_ + 1);
}

void SlidingWindowManager::find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes,
                                                  int64_t max_length,
                                                  std::span<const int> group_ids, bool use_eagle,
                                                  int64_t alignment_tokens,
                                                  std::vector<std::vector<BlockId>>* out) const {
  KVTWIN_CHECK(dcp_world_size_ == 1 && pcp_world_size_ == 1)
      << "DCP/PCP do not support sliding window attention";
  const int64_t block_size = block_size_;
  int64_t contiguous_needed = cdiv(sliding_window_ - 1, block_size);
  if (use_eagle) ++contiguous_needed;  // one more block, dropped at the end
  int64_t max_num_blocks = floor_div(max_length, block_size);
  KVTWIN_CHECK_LE(max_num_blocks, block_hashes.size()) << "hit search beyond the block hashes";
  out->resize(group_ids.size());
  for (auto& blocks : *out) blocks.assign(static_cast<size_t>(max_num_blocks), null_block_);
  std::vector<uint8_t> scratch;
  BlockId hit[KVCacheBlocks::kMaxGroups];
  int64_t num_contiguous = 0;
  bool match_found = false;
  for (int64_t i = max_num_blocks - 1; i >= 0; --i) {
    if (!block_pool_->get_cached_block(block_hashes.at(static_cast<int>(i), &scratch), group_ids,
                                       hit)) {
      num_contiguous = 0;
      continue;
    }
    // A run must end at a position aligned to alignment_tokens.
    if (num_contiguous == 0 && block_size != alignment_tokens &&
        (i + 1) * block_size % alignment_tokens != 0)
      continue;
    for (size_t g = 0; g < group_ids.size(); ++g) (*out)[g][static_cast<size_t>(i)] = hit[g];
    ++num_contiguous;
    if (num_contiguous >= contiguous_needed) {
      for (auto& blocks : *out) blocks.resize(static_cast<size_t>(i + num_contiguous));
      match_found = true;
      break;
    }
  }
  if (!match_found) {
    // The leading num_contiguous blocks are a hit even if shorter than the window.
    for (auto& blocks : *out) blocks.resize(static_cast<size_t>(num_contiguous));
    while (block_size != alignment_tokens &&
           static_cast<int64_t>((*out)[0].size()) * block_size % alignment_tokens != 0) {
      for (auto& blocks : *out) blocks.pop_back();
    }
  }
  if (use_eagle && !(*out)[0].empty()) {
    KVTWIN_CHECK_EQ(block_size, alignment_tokens) << "aligned hits are not compatible with eagle";
    for (auto& blocks : *out) blocks.pop_back();
  }
}

}  // namespace kvtwin::model::vllm
