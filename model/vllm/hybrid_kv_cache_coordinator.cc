// HybridKVCacheCoordinator (declared in kv_cache_coordinator.h).
#include <numeric>

#include "model/check.h"
#include "model/vllm/kv_cache_coordinator.h"

namespace kvtwin::model::vllm {

HybridKVCacheCoordinator::HybridKVCacheCoordinator(const KVCacheCoordinatorOptions& options)
    : KVCacheCoordinator(options) {
  KVTWIN_CHECK(options.dcp_world_size == 1 && options.pcp_world_size == 1)
      << "DCP/PCP do not support hybrid attention";
  const auto& groups = options.kv_cache_config.kv_cache_groups;
  for (const auto& g : groups)
    KVTWIN_CHECK(g.kv_cache_spec.block_size % options.hash_block_size == 0)
        << "block_size " << g.kv_cache_spec.block_size << " not divisible by hash_block_size "
        << options.hash_block_size;
  // Groups with equal specs share one lookup (verify_and_split_kv_cache_groups).
  std::vector<AttentionGroup> found;
  for (size_t i = 0; i < groups.size(); ++i) {
    bool merged = false;
    for (AttentionGroup& a : found) {
      if (a.spec == groups[i].kv_cache_spec) {
        a.group_ids.push_back(static_cast<int>(i));
        merged = true;
        break;
      }
    }
    if (!merged) found.push_back({groups[i].kv_cache_spec, {static_cast<int>(i)}});
  }
  KVTWIN_CHECK(found.size() > 1) << "HybridKVCacheCoordinator requires two attention groups";
  // Full attention first (a stable sort on "is not full attention").
  for (const AttentionGroup& a : found)
    if (a.spec.is_full_attention()) attention_groups_.push_back(a);
  for (const AttentionGroup& a : found)
    if (!a.spec.is_full_attention()) attention_groups_.push_back(a);
  // Hits must be a multiple of every block size.
  lcm_block_size_ = 1;
  for (const AttentionGroup& a : found)
    lcm_block_size_ = std::lcm(lcm_block_size_, int64_t{a.spec.block_size});
}

// Fixed point: each attention group accepts the candidate length or shortens it; any
// shortening restarts the pass. Full attention is downward-closed, so after its first lookup it
// only truncates. A "simple" hybrid (two attention groups led by full attention) stops after one
// pass, so EAGLE drops apply once; with more groups EAGLE drops repeat on every pass.
int64_t HybridKVCacheCoordinator::find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                                         int64_t max_cache_hit_length,
                                                         KVCacheBlocks* out) {
  const int n = num_groups();
  std::vector<std::vector<BlockId>> hit_by_group(static_cast<size_t>(n));
  std::vector<uint8_t> has_hit(static_cast<size_t>(n), 0);
  std::vector<std::vector<BlockId>> hit;
  const bool is_simple_hybrid =
      attention_groups_.size() == 2 && attention_groups_[0].spec.is_full_attention();
  const int hash_block_size = options_.hash_block_size;
  int64_t hit_length = max_cache_hit_length;
  for (;;) {
    int64_t curr = hit_length;
    for (const AttentionGroup& a : attention_groups_) {
      const int64_t bs = a.spec.block_size;
      if (a.spec.is_full_attention() && has_hit[static_cast<size_t>(a.group_ids[0])]) {
        curr = floor_div(curr, bs) * bs;  // keep the first curr // bs blocks
        continue;
      }
      BlockHashListWithBlockSize hashes(block_hashes, hash_block_size, a.spec.block_size);
      manager(a.group_ids[0])
          .find_longest_cache_hit(hashes, curr, a.group_ids, options_.use_eagle, lcm_block_size_,
                                  &hit);
      curr = static_cast<int64_t>(hit[0].size()) * bs;
      for (size_t i = 0; i < a.group_ids.size(); ++i) {
        hit_by_group[static_cast<size_t>(a.group_ids[i])] = std::move(hit[i]);
        has_hit[static_cast<size_t>(a.group_ids[i])] = 1;
      }
    }
    if (curr >= hit_length) break;
    hit_length = curr;
    if (is_simple_hybrid) break;
  }
  // Truncate the leading full-attention group to the final length.
  const AttentionGroup& first = attention_groups_[0];
  if (first.spec.is_full_attention()) {
    size_t num_blocks = static_cast<size_t>(floor_div(hit_length, first.spec.block_size));
    for (int g : first.group_ids) {
      auto& blocks = hit_by_group[static_cast<size_t>(g)];
      if (blocks.size() > num_blocks) blocks.resize(num_blocks);
    }
  }
  out->reset(n);
  for (int g = 0; g < n; ++g) {
    const auto& blocks = hit_by_group[static_cast<size_t>(g)];
    out->ids().insert(out->ids().end(), blocks.begin(), blocks.end());
    out->end_group(g);
  }
  return hit_length;
}

}  // namespace kvtwin::model::vllm
