// StorageManager (storage_backend/storage_manager.py): the tiers in search order and the
// operations that span them.
//
//   tiers (creation = search order): LocalCPUBackend (always; the allocator of every tier, and the
//   hot cache when local_cpu) -> LocalDiskBackend (local_disk and capacity > 0) -> RemoteBackend.
//
//   batched_put(keys, objs)   write-through: every tier (not bypassed, matching `location`) gets
//                             batched_submit_put_task; then each object loses the allocation's
//                             reference (ref_count_down). An exception in a tier skips that step.
//   batched_get(keys, loc)    the first active tier (matching loc) answers with its list — a list
//                             with Nones still wins; a non-CPU answer without None is written back
//                             into the CPU hot cache
//   batched_contains(keys)    tiered prefix match: each tier in order counts its leading hits
//                             (pinning them when asked) among the keys not yet matched; a tier with
//                             no hit is skipped, so a prefix may be split across tiers
//   get_block_mapping         the same without pins, as (tier -> chunk infos)
//   freeze: gets and lookups see only the CPU tier (the engine skips stores)
//   bypass: a tier left out of puts, gets and lookups
//   async_lookup_and_prefetch  (enable_async_loading) see async_prefetch.h; the manager owns the
//                             prefetcher, whose events hold prefetched objects until a retrieve
//                             or a cleanup takes them
//
// Asynchronous writes are explicit: a put queues disk writes (one per chunk) and remote writes (one
// per batched call) that complete only when the owner calls complete_write(id) or
// complete_all_writes() (the golden harness's quiesce: disk in submission order, then remote).
// The simulator completes them at simulated times.
//
// End of an operation: release_executor_results() drops what LMCache's executor threads keep alive
// between jobs (the golden harness runs a no-op job after every op). Call it after each engine
// call.
//
// Ownership: the manager owns the CPU pool (TensorMemoryAllocator) and the tiers; the DiskDirectory
// and RemoteKvStore are shared with other ranks.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/lmcache/async_prefetch.h"
#include "model/lmcache/config.h"
#include "model/lmcache/disk_directory.h"
#include "model/lmcache/local_cpu_backend.h"
#include "model/lmcache/local_disk_backend.h"
#include "model/lmcache/memory_allocator.h"
#include "model/lmcache/metadata.h"
#include "model/lmcache/remote_backend.h"
#include "model/lmcache/remote_kv_store.h"

namespace kvtwin::model::lmcache {

struct ChunkInfo {
  CacheEngineKey key;
  int64_t start = 0;
  int64_t end = 0;
};

// (tier name, keys) in tier order; LMCache's block_mapping dict.
using BlockMapping = std::vector<std::pair<std::string, std::vector<CacheEngineKey>>>;
using ChunkMapping = std::vector<std::pair<std::string, std::vector<ChunkInfo>>>;

struct SharedStorage {
  std::shared_ptr<DiskDirectory> disk = std::make_shared<DiskDirectory>();
  std::shared_ptr<RemoteKvStore> remote = std::make_shared<RemoteKvStore>();
};

class StorageManager {
 public:
  StorageManager(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata,
                 const SharedStorage& shared, KeyScopeRegistry* registry);
  ~StorageManager();
  StorageManager(const StorageManager&) = delete;
  StorageManager& operator=(const StorageManager&) = delete;

  PyRef allocate(const Shape& shape, KvDtype dtype, std::optional<MemoryFormat> fmt,
                 bool eviction = true, bool busy_loop = true);
  std::vector<PyRef> batched_allocate(const Shape& shape, KvDtype dtype, int batch_size,
                                      std::optional<MemoryFormat> fmt, bool eviction = true,
                                      bool busy_loop = true);
  void batched_put(std::span<const CacheEngineKey> keys, std::span<const PyRef> objs,
                   std::string_view location = {});
  // The tier that answered (empty when none did) and its list (Nones as empty PyRefs).
  std::pair<std::string, std::vector<PyRef>> batched_get(std::span<const CacheEngineKey> keys,
                                                         std::string_view location = {});
  // One layer of layerwise_batched_get from `location` (default the CPU tier).
  std::vector<PyRef> layerwise_get_layer(std::span<const CacheEngineKey> keys,
                                         std::string_view location);

