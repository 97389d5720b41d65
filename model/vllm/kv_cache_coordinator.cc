#include "model/vllm/kv_cache_coordinator.h"

#include "model/check.h"

namespace kvtwin::model::vllm {

KVCacheCoordinator::KVCacheCoordinator(const KVCacheCoordinatorOptions& options)
    : options_(options),
      block_pool_(BlockPoolOptions{options.kv_cache_config.num_blocks, options.enable_caching,
                                   options.hash_block_size, options.enable_kv_cache_events,
                                   options.kv_events_use_int_block_hashes,
                                   options.record_hash_events}) {
  const auto& groups = options.kv_cache_config.kv_cache_groups;
  KVTWIN_CHECK_LE(groups.size(), static_cast<size_t>(KVCacheBlocks::kMaxGroups));
  for (size_t i = 0; i < groups.size(); ++i) {
    SingleTypeManagerOptions m;
    m.kv_cache_spec = groups[i].kv_cache_spec;
    m.block_pool = &block_pool_;
    m.enable_caching = options.enable_caching;
    m.kv_cache_group_id = static_cast<int>(i);
    m.dcp_world_size = options.dcp_world_size;
    m.pcp_world_size = options.pcp_world_size;
    managers_.push_back(make_single_type_manager(m));
    is_cross_attention_.push_back(groups[i].kv_cache_spec.kind == KVCacheSpecKind::kCrossAttention);
  }
}

void KVCacheCoordinator::reserve_slot(RequestSlot slot) {
  for (auto& m : managers_) m->reserve_slot(slot);
}

int64_t KVCacheCoordinator::get_num_blocks_to_allocate(RequestSlot slot, int64_t num_tokens,
                                                       const KVCacheBlocks& new_computed_blocks,
                                                       int64_t num_encoder_tokens,
                                                       int64_t total_computed_tokens,
                                                       int64_t num_tokens_main_model) {
  int64_t total = 0;
  for (int g = 0; g < num_groups(); ++g) {
    if (is_cross_attention_[static_cast<size_t>(g)]) {
      // One static allocation sized by the encoder input.
      total += manager(g).get_num_blocks_to_allocate(slot, num_encoder_tokens, {}, 0,
                                                     num_encoder_tokens);
    } else {
      std::span<const BlockId> hits = new_computed_blocks.num_groups() > 0
                                          ? new_computed_blocks[g]
                                          : std::span<const BlockId>();
      total += manager(g).get_num_blocks_to_allocate(slot, num_tokens, hits, total_computed_tokens,
                                                     num_tokens_main_model);
    }
  }
  return total;
}

void KVCacheCoordinator::allocate_new_computed_blocks(RequestSlot slot,
                                                      const KVCacheBlocks& new_computed_blocks,
                                                      int64_t num_local_computed_tokens,
                                                      int64_t num_external_computed_tokens) {
  for (int g = 0; g < num_groups(); ++g) {
    std::span<const BlockId> hits =
        new_computed_blocks.num_groups() > 0 ? new_computed_blocks[g] : std::span<const BlockId>();
    manager(g).allocate_new_computed_blocks(slot, hits, num_local_computed_tokens,
                                            num_external_computed_tokens);
  }
}

void KVCacheCoordinator::allocate_new_blocks(RequestSlot slot, int64_t num_tokens,
                                             int64_t num_tokens_main_model,
                                             int64_t num_encoder_tokens, KVCacheBlocks* out) {
  out->reset(num_groups());
  for (int g = 0; g < num_groups(); ++g) {
    int64_t n = is_cross_attention_[static_cast<size_t>(g)] ? num_encoder_tokens : num_tokens;
    manager(g).allocate_new_blocks(slot, n, num_tokens_main_model, &out->ids());
    out->end_group(g);
  }
}

void KVCacheCoordinator::cache_blocks(const Request& request, RequestSlot slot,
                                      int64_t num_computed_tokens) {
  for (auto& m : managers_) m->cache_blocks(request, slot, num_computed_tokens);
}

void KVCacheCoordinator::free(RequestSlot slot) {
  for (auto& m : managers_) m->free(slot);
}

std::vector<int> KVCacheCoordinator::get_num_common_prefix_blocks(RequestSlot slot) {
  std::vector<int> out;
  for (auto& m : managers_) out.push_back(m->get_num_common_prefix_blocks(slot));
  return out;
}

void KVCacheCoordinator::remove_skipped_blocks(RequestSlot slot, int64_t total_computed_tokens) {
  for (auto& m : managers_) m->remove_skipped_blocks(slot, total_computed_tokens);
}

void KVCacheCoordinator::get_blocks(RequestSlot slot, KVCacheBlocks* out) const {
  out->reset(num_groups());
  for (int g = 0; g < num_groups(); ++g) {
    std::span<const BlockId> blocks = manager(g).req_blocks(slot);
    out->ids().insert(out->ids().end(), blocks.begin(), blocks.end());
    out->end_group(g);
  }
}

void KVCacheCoordinator::new_step_starts() {
  for (auto& m : managers_) m->new_step_starts();
}

void KVCacheCoordinator::check_invariants() const {
  block_pool_.check_invariants();
  for (const auto& m : managers_) m->check_invariants();
}

// ------------------------------------------------------------------------ no prefix cache

KVCacheCoordinatorNoPrefixCache::KVCacheCoordinatorNoPrefixCache(
    const KVCacheCoordinatorOptions& options)
    : KVCacheCoordinator([&] {
        KVCacheCoordinatorOptions o = options;
        o.enable_caching = false;
        return o;
      }()) {}

std::vector<int> KVCacheCoordinatorNoPrefixCache::get_num_common_prefix_blocks(RequestSlot) {
  return std::vector<int>(static_cast<size_t>(num_groups()), 0);
}

int64_t KVCacheCoordinatorNoPrefixCache::find_longest_cache_hit(std::span<const BlockHash>, int64_t,
                                                                KVCacheBlocks* out) {
  out->reset(num_groups());
  return 0;
}

// ------------------------------------------------------------------------ unitary

UnitaryKVCacheCoordinator::UnitaryKVCacheCoordinator(const KVCacheCoordinatorOptions& options)
    : KVCacheCoordinator(options) {
  KVTWIN_CHECK_EQ(num_groups(), 1) << "UnitaryKVCacheCoordinator assumes one KV cache group";
  block_size_ = options.kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size;
  if (options.dcp_world_size > 1) block_size_ *= options.dcp_world_size;
  if (options.pcp_world_size > 1) block_size_ *= options.pcp_world_size;
  KVTWIN_CHECK(!options.enable_caching || options.hash_block_size == block_size_)
      << "UnitaryKVCacheCoordinator assumes hash_block_size == block_size (" << block_size_
      << ", hash block size " << options.hash_block_size << ")";
}

int64_t UnitaryKVCacheCoordinator::find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                                          int64_t max_cache_hit_length,
                                                          KVCacheBlocks* out) {
  static constexpr int kGroup0[1] = {0};
  BlockHashListWithBlockSize hashes(block_hashes, 1, 1);
  manager(0).find_longest_cache_hit(hashes, max_cache_hit_length, kGroup0, options_.use_eagle,
                                    block_size_, &hit_);
  out->reset(1);
  out->ids().assign(hit_[0].begin(), hit_[0].end());
  out->end_group(0);
  return static_cast<int64_t>(hit_[0].size()) * block_size_;
}

// ------------------------------------------------------------------------ factory

std::unique_ptr<KVCacheCoordinator> make_kv_cache_coordinator(
    const KVCacheCoordinatorOptions& options) {
  if (!options.enable_caching) return std::make_unique<KVCacheCoordinatorNoPrefixCache>(options);
  if (options.kv_cache_config.kv_cache_groups.size() == 1)
    return std::make_unique<UnitaryKVCacheCoordinator>(options);
  return std::make_unique<HybridKVCacheCoordinator>(options);
}

}  // namespace kvtwin::model::vllm
