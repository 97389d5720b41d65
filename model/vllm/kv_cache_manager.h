// KVCacheManager: the scheduler's interface to KV-cache memory (vLLM v0.17.0's
// kv_cache_manager.KVCacheManager). This header is the contract the simulator's scheduler reads.
//
// A scheduler step, as vLLM's scheduler drives it:
//
//   new_step_starts()
//   for a waiting request:   auto [hits, n] = get_computed_blocks(req);        // no side effect
//                            auto blocks = allocate_slots(req, {.num_new_tokens = k,
//                                            .num_new_computed_tokens = n,
//                                            .new_computed_blocks = &hits});   // nullopt: no room
//   for a running request:   allocate_slots(req, {.num_new_tokens = k, ...})   // preempt on
//   nullopt finished / preempted:    free(req)
//
// allocate_slots, token ranges of the request:
//
//   | < comp > | < new_comp > | < ext_comp > | < new > | < lookahead > |
//                                            |  < to be computed >     |
//                             |         < to be allocated >            |
//   | < cached by vLLM >      | < connector >|
//   comp = request.num_computed_tokens, new_comp = num_new_computed_tokens (prefix hits),
//   ext_comp = num_external_computed_tokens (KV connector), new = num_new_tokens (with
//   unverified draft tokens), lookahead = num_lookahead_tokens (speculative slots).
//
// Stages: (1) free blocks that left the attention window (even if the call then fails);
// (2) capacity check, counting evictable prefix hits; return nullopt if short; (3) touch the hits
// and allocate external-token blocks; (4) allocate blocks for new + lookahead tokens (capped at
// max_model_len); (5) unless delay_cache_blocks, cache full blocks up to
// min(total computed + new, request.num_tokens()) — draft tokens are never cached.
//
// Requests are identified by request_id; the manager keeps per-request state only between the
// first call that creates it and free(). Threading: none; one manager per simulated engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/vllm/kv_cache_blocks.h"
#include "model/vllm/kv_cache_coordinator.h"
#include "model/vllm/kv_events.h"
#include "model/vllm/prefix_cache_stats.h"
#include "model/vllm/request.h"

namespace kvtwin::model::vllm {

struct KVCacheManagerOptions {
  KVCacheConfig kv_cache_config;
  int64_t max_model_len = 0;
  // Block size of the request block hasher: the smallest group block size × dcp × pcp.
  int hash_block_size = 16;
  bool enable_caching = true;
  bool use_eagle = false;
  bool log_stats = false;
  bool enable_kv_cache_events = false;
  bool kv_events_use_int_block_hashes = false;
  // Not upstream: records the hash stream (KvHashEvent, take_hash_events) for consumers that
  // only index the cached hashes; independent of enable_kv_cache_events.
  bool record_hash_events = false;
  int dcp_world_size = 1;
  int pcp_world_size = 1;
};

// The optional arguments of allocate_slots (upstream's keyword arguments and their defaults).
struct AllocateSlotsArgs {
  int64_t num_new_tokens = 0;
  int64_t num_new_computed_tokens = 0;
  // Prefix hits from get_computed_blocks; nullptr = None (same as all groups empty).
  const KVCacheBlocks* new_computed_blocks = nullptr;
  int64_t num_lookahead_tokens = 0;
  int64_t num_external_computed_tokens = 0;
  bool delay_cache_blocks = false;
  int64_t num_encoder_tokens = 0;
};

class KVCacheManager {
 public:
  explicit KVCacheManager(const KVCacheManagerOptions& options);

  struct ComputedBlocks {
    KVCacheBlocks blocks;  // per group; all empty when nothing hit
    int64_t num_computed_tokens = 0;
  };

  // The cached prefix of the request, capped at num_tokens - 1 tokens (the last token is
  // always recomputed for its logits). Records prefix-cache stats. Touches nothing: the hits are
  // only claimed by allocate_slots. Empty when caching is off or the request skips reading.
  ComputedBlocks get_computed_blocks(const Request& request);

