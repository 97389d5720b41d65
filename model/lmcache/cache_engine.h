// LMCacheEngine (v1/cache_engine.py): store, retrieve, lookup and their layerwise forms over the
// StorageManager, for one worker (rank).
//
//   store(tokens, mask)      chunk keys -> allocate one CPU object per chunk (evicting; a failed
//                            allocation stops the loop: "store only N chunks"; no existence check)
//                            -> copy from the GPU (the model stamps each object's content) ->
//                            StorageManager.batched_put (write-through to every tier).
//   retrieve(tokens, mask)   per tier (the lookup's single pinned tier, else the tiered prefix
//                            mapping): batched_get; stop a tier at its first miss; then the
//                            partial-failure bookkeeping (Quirks::partial_retrieve_bookkeeping);
//                            load the chunks into the GPU; ref_count_down every loaded object.
//   lookup(tokens|hashes)    tiered prefix match; with pin the hit keys are pinned and recorded in
//                            lookup_pins[lookup_id] (replacing an earlier entry), then every tier
//                            is touched (reverse order: prefix most recent). Layerwise: chunk by
//                            chunk, all layer keys in one tier.
//   lookup_unpin(id)         unpins and forgets lookup_pins[id] (async loading, fixed: releases a
//                            finished prefetch nobody retrieved; see cache_engine_async.cc).
//   async_lookup_and_prefetch(hashes, id)   (enable_async_loading) the chunk keys and their
//                            cumulative lengths go to the StorageManager's prefetcher
//                            (async_prefetch.h); retrieve then takes the objects of the DONE
//                            event `req_id` instead of reading the tiers: chunk by chunk, stopping
//                            at the first chunk without an object; unused objects are released.
//   cleanup_memory_objs(id)  releases the objects of a finished prefetch (aborted lookups).
//   store_layer / retrieve_layer   generators, see layerwise_tasks.h.
//   clear(tokens?)           remove the tokens' chunks everywhere, or clear the CPU tier.
//
// Health and freeze: an unhealthy engine skips everything (empty results); a frozen one skips
// stores and reads only the CPU tier. Passive ranks (MLA save_only_first_rank, rank != 0) skip
// store and retrieve; the broadcast that feeds them upstream is not modelled.
//
// Results carry upstream exceptions as values (`error`): side effects before the raise stand.
// After each call the caller should invoke end_of_operation() (what LMCache's executor threads
// keep alive between jobs is released then; the golden harness does it after every op).
//
// For the simulator: all sizes come from LMCacheMetadata (bytes per chunk object:
// metadata().shape_bytes(metadata().get_shape(T))); asynchronous disk/remote writes are completed
// explicitly through storage_manager().complete_write(id) / complete_all_writes(); `loaded` and
// `gets` tell which tier served which chunk; storage_manager().events() lists evictions.
//
// Threading: none. One engine per rank; ranks of one node share a SharedStorage.
#pragma once

#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/lmcache/config.h"
#include "model/lmcache/metadata.h"
#include "model/lmcache/storage_manager.h"
#include "model/lmcache/token_database.h"
#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

class StoreLayerTask;
class RetrieveLayerTask;

struct TokenRange {
  int64_t start = 0;
  int64_t end = 0;
  friend bool operator==(const TokenRange&, const TokenRange&) = default;
};

// The token input of a call: tokens, or per-chunk hashes and token counts (the scheduler-side
// lookup sends hashes).
struct TokenInput {
  std::span<const TokenId> tokens;
  std::span<const ChunkHash> hashes;
  std::span<const int64_t> offsets;
  bool use_hashes = false;
  // Optional memo of `tokens`' leading chunk hashes (ChunkHashChain's contract).
  ChunkHashChain* chain = nullptr;

  static TokenInput of_tokens(std::span<const TokenId> t, ChunkHashChain* chain = nullptr) {
    return {t, {}, {}, false, chain};
  }
  static TokenInput of_hashes(std::span<const ChunkHash> h, std::span<const int64_t> o) {
    return {{}, h, o, true, nullptr};
  }
};

struct StoreRequest {
  TokenInput input;
  int64_t num_masked = 0;  // leading tokens whose mask is False
  const RequestConfigs* request_configs = nullptr;
};

struct StoreResult {
  std::vector<TokenRange> stored;  // chunks allocated and put, in order
  std::optional<PyError> error;
  // The GPU -> CPU copy of every chunk in `stored` ran (upstream's batched_from_gpu, between the
  // allocations and the puts). With an error, true means the raise came from the puts: the
  // chunks left the GPU, and some of them may be in the tiers.
  bool copied = false;
};

struct RetrieveRequest {
  std::span<const TokenId> tokens;
  int64_t num_masked = 0;
  std::optional<std::string> req_id;
  const RequestConfigs* request_configs = nullptr;
};

struct LoadedChunk {
  int64_t start = 0;
  int64_t end = 0;
  std::string location;
  bool bad = false;         // the object did not hold this key's KV (never, upstream, in the data)
  bool prefetched = false;  // async loading: already in the CPU pool (`location` was its source)
  CacheEngineKey key;  // the chunk's key (layerwise: the chunk's; its layers' are key.layer(l))
};

// One StorageManager.batched_get (or one layerwise_batched_get).
struct GetCall {
  std::string location;
  int num_keys = 0;
  int leading_non_null = 0;
  int non_null = 0;
  bool layerwise = false;
};

struct RetrieveResult {
  std::vector<TokenRange> ret_mask;  // runs of True
  int64_t ret_tokens = 0;
  std::vector<LoadedChunk> loaded;
  std::vector<GetCall> gets;
  std::optional<PyError> error;
};

