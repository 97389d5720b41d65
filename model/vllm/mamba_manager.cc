#include "model/vllm/mamba_manager.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

MambaManager::MambaManager(const SingleTypeManagerOptions& options)
    : SingleTypeKVCacheManager(options),
      mode_(options.kv_cache_spec.mamba_cache_mode),
      num_speculative_blocks_(options.kv_cache_spec.num_speculative_blocks) {}

void MambaManager::reserve_slot(RequestSlot slot) {
  SingleTypeKVCacheManager::reserve_slot(slot);
  if (static_cast<size_t>(slot) >= align_.size()) align_.resize(static_cast<size_t>(slot) + 1);
}

void MambaManager::find_longest_cache_hit(const BlockHashListWithBlockSize& block_hashes,
                                          int64_t max_length, std::span<const int> group_ids,
                                          bool /*use_eagle*/, int64_t alignment_tokens,
                                          std::vector<std::vector<BlockId>>* out) const {
  KVTWIN_CHECK(dcp_world_size_ == 1 && pcp_world_size_ == 1) << "DCP/PCP do not support mamba";
  out->resize(group_ids.size());
  for (auto& blocks : *out) blocks.clear();
  const int64_t block_size = spec_.block_size;
  int64_t max_num_blocks = floor_div(max_length, block_size);
  std::vector<uint8_t> scratch;
  BlockId hit[KVCacheBlocks::kMaxGroups];
  for (int64_t i = max_num_blocks - 1; i >= 0; --i) {
    if (!block_pool_->get_cached_block(block_hashes.at(static_cast<int>(i), &scratch), group_ids,
                                       hit))
      continue;
    if (block_size != alignment_tokens && (i + 1) * block_size % alignment_tokens != 0) continue;
    // Null blocks in front, so that the hit length is len(blocks) * block_size.
    for (size_t g = 0; g < group_ids.size(); ++g) {
      (*out)[g].assign(static_cast<size_t>(i), null_block_);
      (*out)[g].push_back(hit[g]);
    }
    break;  // the last match is all that is needed
  }
}

void MambaManager::remove_skipped_blocks(RequestSlot slot, int64_t num_computed_tokens) {
  // Computed tokens may include draft tokens that get rejected: assume they all are.
  num_computed_tokens = std::max<int64_t>(0, num_computed_tokens - num_speculative_blocks_);
  SingleTypeKVCacheManager::remove_skipped_blocks(slot, num_computed_tokens);
  if (mode_ != MambaCacheMode::kAlign) return;
  // The block allocated two steps ago is no longer needed.
  int32_t last = align_[static_cast<size_t>(slot)].last_state_block_idx;
  if (last >= 0 && last < cdiv(num_computed_tokens, block_size_) - 1) {
    std::vector<BlockId>& blocks = req_blocks_entry(slot);
    BlockId& b = blocks[static_cast<size_t>(last)];
    if (b != null_block_) {
      BlockId one[1] = {b};
      block_pool_->free_blocks(one);
      b = null_block_;
    }
  }
}

int64_t MambaManager::get_num_blocks_to_allocate(RequestSlot slot, int64_t num_tokens,
                                                 std::span<const BlockId> new_computed_blocks,
                                                 int64_t total_computed_tokens,
                                                 int64_t num_tokens_main_model) {
  if (!new_computed_blocks.empty()) {
    const BlockHashWithGroupId& key = block_pool_->block(new_computed_blocks.back()).block_hash;
    // A state cached by another request in this step cannot be relied on yet: refuse.
    if (!key.empty() && cached_blocks_this_step_.count(key) != 0)
      return block_pool_->num_gpu_blocks() + 1;
  }
  if (mode_ != MambaCacheMode::kAlign) {
    if (num_speculative_blocks_ > 0) num_tokens += spec_.block_size * num_speculative_blocks_;
    return SingleTypeKVCacheManager::get_num_blocks_to_allocate(
        slot, num_tokens, new_computed_blocks, total_computed_tokens, num_tokens_main_model);
  }
  // Align: lookahead tokens get no blocks (draft models have no mamba layers).
  int64_t num_required_blocks = cdiv(num_tokens_main_model, block_size_) + num_speculative_blocks_;
  int64_t num_new_blocks = num_required_blocks - static_cast<int64_t>(new_computed_blocks.size()) -
                           static_cast<int64_t>(req_blocks_entry(slot).size());
  if (num_new_blocks > 0) {
    // A running request reuses its speculative blocks and needs at most one more; the first
    // prefill needs the running-state block and the speculative blocks.
    num_new_blocks = align_[static_cast<size_t>(slot)].allocated ? 1 : 1 + num_speculative_blocks_;
  }
  // Upstream returns a non-positive count as is (it lowers the sum over groups).
  return num_new_blocks + count_evictable_blocks(*block_pool_, new_computed_blocks);
}

