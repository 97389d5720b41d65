// RemoteBackend + RedisConnector (storage_backend/remote_backend.py, connector/redis_connector.py,
// naive serde) as logic over a shared RemoteKvStore.
//
//   contains(k)        EXISTS "<k>metadata" (a key whose kv_bytes is gone still counts; README
//                      §7.10); pin is ignored. batched_contains: one EXISTS per key, stop at the
//                      first miss.
//   put                batched_submit_put_task: ref +1 per object (the serializer's reference),
//                      one queued job per call; no de-duplication and no in-flight check. The job
//                      completes through complete_write(): per key, serialize the metadata, SET
//                      kv_bytes, SET metadata; then ref -1 per object. A key whose metadata cannot
//                      be serialized (a shape that is not 4-D under
//                      Quirks::remote_metadata_requires_4d_shapes, i.e. every layerwise object; a
//                      dtype without a code) fails before its SETs: nothing is sent, the key is
//                      not written, StorageEvents::remote_write_errors counts it.
//   metadata           [length, fmt, dtype code, d0, d1, d2, d3] as int32; with the quirk fixed a
//                      shape of rank < 4 is padded with trailing zeros, stripped again on read.
//   get                per key, in key order: GET metadata (missing -> None); allocate a CPU buffer
//                      (busy_loop: may wait forever); GET kv_bytes (missing -> DEL metadata and
//                      None; the buffer is dropped); a None does not stop the remaining keys.
//                      The non-blocking get (layerwise loads) returns only the objects it read:
//                      after a miss the caller zips the next chunk's object with the missing
//                      chunk's key (Quirks::remote_prefetch_drops_missing_chunks; the fix keeps
//                      the leading run and releases the rest).
//   failed reads       each get_blocking that returns None, and each batched_get_blocking with a
//                      None among its results (once per call), adds one to the interval count
//                      that the health monitor reads and clears (RemoteBackendHealthCheck:
//                      threshold reached -> LMCache unhealthy). The non-blocking gets of
//                      layerwise and async loads do not count.
//   remove             not implemented by the Redis connector: returns false (counts 0)
//   pin / unpin        no-ops returning true; there is no clear() and no LMCache-side eviction.
//
// MLA with remote_enable_mla_worker_id_as0 (default on for MLA) on a rank other than 0: puts are
// skipped and reads use worker id 0's keys.
//
// The executor's last result: LMCache's connector executor keeps the result of its last job alive
// until its next job finishes, so the object of the last remote get outlives the call that made
// it (it is freed, if leaked, when the next remote job completes or at the end of the operation:
// release_executor_results()).
#pragma once

#include <deque>
#include <memory>
#include <utility>
#include <vector>

#include "model/lmcache/config.h"
#include "model/lmcache/local_cpu_backend.h"
#include "model/lmcache/metadata.h"
#include "model/lmcache/quirks.h"
#include "model/lmcache/remote_kv_store.h"
#include "model/lmcache/storage_backend.h"

namespace kvtwin::model::lmcache {

// Whether remote_enable_mla_worker_id_as0 applies to this engine's group (MLA, more than one rank,
// on unless configured off): its ranks other than 0 then skip puts and read rank 0's keys.
bool mla_worker_id_as0(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata);

class RemoteBackend final : public StorageBackendInterface {
 public:
  RemoteBackend(LocalCPUBackend* local_cpu, std::shared_ptr<RemoteKvStore> store,
                KeyScopeRegistry* registry, bool mla_worker_id_as0_mode, StorageEvents* events,
                uint64_t* next_job_id, const Quirks& quirks);