struct LookupRequest {
  TokenInput input;
  const std::vector<std::string>* search_range = nullptr;
  std::optional<std::string> lookup_id;
  bool pin = false;
  const RequestConfigs* request_configs = nullptr;
};

struct LookupResult {
  int64_t hit_tokens = 0;
  std::optional<PyError> error;
};

// lookup_pins[lookup_id]: (tier, keys) in first-pinned order.
using PinMap = std::vector<std::pair<std::string, std::vector<CacheEngineKey>>>;

class LMCacheEngine {
 public:
  // `registry` (shared by ranks when given) interns key scopes; `shared` is the node's disk
  // directory and remote store.
  LMCacheEngine(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata,
                const SharedStorage& shared = {},
                std::shared_ptr<KeyScopeRegistry> registry = nullptr);
  ~LMCacheEngine();
  LMCacheEngine(const LMCacheEngine&) = delete;
  LMCacheEngine& operator=(const LMCacheEngine&) = delete;

  StoreResult store(const StoreRequest& req);
  RetrieveResult retrieve(const RetrieveRequest& req);
  LookupResult lookup(const LookupRequest& req);
  // The pins released (empty when lookup_id had none).
  PinMap lookup_unpin(const std::string& lookup_id);
  // Async loading (REQUIRES config().enable_async_loading): submits the lookup to the prefetcher;
  // its answer comes later through storage_manager().async_prefetcher()->take_responses().
  void async_lookup_and_prefetch(const LookupRequest& req);
  void cleanup_memory_objs(const std::string& lookup_id);
  // Generators (see layerwise_tasks.h); nothing runs until the first next().
  std::unique_ptr<StoreLayerTask> store_layer(const StoreRequest& req);
  std::unique_ptr<RetrieveLayerTask> retrieve_layer(const RetrieveRequest& req);
  // clear(tokens, locations): chunks removed (with tokens) or tokens cleared (without).
  struct ClearResult {
    int64_t count = 0;
    std::optional<PyError> error;
  };
  ClearResult clear(std::optional<std::span<const TokenId>> tokens,
                    const std::vector<std::string>* locations,
                    const RequestConfigs* request_configs);
  // 0 when the pool is consistent, -1 otherwise.
  int health() const { return storage_manager_->memcheck() ? 0 : -1; }
  void freeze(bool enabled) { storage_manager_->set_freeze(enabled); }
  bool is_frozen() const { return storage_manager_->is_frozen(); }
  // The health monitor's verdict (upstream: HealthMonitor / mark_init_failed).
  void set_healthy(bool healthy) { healthy_ = healthy; }
  bool is_healthy() const { return healthy_; }

  // Releases what the executor threads keep alive between jobs (see the header comment).
  void end_of_operation() { storage_manager_->release_executor_results(); }

  // The chunk keys of a token sequence (no mask), e.g. to remove or fault single chunks.
  std::vector<ChunkInfo> chunk_infos(std::span<const TokenId> tokens,
                                     const RequestConfigs* request_configs);
  const std::list<std::pair<std::string, PinMap>>& lookup_pins() const { return lookup_pins_; }
  const PinMap* lookup_pins_of(const std::string& lookup_id) const;

  const LMCacheEngineConfig& config() const { return config_; }
  const LMCacheMetadata& metadata() const { return metadata_; }
  StorageManager& storage_manager() { return *storage_manager_; }
  const StorageManager& storage_manager() const { return *storage_manager_; }
  ChunkedTokenDatabase& token_database() { return *token_database_; }
  int num_layers() const { return metadata_.num_layers; }
  bool use_layerwise() const { return config_.use_layerwise; }
  bool save_only_first_rank() const { return save_only_first_rank_; }
  bool is_passive() const { return save_only_first_rank_ && !metadata_.is_first_rank(); }
  // The format of stored objects (nullopt: the CPU tier's default).
  std::optional<MemoryFormat> fmt() const { return fmt_; }
  // The logical content a chunk (or layer) object must hold: what the GPU connector copies.
  uint64_t expected_content(const CacheEngineKey& key) const;

 private:
  friend class StoreLayerTask;
  friend class RetrieveLayerTask;
  struct ProcessedChunk {
    CacheEngineKey key;
    PyRef obj;
    int64_t start;
    int64_t end;
    std::string location;
    bool unpin = false;  // async, fixed: release the lookup's pin with the reference
  };
  std::vector<ChunkSpan> spans_of(const TokenInput& input, int64_t num_masked);
  void store_impl(const StoreRequest& req, StoreResult& out);
  std::vector<ProcessedChunk> process_tokens_internal(const RetrieveRequest& req,
                                                      std::vector<char>& ret_mask,
                                                      RetrieveResult& out);
  std::vector<ProcessedChunk> async_process_tokens_internal(const RetrieveRequest& req,
                                                            std::vector<char>& ret_mask);
  int64_t lookup_impl(const LookupRequest& req);
  PinMap& pins_for(const std::string& lookup_id);  // defaultdict access

  LMCacheEngineConfig config_;
  LMCacheMetadata metadata_;
  bool save_only_first_rank_;
  std::optional<MemoryFormat> fmt_;
  std::shared_ptr<KeyScopeRegistry> registry_;
  std::unique_ptr<ChunkedTokenDatabase> token_database_;
  std::unique_ptr<StorageManager> storage_manager_;
  std::list<std::pair<std::string, PinMap>> lookup_pins_;
  std::unordered_map<std::string, std::list<std::pair<std::string, PinMap>>::iterator>
      lookup_pin_index_;
  bool healthy_ = true;
};

// Runs of True in a mask.
std::vector<TokenRange> mask_runs(const std::vector<char>& mask);

}  // namespace kvtwin::model::lmcache
