#include "model/vllm/single_type_kv_cache_manager.h"

#include <algorithm>

#include "model/check.h"
#include "model/vllm/chunked_local_attention_manager.h"
#include "model/vllm/cross_attention_manager.h"
#include "model/vllm/full_attention_manager.h"
#include "model/vllm/mamba_manager.h"
#include "model/vllm/sink_full_attention_manager.h"
#include "model/vllm/sliding_window_manager.h"

namespace kvtwin::model::vllm {

SingleTypeKVCacheManager::SingleTypeKVCacheManager(const SingleTypeManagerOptions& options)
    : spec_(options.kv_cache_spec),
      block_size_(options.kv_cache_spec.block_size),
      block_pool_(options.block_pool),
      enable_caching_(options.enable_caching),
      group_id_(options.kv_cache_group_id),
      dcp_world_size_(options.dcp_world_size),
      pcp_world_size_(options.pcp_world_size),
      full_attention_(options.kv_cache_spec.kind == KVCacheSpecKind::kFullAttention ||
                      options.kv_cache_spec.kind == KVCacheSpecKind::kMLAAttention ||
                      options.kv_cache_spec.kind == KVCacheSpecKind::kSinkFullAttention) {
  KVTWIN_CHECK(block_pool_ != nullptr) << "manager without a block pool";
  KVTWIN_CHECK(block_size_ > 0) << "block size " << block_size_;
  if (dcp_world_size_ * pcp_world_size_ > 1) block_size_ *= dcp_world_size_ * pcp_world_size_;
  null_block_ = block_pool_->null_block();
}

void SingleTypeKVCacheManager::reserve_slot(RequestSlot slot) {
  KVTWIN_CHECK_GE(slot, 0);
  if (static_cast<size_t>(slot) >= reqs_.size()) reqs_.resize(static_cast<size_t>(slot) + 1);
}

std::vector<BlockId>& SingleTypeKVCacheManager::req_blocks_entry(RequestSlot slot) {
  ReqState& s = state(slot);
  if (!s.has_blocks_entry) {
    s.has_blocks_entry = true;
    ++num_req_entries_;
  }
  return s.blocks;
}

bool SingleTypeKVCacheManager::has_req_entry(RequestSlot slot) const {
  return slot >= 0 && static_cast<size_t>(slot) < reqs_.size() && state(slot).has_blocks_entry;
}

std::span<const BlockId> SingleTypeKVCacheManager::req_blocks(RequestSlot slot) const {
  if (!has_req_entry(slot)) return {};
  return state(slot).blocks;
}

std::optional<int> SingleTypeKVCacheManager::num_cached_block(RequestSlot slot) const {
  if (slot < 0 || static_cast<size_t>(slot) >= reqs_.size()) return std::nullopt;
  int n = state(slot).num_cached_block;
  return n < 0 ? std::nullopt : std::optional<int>(n);
}

int SingleTypeKVCacheManager::count_evictable_blocks(const BlockPool& pool,
                                                     std::span<const BlockId> blocks) {
  int n = 0;
  const BlockId null_block = pool.null_block();
  for (BlockId b : blocks) n += pool.ref_cnt(b) == 0 && b != null_block;
  return n;
}

int64_t SingleTypeKVCacheManager::get_num_blocks_to_allocate(
    RequestSlot slot, int64_t num_tokens, std::span<const BlockId> new_computed_blocks,
    int64_t total_computed_tokens, int64_t /*num_tokens_main_model*/) {
  const ReqState& s = state(slot);
  int64_t num_required_blocks = cdiv(num_tokens, block_size_);
  int64_t num_req_blocks = s.has_blocks_entry ? static_cast<int64_t>(s.blocks.size()) : 0;
  if (s.num_cached_block >= 0) {
    // A running request gets no new prefix hits; with rejected draft tokens its table may be
    // longer than needed.
    KVTWIN_CHECK(new_computed_blocks.empty()) << "prefix hits for a running request";
    return std::max<int64_t>(num_required_blocks - num_req_blocks, 0);
  }
  int64_t num_skipped_tokens = get_num_skipped_tokens(total_computed_tokens);
  int64_t num_local_computed_blocks =
      static_cast<int64_t>(new_computed_blocks.size()) + num_req_blocks;
  int64_t num_skipped_blocks = floor_div(num_skipped_tokens, block_size_);
  int64_t num_new_blocks = std::max<int64_t>(
      num_required_blocks - std::max(num_skipped_blocks, num_local_computed_blocks), 0);
  // Hits inside the skipped prefix are not touched, so they need no capacity.
  int64_t skip_hits = std::max<int64_t>(0, num_skipped_blocks - num_req_blocks);
  skip_hits = std::min<int64_t>(skip_hits, static_cast<int64_t>(new_computed_blocks.size()));
  return num_new_blocks + count_evictable_blocks(*block_pool_, new_computed_blocks.subspan(
                                                                   static_cast<size_t>(skip_hits)));
}

void SingleTypeKVCacheManager::allocate_new_computed_blocks(
    RequestSlot slot, std::span<const BlockId> new_computed_blocks,
    int64_t num_local_computed_tokens, int64_t num_external_computed_tokens) {
  if (state(slot).num_cached_block >= 0) {
    KVTWIN_CHECK(new_computed_blocks.empty()) << "prefix hits for a running request";
    return;
  }
  std::vector<BlockId>& req_blocks = req_blocks_entry(slot);
  KVTWIN_CHECK(req_blocks.empty()) << "a new request already holds blocks";
  int64_t num_total_computed_tokens = num_local_computed_tokens + num_external_computed_tokens;
  int64_t num_skipped_tokens = get_num_skipped_tokens(num_total_computed_tokens);
  int64_t num_skipped_blocks = floor_div(num_skipped_tokens, block_size_);
  if (num_skipped_blocks > 0) {
    size_t drop = std::min(static_cast<size_t>(num_skipped_blocks), new_computed_blocks.size());
    new_computed_blocks = new_computed_blocks.subspan(drop);
    num_external_computed_tokens =
        std::min(num_total_computed_tokens - num_skipped_tokens, num_external_computed_tokens);
  }
  if (enable_caching_) {
    block_pool_->touch(new_computed_blocks);
  } else {
    KVTWIN_CHECK(new_computed_blocks.empty())
        << "Computed blocks should be empty when prefix caching is disabled";
  }
  if (num_skipped_blocks > 0)
    req_blocks.insert(req_blocks.end(), static_cast<size_t>(num_skipped_blocks), null_block_);
  req_blocks.insert(req_blocks.end(), new_computed_blocks.begin(), new_computed_blocks.end());
  // Hits (skipped nulls included) are already cached: cache_blocks starts after them.
  state(slot).num_cached_block = static_cast<int32_t>(req_blocks.size());
  if (num_external_computed_tokens > 0) {
    int64_t n =
        cdiv(num_total_computed_tokens, block_size_) - static_cast<int64_t>(req_blocks.size());
    KVTWIN_CHECK_GE(n, 0) << "negative block count for external tokens";
    block_pool_->get_new_blocks(static_cast<int>(n), &req_blocks);
  }
}

void SingleTypeKVCacheManager::allocate_new_blocks(RequestSlot slot, int64_t num_tokens,
                                                   int64_t /*num_tokens_main_model*/,
                                                   std::vector<BlockId>* new_blocks) {
  std::vector<BlockId>& req_blocks = req_blocks_entry(slot);
  int64_t num_new_blocks = cdiv(num_tokens, block_size_) - static_cast<int64_t>(req_blocks.size());
  if (num_new_blocks <= 0) return;
  size_t first = req_blocks.size();
  block_pool_->get_new_blocks(static_cast<int>(num_new_blocks), &req_blocks);
  new_blocks->insert(new_blocks->end(), req_blocks.begin() + static_cast<std::ptrdiff_t>(first),
                     req_blocks.end());
}

void SingleTypeKVCacheManager::cache_blocks(const Request& request, RequestSlot slot,
                                            int64_t num_tokens) {
  int num_cached_blocks = std::max(state(slot).num_cached_block, 0);
  int64_t num_full_blocks = floor_div(num_tokens, block_size_);
  if (num_cached_blocks >= num_full_blocks) return;
  std::vector<BlockId>& blocks = req_blocks_entry(slot);
  block_pool_->cache_full_blocks(request, blocks, num_cached_blocks,
                                 static_cast<int>(num_full_blocks), block_size_, group_id_);
  state(slot).num_cached_block = static_cast<int32_t>(num_full_blocks);
}

void SingleTypeKVCacheManager::free(RequestSlot slot) {
  ReqState& s = state(slot);
  if (s.has_blocks_entry) {
    // Tail blocks first, so that they are evicted first.
    block_pool_->free_blocks_reversed(s.blocks);
    s.blocks.clear();
    s.has_blocks_entry = false;
    --num_req_entries_;
  }
  s.num_cached_block = -1;
}

void SingleTypeKVCacheManager::remove_skipped_blocks(RequestSlot slot,
                                                     int64_t total_computed_tokens) {
  int64_t num_skipped_tokens = get_num_skipped_tokens(total_computed_tokens);
  if (num_skipped_tokens <= 0) return;  // every token is inside the attention window
  std::vector<BlockId>& blocks = req_blocks_entry(slot);
  // The skipped range may reach tokens that have no block yet (external tokens).
  int64_t num_skipped_blocks =
      std::min(floor_div(num_skipped_tokens, block_size_), static_cast<int64_t>(blocks.size()));
  scratch_.clear();
  for (int64_t i = num_skipped_blocks - 1; i >= 0; --i) {
    BlockId& b = blocks[static_cast<size_t>(i)];
    if (b == null_block_) break;  // earlier calls already nulled everything before it
    scratch_.push_back(b);
    b = null_block_;
  }
  block_pool_->free_blocks(scratch_);
}

void SingleTypeKVCacheManager::check_invariants() const {
  int entries = 0;
  for (const ReqState& s : reqs_) {
    if (!s.has_blocks_entry) {
      KVTWIN_CHECK(s.blocks.empty()) << "blocks without a req_to_blocks entry";
      continue;
    }
    ++entries;
    for (BlockId b : s.blocks) {
      KVTWIN_CHECK(b >= 0 && b < block_pool_->num_gpu_blocks()) << "invalid block id " << b;
      if (b != null_block_)
        KVTWIN_CHECK_GE(block_pool_->ref_cnt(b), 1) << "held block " << b << " is free";
    }
  }
  KVTWIN_CHECK_EQ(entries, num_req_entries_) << "req_to_blocks entry count out of sync";
}

std::unique_ptr<SingleTypeKVCacheManager> make_single_type_manager(
    const SingleTypeManagerOptions& options) {
  switch (options.kv_cache_spec.kind) {
    case KVCacheSpecKind::kFullAttention:
    case KVCacheSpecKind::kMLAAttention:
      return std::make_unique<FullAttentionManager>(options);
    case KVCacheSpecKind::kSinkFullAttention:
      return std::make_unique<SinkFullAttentionManager>(options);
    case KVCacheSpecKind::kSlidingWindow:
      return std::make_unique<SlidingWindowManager>(options);
    case KVCacheSpecKind::kChunkedLocalAttention:
      return std::make_unique<ChunkedLocalAttentionManager>(options);
    case KVCacheSpecKind::kMamba:
      return std::make_unique<MambaManager>(options);
    case KVCacheSpecKind::kCrossAttention:
      return std::make_unique<CrossAttentionManager>(options);
  }
  KVTWIN_CHECK(false) << "unknown KV cache spec kind "
                      << static_cast<int>(options.kv_cache_spec.kind);
  return nullptr;
}

}  // namespace kvtwin::model::vllm