  std::string_view name() const override { return "RemoteBackend"; }
  bool contains(const CacheEngineKey& key, bool pin) override;
  // EXISTS round trips so far (each contains(): one blocking call to the server).
  uint64_t exists_calls() const { return exists_calls_; }
  // Failed blocking reads since the last call (RemoteBackend's
  // get_and_clear_interval_get_blocking_failed_count), and since the start.
  uint64_t get_and_clear_interval_get_blocking_failed_count() {
    return std::exchange(interval_get_blocking_failed_count_, 0);
  }
  uint64_t get_blocking_failed_total() const { return get_blocking_failed_total_; }
  uint64_t interval_get_blocking_failed_count() const {
    return interval_get_blocking_failed_count_;
  }
  // A blocking read outside this model failed: the health check's own test read (its put and
  // get of a test chunk while recovering), which the simulator draws.
  void count_failed_get_blocking(uint64_t n = 1) {
    interval_get_blocking_failed_count_ += n;
    get_blocking_failed_total_ += n;
  }
  bool exists_in_put_tasks(const CacheEngineKey&) const override { return false; }
  void batched_submit_put_task(std::span<const CacheEngineKey> keys,
                               std::span<const PyRef> objs) override;
  PyRef get_blocking(const CacheEngineKey& key) override;
  std::vector<PyRef> batched_get_blocking(std::span<const CacheEngineKey> keys) override;
  std::vector<PyRef> batched_get_non_blocking(std::span<const CacheEngineKey> keys) override;
  bool pin(const CacheEngineKey&) override { return true; }
  bool unpin(const CacheEngineKey&) override { return true; }
  bool remove(const CacheEngineKey&, bool) override { return false; }
  LocalCPUBackend* get_allocator_backend() override { return local_cpu_; }

  // RedisConnector._get of an async prefetch in two halves (async_prefetch.h): GET metadata and
  // allocate a CPU buffer (nullopt: no metadata; an empty PyRef: nothing evictable, never waits),
  // then GET kv_bytes into the buffer (false: the bytes are gone, the metadata is deleted).
  std::optional<PyRef> prefetch_allocate(const CacheEngineKey& key);
  bool prefetch_fill(const CacheEngineKey& key, MemoryObj& dst);

  // Queued writes with id >= first_id, in queue order (with_keys: as LocalDiskBackend's); bytes
  // count only the objects the writer can serialize (what it will send).
  std::vector<PendingWrite> pending_writes(uint64_t first_id = 0, bool with_keys = true) const;
  bool complete_write(uint64_t id);
  size_t num_pending_writes() const { return pending_.size(); }
  std::vector<MemObjId> pending_objects() const {
    std::vector<MemObjId> out;
    for (const PutJob& j : pending_) {
      for (const PyRef& o : j.objs) out.push_back(o.id());
    }
    return out;
  }
  // The harness's no-op executor job at the end of an operation.
  void release_executor_results() { last_result_.reset(); }

  static RemoteMetadataBytes serialize_metadata(const MemoryObj& obj);

 private:
  struct PutJob {
    uint64_t id;
    std::vector<CacheEngineKey> keys;
    std::vector<PyRef> objs;
  };
  CacheEngineKey remote_key(const CacheEngineKey& key) const;
  PyRef get_one(const CacheEngineKey& key);  // RedisConnector._get
  // RemoteMetadata.serialize would succeed: the writer sends this object.
  bool serializable(const MemoryObj& obj) const;
  Shape shape_of(const RemoteMetadataBytes& m) const;  // the dims, padding stripped when fixed

  LocalCPUBackend* local_cpu_;
  std::shared_ptr<RemoteKvStore> store_;
  KeyScopeRegistry* registry_;
  bool mla_worker_id_as0_mode_;
  StorageEvents* events_;
  uint64_t* next_job_id_;
  uint64_t exists_calls_ = 0;
  uint64_t interval_get_blocking_failed_count_ = 0;
  uint64_t get_blocking_failed_total_ = 0;
  Quirks quirks_;
  std::deque<PutJob> pending_;  // in id order (first_job_at_or_after)
  PyRef last_result_;
};

}  // namespace kvtwin::model::lmcache