  // Gives the request slots for its new tokens (stages above). Returns the newly allocated
  // blocks per group, or nullopt when the pool is short (nothing allocated or touched, but
  // stage 1 may have freed skipped blocks). REQUIRES: num_new_tokens > 0 or
  // num_external_computed_tokens > 0.
  std::optional<KVCacheBlocks> allocate_slots(Request& request, const AllocateSlotsArgs& args);
  // The same writing the new blocks to *out (its storage reused; untouched on failure);
  // returns false where the above returns nullopt.
  bool allocate_slots(Request& request, const AllocateSlotsArgs& args, KVCacheBlocks* out);

  // Frees every block of the request, tail first, and forgets it. The request object itself is
  // the caller's (a preempted request is reset by the scheduler).
  void free(Request& request);

  // Frees the blocks that left the attention window (sliding window, chunked local, Mamba).
  void remove_skipped_blocks(const std::string& request_id, int64_t total_computed_tokens);
  // Caches the request's full blocks up to num_computed_tokens (KV connectors after an async
  // load). No-op when caching is off.
  void cache_blocks(const Request& request, int64_t num_computed_tokens);

  // The request's block table per group (null block = 0 at skipped positions).
  KVCacheBlocks get_blocks(const std::string& request_id) const;
  std::vector<std::vector<BlockId>> get_block_ids(const std::string& request_id) const {
    return get_blocks(request_id).get_block_ids();
  }
  // Per group: leading blocks shared by every request holding blocks (full attention only).
  std::vector<int> get_num_common_prefix_blocks(const std::string& request_id);

  // Drops the given blocks from the prefix cache (KV connector invalidation).
  // REQUIRES: every id < num_gpu_blocks.
  void evict_blocks(std::span<const BlockId> block_ids);
  // Clears the prefix cache if no request holds blocks; returns whether it did.
  bool reset_prefix_cache();
  // Clears Mamba's set of blocks cached in the current step.
  void new_step_starts() { coordinator_->new_step_starts(); }
  std::vector<KVCacheEvent> take_events() { return pool().take_events(); }
  // The hash stream since the last call (see BlockPool::take_hash_events).
  void take_hash_events(std::vector<KvHashEvent>* out) { pool().take_hash_events(out); }
  // The stats since the last call, then reset; nullopt unless log_stats.
  std::optional<PrefixCacheStats> make_prefix_cache_stats();

  // Fraction of non-null blocks in use.
  double usage() const { return block_pool().get_usage(); }
  int num_free_blocks() const { return block_pool().get_num_free_blocks(); }
  int num_kv_cache_groups() const { return coordinator_->num_groups(); }
  const KVCacheBlocks& empty_kv_cache_blocks() const { return empty_; }

  const KVCacheManagerOptions& options() const { return options_; }
  const BlockPool& block_pool() const { return coordinator_->block_pool(); }
  const KVCacheCoordinator& coordinator() const { return *coordinator_; }

  // Per request with an entry in some group's num_cached_block: the per-group counters
  // (nullopt where a group has none), ordered by request id.
  std::vector<std::pair<std::string, std::vector<std::optional<int>>>> num_cached_blocks() const;

  // Every structural invariant (pool, free queue, hash map, tables) plus: each non-null block's
  // ref_cnt equals the number of request tables holding it (sink blocks: 0). O(blocks + tables).
  void check_invariants() const;

 private:
  BlockPool& pool() { return coordinator_->block_pool(); }
  RequestSlot find_slot(const std::string& request_id) const;
  RequestSlot find_or_create_slot(const std::string& request_id);
  RequestSlot slot_of(Request& request);
  void release_slot(RequestSlot slot);

  KVCacheManagerOptions options_;
  std::unique_ptr<KVCacheCoordinator> coordinator_;
  std::optional<PrefixCacheStats> prefix_cache_stats_;
  KVCacheBlocks empty_;
  // Request id → slot for requests with (possible) per-manager state.
  std::unordered_map<std::string, RequestSlot> slot_of_;
  std::vector<std::string> slot_ids_;
  // Per slot: a process-unique stamp given when the slot is (re)assigned, 0 while free (so a
  // slot is live iff its stamp is not 0); a Request's cached handle is valid iff it carries the
  // same stamp.
  std::vector<uint64_t> slot_stamp_;
  std::vector<RequestSlot> free_slots_;
};

}  // namespace kvtwin::model::vllm