void MambaManager::allocate_new_blocks(RequestSlot slot, int64_t num_tokens,
                                       int64_t num_tokens_main_model,
                                       std::vector<BlockId>* new_blocks) {
  if (mode_ == MambaCacheMode::kAlign) {
    allocate_new_blocks_align(slot, num_tokens_main_model, new_blocks);
    return;
  }
  if (num_speculative_blocks_ > 0) num_tokens += block_size_ * num_speculative_blocks_;
  SingleTypeKVCacheManager::allocate_new_blocks(slot, num_tokens, num_tokens_main_model,
                                                new_blocks);
}

void MambaManager::allocate_new_blocks_align(RequestSlot slot, int64_t num_tokens_main_model,
                                             std::vector<BlockId>* new_blocks) {
  std::vector<BlockId>& req_blocks = req_blocks_entry(slot);
  AlignState& st = align_[static_cast<size_t>(slot)];
  int64_t num_required_blocks = cdiv(num_tokens_main_model, block_size_) + num_speculative_blocks_;
  int64_t prev_len = static_cast<int64_t>(req_blocks.size());
  if (num_required_blocks == prev_len) return;
  KVTWIN_CHECK(num_required_blocks > prev_len)
      << "num_required_blocks " << num_required_blocks << " < len(req_blocks) " << prev_len;
  // Record the state block of the previous step (freed two steps later).
  if (st.allocated) {
    st.last_state_block_idx = static_cast<int32_t>(prev_len - 1 - num_speculative_blocks_);
  } else if (prev_len > 0) {
    st.last_state_block_idx = static_cast<int32_t>(prev_len - 1);  // the prefix-hit state
  }
  int64_t num_skipped_blocks = num_required_blocks - num_speculative_blocks_ - 1;
  if (prev_len < num_skipped_blocks)
    req_blocks.insert(req_blocks.end(), static_cast<size_t>(num_skipped_blocks - prev_len),
                      null_block_);
  if (st.allocated) {
    // Reuse the previous speculative blocks: move them to the end, null their old slots.
    for (int64_t idx = prev_len - num_speculative_blocks_; idx < prev_len; ++idx) {
      if (idx >= num_skipped_blocks) break;
      req_blocks.push_back(req_blocks[static_cast<size_t>(idx)]);
      req_blocks[static_cast<size_t>(idx)] = null_block_;
    }
  }
  int64_t num_new_blocks = num_required_blocks - static_cast<int64_t>(req_blocks.size());
  KVTWIN_CHECK_LE(num_new_blocks, st.allocated ? 1 : num_speculative_blocks_ + 1);
  KVTWIN_CHECK_GE(num_new_blocks, 0);
  block_pool_->get_new_blocks(static_cast<int>(num_new_blocks), &req_blocks);
  st.allocated = true;
  new_blocks->insert(new_blocks->end(), req_blocks.begin() + static_cast<std::ptrdiff_t>(prev_len),
                     req_blocks.end());
}

void MambaManager::free(RequestSlot slot) {
  if (static_cast<size_t>(slot) < align_.size()) align_[static_cast<size_t>(slot)] = AlignState{};
  SingleTypeKVCacheManager::free(slot);
}

void MambaManager::cache_blocks(const Request& request, RequestSlot slot, int64_t num_tokens) {
  int before = std::max(state(slot).num_cached_block, 0);
  SingleTypeKVCacheManager::cache_blocks(request, slot, num_tokens);
  int after = std::max(state(slot).num_cached_block, 0);
  if (after <= before) return;
  const std::vector<BlockId>& blocks = req_blocks_entry(slot);
  for (int i = before; i < after; ++i) {
    const KVCacheBlock& blk = block_pool_->block(blocks[static_cast<size_t>(i)]);
    if (blk.is_null) continue;
    KVTWIN_CHECK(!blk.block_hash.empty()) << "cached block " << blk.block_id << " has no hash";
    cached_blocks_this_step_.insert(blk.block_hash);
  }
}

}  // namespace kvtwin::model::vllm
