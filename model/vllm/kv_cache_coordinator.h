// KVCacheCoordinator: owns the BlockPool and one SingleTypeKVCacheManager per KV cache group,
// and fans KVCacheManager's calls out to them in group order (vLLM's kv_cache_coordinator.py).
//
// Three kinds, chosen as upstream's get_kv_cache_coordinator does:
//   - KVCacheCoordinatorNoPrefixCache: caching off; no hits, no common prefix.
//   - UnitaryKVCacheCoordinator: caching on, one group. Block size × dcp × pcp.
//   - HybridKVCacheCoordinator: caching on, several groups. Groups with equal specs form one
//     attention group (looked up together); full-attention groups first. The hit length must be
//     a multiple of lcm(block sizes) and is found by a fixed point (see the .cc).
//
// Threading: none.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "model/vllm/block_pool.h"
#include "model/vllm/kv_cache_blocks.h"
#include "model/vllm/kv_cache_interface.h"
#include "model/vllm/single_type_kv_cache_manager.h"

namespace kvtwin::model::vllm {

struct KVCacheCoordinatorOptions {
  KVCacheConfig kv_cache_config;
  int64_t max_model_len = 0;
  bool use_eagle = false;
  bool enable_caching = true;
  bool enable_kv_cache_events = false;
  bool kv_events_use_int_block_hashes = false;
  bool record_hash_events = false;  // BlockPoolOptions::record_hash_events
  int dcp_world_size = 1;
  int pcp_world_size = 1;
  int hash_block_size = 16;
};

class KVCacheCoordinator {
 public:
  explicit KVCacheCoordinator(const KVCacheCoordinatorOptions& options);
  virtual ~KVCacheCoordinator() = default;
  KVCacheCoordinator(const KVCacheCoordinator&) = delete;
  KVCacheCoordinator& operator=(const KVCacheCoordinator&) = delete;

  // The upstream class name (golden header derived.coordinator).
  virtual std::string_view name() const = 0;

  BlockPool& block_pool() { return block_pool_; }
  const BlockPool& block_pool() const { return block_pool_; }
  int num_groups() const { return static_cast<int>(managers_.size()); }
  SingleTypeKVCacheManager& manager(int g) { return *managers_[static_cast<size_t>(g)]; }
  const SingleTypeKVCacheManager& manager(int g) const {
    return *managers_[static_cast<size_t>(g)];
  }

  // Sum over groups; cross-attention groups count num_encoder_tokens instead.
  int64_t get_num_blocks_to_allocate(RequestSlot slot, int64_t num_tokens,
                                     const KVCacheBlocks& new_computed_blocks,
                                     int64_t num_encoder_tokens, int64_t total_computed_tokens,
                                     int64_t num_tokens_main_model);
  void allocate_new_computed_blocks(RequestSlot slot, const KVCacheBlocks& new_computed_blocks,
                                    int64_t num_local_computed_tokens,
                                    int64_t num_external_computed_tokens);
  // Writes the new blocks of every group to *out (reset to num_groups() groups).
  void allocate_new_blocks(RequestSlot slot, int64_t num_tokens, int64_t num_tokens_main_model,
                           int64_t num_encoder_tokens, KVCacheBlocks* out);
  void cache_blocks(const Request& request, RequestSlot slot, int64_t num_computed_tokens);
  // True when every group's allocation_is_noop holds (see SingleTypeKVCacheManager).
  bool allocation_is_noop(RequestSlot slot, int64_t num_tokens, int64_t num_tokens_to_cache) const {
    for (const auto& m : managers_)
      if (!m->allocation_is_noop(slot, num_tokens, num_tokens_to_cache)) return false;
    return true;
  }
  void free(RequestSlot slot);
  virtual std::vector<int> get_num_common_prefix_blocks(RequestSlot slot);
  void remove_skipped_blocks(RequestSlot slot, int64_t total_computed_tokens);
  // The block tables of the request (empty for groups without an entry).
  void get_blocks(RequestSlot slot, KVCacheBlocks* out) const;
  // The longest prefix hit of at most max_cache_hit_length tokens; writes the blocks per group
  // to *out and returns the hit length in tokens.
  virtual int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                         int64_t max_cache_hit_length, KVCacheBlocks* out) = 0;
  void new_step_starts();
  void reserve_slot(RequestSlot slot);
  void check_invariants() const;

 protected:
  KVCacheCoordinatorOptions options_;
  BlockPool block_pool_;
  std::vector<std::unique_ptr<SingleTypeKVCacheManager>> managers_;
  std::vector<uint8_t> is_cross_attention_;
};

class KVCacheCoordinatorNoPrefixCache final : public KVCacheCoordinator {
 public:
  explicit KVCacheCoordinatorNoPrefixCache(const KVCacheCoordinatorOptions& options);
  std::string_view name() const override { return "KVCacheCoordinatorNoPrefixCache"; }
  std::vector<int> get_num_common_prefix_blocks(RequestSlot slot) override;
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                 int64_t max_cache_hit_length, KVCacheBlocks* out) override;
};

class UnitaryKVCacheCoordinator final : public KVCacheCoordinator {
 public:
  explicit UnitaryKVCacheCoordinator(const KVCacheCoordinatorOptions& options);
  std::string_view name() const override { return "UnitaryKVCacheCoordinator"; }
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                 int64_t max_cache_hit_length, KVCacheBlocks* out) override;

 private:
  int block_size_;  // spec block size × dcp × pcp
  std::vector<std::vector<BlockId>> hit_;
};

class HybridKVCacheCoordinator final : public KVCacheCoordinator {
 public:
  // Groups with equal specs, in lookup order (full attention first, then first appearance).
  struct AttentionGroup {
    KVCacheSpec spec;
    std::vector<int> group_ids;
  };

  explicit HybridKVCacheCoordinator(const KVCacheCoordinatorOptions& options);
  std::string_view name() const override { return "HybridKVCacheCoordinator"; }
  int64_t find_longest_cache_hit(std::span<const BlockHash> block_hashes,
                                 int64_t max_cache_hit_length, KVCacheBlocks* out) override;

  const std::vector<AttentionGroup>& attention_groups() const { return attention_groups_; }
  int64_t lcm_block_size() const { return lcm_block_size_; }

 private:
  std::vector<AttentionGroup> attention_groups_;
  int64_t lcm_block_size_ = 1;
};

// vLLM's get_kv_cache_coordinator.
std::unique_ptr<KVCacheCoordinator> make_kv_cache_coordinator(
    const KVCacheCoordinatorOptions& options);

}  // namespace kvtwin::model::vllm
