// StorageBackendInterface (storage_backend/abstract_backend.py): what the StorageManager asks of a
// tier, plus the event log the tiers write into.
//
// Tiers are logic only: a put "submits" a write that completes later through an explicit call
// (see storage_manager.h), a get returns memory objects in the CPU pool, a contains answers from
// the tier's index. Names are the upstream class names, which the golden logs and lookup pins use:
// "LocalCPUBackend", "LocalDiskBackend", "RemoteBackend".
//
// Errors: a tier may throw UpstreamError where upstream raises (upstream_error.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "model/lmcache/cache_engine_key.h"
#include "model/lmcache/memory_obj.h"

namespace kvtwin::model::lmcache {

// The first job of `jobs` whose id is >= `id`. REQUIRES: jobs (structs with an `id`) are in
// increasing id order — true of the backends' write queues, whose ids grow as jobs are submitted
// and whose completions only remove.
template <typename Jobs>
auto first_job_at_or_after(Jobs& jobs, uint64_t id) {
  return std::lower_bound(jobs.begin(), jobs.end(), id,
                          [](const auto& job, uint64_t v) { return job.id < v; });
}

class LocalCPUBackend;

enum class Tier { kCpu, kDisk, kRemote };

// What happened inside the tiers, in order; the owner drains it (golden "removed" and "writes",
// the simulator's eviction and I/O accounting).
struct StorageEvents {
  struct Removed {
    Tier tier;
    CacheEngineKey key;
    int worker_id;
  };
  std::vector<Removed> removed;  // keys popped from the CPU hot cache / the disk index
  int disk_writes_submitted = 0;
  int remote_writes_submitted = 0;  // one per batched put call
  // Keys a completed remote write could not serialize (Quirks::remote_metadata_requires_4d_shapes,
  // a dtype without a remote code): nothing was sent and the key was not written.
  uint64_t remote_write_errors = 0;

  void clear() {
    removed.clear();
    disk_writes_submitted = 0;
    remote_writes_submitted = 0;
    remote_write_errors = 0;
  }
};

class StorageBackendInterface {
 public:
  virtual ~StorageBackendInterface() = default;
  virtual std::string_view name() const = 0;

  virtual bool contains(const CacheEngineKey& key, bool pin) = 0;
  virtual bool exists_in_put_tasks(const CacheEngineKey& key) const = 0;
  virtual void batched_submit_put_task(std::span<const CacheEngineKey> keys,
                                       std::span<const PyRef> objs) = 0;
  virtual PyRef get_blocking(const CacheEngineKey& key) = 0;
  // Default: get_blocking per key.
  virtual std::vector<PyRef> batched_get_blocking(std::span<const CacheEngineKey> keys);
  // The layerwise path (one call per layer, run to completion at once in the model).
  virtual std::vector<PyRef> batched_get_non_blocking(std::span<const CacheEngineKey> keys) = 0;
  virtual bool pin(const CacheEngineKey& key) = 0;
  virtual bool unpin(const CacheEngineKey& key) = 0;
  virtual bool remove(const CacheEngineKey& key, bool force) = 0;
  // Sum of remove() over the keys.
  int batched_remove(std::span<const CacheEngineKey> keys, bool force);
  // Leading keys present (prefix match), pinning each when asked. Default: contains() per key.
  virtual int batched_contains(std::span<const CacheEngineKey> keys, bool pin);
  virtual void touch_cache() {}
  // Only LocalCPUBackend has clear(); StorageManager.clear skips the others.
  virtual bool has_clear() const { return false; }
  virtual int64_t clear() { return 0; }
  virtual LocalCPUBackend* get_allocator_backend() = 0;
};

}  // namespace kvtwin::model::lmcache

namespace kvtwin::model::lmcache {

// A write submitted to a tier that has not completed yet (disk: one chunk; remote: one batched put
// call). Ids are unique per StorageManager and increase with submission.
struct PendingWrite {
  uint64_t id = 0;
  Tier tier = Tier::kDisk;
  std::vector<CacheEngineKey> keys;  // disk: the one chunk
  uint64_t bytes = 0;                // bytes the write moves (len of the objects' bytes)
  uint64_t phy_bytes = 0;            // physical (4 KiB aligned) size of the objects
};

}  // namespace kvtwin::model::lmcache
