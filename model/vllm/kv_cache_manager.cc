#include "model/vllm/kv_cache_manager.h"

#include <algorithm>
#include <atomic>

#include "model/check.h"

namespace kvtwin::model::vllm {

namespace {
// Slot stamps, unique across every manager of the process (never 0).
uint64_t next_slot_stamp() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

KVCacheManager::KVCacheManager(const KVCacheManagerOptions& options) : options_(options) {
  KVCacheCoordinatorOptions c;
  c.kv_cache_config = options.kv_cache_config;
  c.max_model_len = options.max_model_len;
  c.use_eagle = options.use_eagle;
  c.enable_caching = options.enable_caching;
  c.enable_kv_cache_events = options.enable_kv_cache_events;
  c.kv_events_use_int_block_hashes = options.kv_events_use_int_block_hashes;
  c.record_hash_events = options.record_hash_events;
  c.dcp_world_size = options.dcp_world_size;
  c.pcp_world_size = options.pcp_world_size;
  c.hash_block_size = options.hash_block_size;
  coordinator_ = make_kv_cache_coordinator(c);
  if (options.log_stats) prefix_cache_stats_.emplace();
  empty_.reset(coordinator_->num_groups());
}

RequestSlot KVCacheManager::find_slot(const std::string& request_id) const {
  auto it = slot_of_.find(request_id);
  return it == slot_of_.end() ? -1 : it->second;
}

RequestSlot KVCacheManager::find_or_create_slot(const std::string& request_id) {
  auto [it, inserted] = slot_of_.try_emplace(request_id, -1);
  if (!inserted) return it->second;
  RequestSlot slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<RequestSlot>(slot_ids_.size());
    slot_ids_.emplace_back();
    slot_stamp_.push_back(0);
    coordinator_->reserve_slot(slot);
  }
  slot_ids_[static_cast<size_t>(slot)] = request_id;
  slot_stamp_[static_cast<size_t>(slot)] = next_slot_stamp();
  it->second = slot;
  return slot;
}

RequestSlot KVCacheManager::slot_of(Request& request) {
  RequestSlot s = request.kv_slot_;
  if (s >= 0 && static_cast<size_t>(s) < slot_stamp_.size() &&
      slot_stamp_[static_cast<size_t>(s)] == request.kv_stamp_)
    return s;
  s = find_or_create_slot(request.request_id());
  request.kv_slot_ = s;
  request.kv_stamp_ = slot_stamp_[static_cast<size_t>(s)];
  return s;
}

void KVCacheManager::release_slot(RequestSlot slot) {
  slot_of_.erase(slot_ids_[static_cast<size_t>(slot)]);
  slot_ids_[static_cast<size_t>(slot)].clear();
  slot_stamp_[static_cast<size_t>(slot)] = 0;
  free_slots_.push_back(slot);
}

KVCacheManager::ComputedBlocks KVCacheManager::get_computed_blocks(const Request& request) {
  ComputedBlocks out;
  if (!options_.enable_caching || request.skip_reading_prefix_cache()) {
    out.blocks = empty_;
    return out;
  }
  // All tokens hit: the last one is still recomputed for its logits.
  int64_t max_cache_hit_length = request.num_tokens() - 1;
  out.num_computed_tokens = coordinator_->find_longest_cache_hit(request.block_hashes(),
                                                                 max_cache_hit_length, &out.blocks);
  if (prefix_cache_stats_)
    prefix_cache_stats_->record(request.num_tokens(), out.num_computed_tokens,
                                request.num_preemptions > 0);
  return out;
}

std::optional<KVCacheBlocks> KVCacheManager::allocate_slots(Request& request,
                                                            const AllocateSlotsArgs& args) {
  std::optional<KVCacheBlocks> new_blocks(std::in_place);
  if (!allocate_slots(request, args, &*new_blocks)) return std::nullopt;
  return new_blocks;
}

bool KVCacheManager::allocate_slots(Request& request, const AllocateSlotsArgs& args,
                                    KVCacheBlocks* out) {
  KVTWIN_CHECK(args.num_new_tokens > 0 || args.num_external_computed_tokens > 0)
      << "num_new_tokens must be greater than 0 when there are no external computed tokens";
  const KVCacheBlocks& hits =
      args.new_computed_blocks != nullptr ? *args.new_computed_blocks : empty_;
  RequestSlot slot = slot_of(request);
  const int64_t max_model_len = options_.max_model_len;
  int64_t num_local_computed_tokens = request.num_computed_tokens + args.num_new_computed_tokens;
  int64_t total_computed_tokens =
      std::min(num_local_computed_tokens + args.num_external_computed_tokens, max_model_len);
  int64_t num_tokens_main_model = total_computed_tokens + args.num_new_tokens;
  int64_t num_tokens_need_slot =
      std::min(num_tokens_main_model + args.num_lookahead_tokens, max_model_len);
  const bool cache = options_.enable_caching && !args.delay_cache_blocks;
  const int64_t num_tokens_to_cache =
      cache ? std::min(total_computed_tokens + args.num_new_tokens, request.num_tokens()) : -1;

  // 0. A decode step inside the request's last block: stages 1-5 would do nothing.
  if (hits.all_empty() && args.num_external_computed_tokens == 0 &&
      coordinator_->allocation_is_noop(slot, num_tokens_need_slot, num_tokens_to_cache)) {
    out->reset(coordinator_->num_groups());
    return true;
  }
  // 1. Free blocks outside the attention window, even if the allocation then fails.
  coordinator_->remove_skipped_blocks(slot, total_computed_tokens);
  // 2. Capacity check; evictable hits count as allocations.
  int64_t num_blocks_to_allocate = coordinator_->get_num_blocks_to_allocate(
      slot, num_tokens_need_slot, hits, args.num_encoder_tokens,
      num_local_computed_tokens + args.num_external_computed_tokens, num_tokens_main_model);
  if (num_blocks_to_allocate > pool().get_num_free_blocks()) return false;
  // 3. Claim the prefix hits (and external-token blocks) first.
  if (!hits.all_empty() || args.num_external_computed_tokens > 0)
    coordinator_->allocate_new_computed_blocks(slot, hits, num_local_computed_tokens,
                                               args.num_external_computed_tokens);
  // 4. Blocks for the tokens to compute.
  coordinator_->allocate_new_blocks(slot, num_tokens_need_slot, num_tokens_main_model,
                                    args.num_encoder_tokens, out);
  // 5. Cache the finalized full blocks (never draft tokens).
  if (cache) coordinator_->cache_blocks(request, slot, num_tokens_to_cache);
  return true;
}

void KVCacheManager::free(Request& request) {
  RequestSlot slot = find_slot(request.request_id());
  request.kv_slot_ = -1;
  if (slot < 0) return;  // nothing allocated (e.g. aborted before its first allocation)
  coordinator_->free(slot);
  release_slot(slot);
}

void KVCacheManager::remove_skipped_blocks(const std::string& request_id,
                                           int64_t total_computed_tokens) {
  coordinator_->remove_skipped_blocks(find_or_create_slot(request_id), total_computed_tokens);
}

void KVCacheManager::cache_blocks(const Request& request, int64_t num_computed_tokens) {
  if (!options_.enable_caching) return;
  coordinator_->cache_blocks(request, find_or_create_slot(request.request_id()),
                             num_computed_tokens);
}

KVCacheBlocks KVCacheManager::get_blocks(const std::string& request_id) const {
  KVCacheBlocks out(coordinator_->num_groups());
  RequestSlot slot = find_slot(request_id);
  if (slot >= 0) coordinator_->get_blocks(slot, &out);
  return out;
}

std::vector<int> KVCacheManager::get_num_common_prefix_blocks(const std::string& request_id) {
  return coordinator_->get_num_common_prefix_blocks(find_or_create_slot(request_id));
}

void KVCacheManager::evict_blocks(std::span<const BlockId> block_ids) {
  pool().evict_blocks(block_ids);
}

bool KVCacheManager::reset_prefix_cache() {
  if (!pool().reset_prefix_cache()) return false;
  if (prefix_cache_stats_) prefix_cache_stats_->reset = true;
  return true;
}

std::optional<PrefixCacheStats> KVCacheManager::make_prefix_cache_stats() {
  if (!prefix_cache_stats_) return std::nullopt;
  PrefixCacheStats stats = *prefix_cache_stats_;
  *prefix_cache_stats_ = PrefixCacheStats{};
  return stats;
}

std::vector<std::pair<std::string, std::vector<std::optional<int>>>>
KVCacheManager::num_cached_blocks() const {
  std::vector<std::pair<std::string, std::vector<std::optional<int>>>> out;
  for (size_t s = 0; s < slot_ids_.size(); ++s) {
    if (slot_stamp_[s] == 0) continue;  // a free slot
    std::vector<std::optional<int>> per_group;
    bool any = false;
    for (int g = 0; g < coordinator_->num_groups(); ++g) {
      per_group.push_back(coordinator_->manager(g).num_cached_block(static_cast<RequestSlot>(s)));
      any |= per_group.back().has_value();
    }
    if (any) out.emplace_back(slot_ids_[s], std::move(per_group));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

void KVCacheManager::check_invariants() const {
  coordinator_->check_invariants();
  const BlockPool& pool = block_pool();
  std::vector<int64_t> holders(static_cast<size_t>(pool.num_gpu_blocks()), 0);
  for (size_t s = 0; s < slot_ids_.size(); ++s) {
    if (slot_stamp_[s] == 0) {  // a free slot: no id, so no map entry leads to it
      KVTWIN_CHECK(slot_ids_[s].empty()) << "free slot " << s << " keeps id " << slot_ids_[s];
      continue;
    }
    KVTWIN_CHECK_EQ(find_slot(slot_ids_[s]), static_cast<RequestSlot>(s));
    for (int g = 0; g < coordinator_->num_groups(); ++g)
      for (BlockId b : coordinator_->manager(g).req_blocks(static_cast<RequestSlot>(s)))
        ++holders[static_cast<size_t>(b)];
  }
  KVTWIN_CHECK_EQ(slot_of_.size() + free_slots_.size(), slot_ids_.size());
  for (const KVCacheBlock& blk : pool.blocks()) {
    if (blk.is_null) continue;
    KVTWIN_CHECK_EQ(pool.ref_cnt(blk.block_id), holders[static_cast<size_t>(blk.block_id)])
        << "block " << blk.block_id << ": ref_cnt differs from the number of holders";
  }
}

}  // namespace kvtwin::model::vllm