  // The first tier holding the key, or "".
  std::string contains(const CacheEngineKey& key, const std::vector<std::string>* search_range,
                       bool pin);
  // (hit chunks, block mapping).
  std::pair<int, BlockMapping> batched_contains(std::span<const CacheEngineKey> keys,
                                                const std::vector<std::string>* search_range,
                                                bool pin);
  ChunkMapping get_block_mapping(std::span<const ChunkInfo> chunk_infos);
  void touch_cache();
  int remove(const CacheEngineKey& key, const std::vector<std::string>* locations);
  void batched_unpin(std::span<const CacheEngineKey> keys,
                     const std::vector<std::string>* locations);
  int64_t clear(const std::vector<std::string>* locations);
  bool memcheck() const { return allocator_->memcheck(); }

  // The tiers a lookup searches, in order (get_active_storage_backends without a location).
  std::vector<StorageBackendInterface*> active_backends(
      const std::vector<std::string>* search_range) const {
    return active({}, search_range);
  }
  // Null unless enable_async_loading.
  AsyncPrefetcher* async_prefetcher() { return prefetcher_.get(); }
  const AsyncPrefetcher* async_prefetcher() const { return prefetcher_.get(); }

  void set_freeze(bool enabled) { freeze_ = enabled; }
  bool is_frozen() const { return freeze_; }
  void set_backend_bypass(const std::string& name, bool bypassed);
  bool is_backend_bypassed(const std::string& name) const { return bypassed_.count(name) != 0; }

  // Asynchronous writes.
  // The queued writes with id >= first_id (all by default), by id. Job ids are handed out in
  // increasing order, so a caller that remembers the last id it saw lists only new writes.
  // `with_keys` false leaves PendingWrite::keys empty (no allocation per write).
  std::vector<PendingWrite> pending_writes(uint64_t first_id = 0, bool with_keys = true) const;
  bool complete_write(uint64_t id);
  // The id the next queued job will get: every write queued so far has a smaller one.
  uint64_t next_write_id() const { return next_job_id_; }
  struct Completed {
    int disk = 0;
    int remote = 0;
  };
  Completed complete_all_writes();
  void release_executor_results();
  // Objects the tiers hold (hot cache entries, queued writes, prefetch events), sorted. After an
  // operation (and release_executor_results) every block still allocated belongs to one of them:
  // LMCache's leaks are reclaimed when their last Python reference goes.
  std::vector<MemObjId> held_objects() const;

  // Tiers.
  LocalCPUBackend& local_cpu() { return *local_cpu_; }
  const LocalCPUBackend& local_cpu() const { return *local_cpu_; }
  LocalDiskBackend* local_disk() { return local_disk_; }
  const LocalDiskBackend* local_disk() const { return local_disk_; }
  RemoteBackend* remote() { return remote_; }
  const RemoteBackend* remote() const { return remote_; }
  StorageBackendInterface* backend(std::string_view name);
  std::vector<std::string> backend_names() const;
  TensorMemoryAllocator& allocator() { return *allocator_; }
  const TensorMemoryAllocator& allocator() const { return *allocator_; }
  StorageEvents& events() { return events_; }
  const StorageEvents& events() const { return events_; }
  const SharedStorage& shared() const { return shared_; }

 private:
  // get_active_storage_backends(location, search_range).
  std::vector<StorageBackendInterface*> active(std::string_view location,
                                               const std::vector<std::string>* search_range) const;

  std::unique_ptr<TensorMemoryAllocator> allocator_;  // destroyed last
  StorageEvents events_;
  uint64_t next_job_id_ = 1;
  SharedStorage shared_;
  std::vector<std::unique_ptr<StorageBackendInterface>> backends_;  // search order
  LocalCPUBackend* local_cpu_ = nullptr;
  LocalDiskBackend* local_disk_ = nullptr;
  RemoteBackend* remote_ = nullptr;
  bool freeze_ = false;
  std::set<std::string> bypassed_;
  std::unique_ptr<AsyncPrefetcher> prefetcher_;  // destroyed first (holds objects)
};

}  // namespace kvtwin::model::lmcache
