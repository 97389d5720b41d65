// LocalDiskBackend (storage_backend/local_disk_backend.py): the disk tier as logic — an index of
// written chunks, a reservation counter, the in-flight list, and explicit write completions.
//
//   submit_put_task(k, obj)   skip if k's write is in flight; register k in flight; evict policy
//                             candidates (pin_count <= 0) until current + phy_size <= capacity —
//                             each: current -= size, pop, usage -= size, delete the file — or give
//                             up (no candidate: the key stays in flight, Quirks); reserve
//                             current += phy_size; update_on_put; ref_count_up; queue the write.
//                             The key is NOT visible to contains() until the write completes.
//   complete_write(job)       the writer: usage += len(bytes), write the file, ref_count_down,
//                             insert into the index (or update_on_hit if present), leave the
//                             in-flight list. Called by the owner at a time of its choosing (the
//                             golden harness: at quiesce, in submission order; upstream: 4 writer
//                             threads in any order).
//   get_blocking(k)           update_on_hit (disk recency changes on reads, not on CPU-served
//                             lookups), allocate a CPU buffer (busy_loop: sleeps through the
//                             busy-loop sleeper, if set, until memory frees), read; a missing file
//                             (gone while it slept, say) drops the entry and raises KeyError
//                             (Quirks)
//   contains(k, pin)          index lookup; pin increments the entry's pin_count (never clamped:
//                             an over-unpin goes negative, which still counts as unpinned)
//   remove(k, force)          pop, usage -= size, delete the file (FileNotFoundError if it is
//   gone);
//                             the reservation stays (Quirks::disk_remove_keeps_reservation)
//
// Accounting (Quirks on): current_cache_size = sum over reservations still held, where a re-put of
// a resident key adds a second reservation that eviction never returns; usage counts the bytes of
// completed writes. With every disk quirk fixed, current_cache_size = sum of phy_size over index
// entries and in-flight writes, and usage = sum of phy_size over index entries (tests pin both).
//
// Eviction walks are named (CanEvictFn's token) by the number of unpins so far: only an unpin
// makes an index entry evictable again, new entries arrive unpinned at the dict's newest end.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/lmcache/cache_policy.h"
#include "model/lmcache/disk_directory.h"
#include "model/lmcache/key_ordered_dict.h"
#include "model/lmcache/local_cpu_backend.h"
#include "model/lmcache/storage_backend.h"

namespace kvtwin::model::lmcache {

// Upstream's metadata also holds the file path; here it is always key.disk_file_name(), so it is
// derived where needed instead of stored (a disk tier can hold millions of entries).
struct DiskCacheMetadata {
  uint64_t size = 0;  // physical size of the object written
  Shape shape;
  KvDtype dtype = KvDtype::kHalf;
  MemoryFormat fmt = MemoryFormat::kUndefined;
  int32_t pin_count = 0;
  bool can_evict() const { return pin_count <= 0; }
};

class LocalDiskBackend final : public StorageBackendInterface {
 public:
  LocalDiskBackend(uint64_t max_cache_size, CachePolicyKind policy, LocalCPUBackend* local_cpu,
                   std::shared_ptr<DiskDirectory> directory, const Quirks& quirks,
                   StorageEvents* events, uint64_t* next_job_id, int worker_id);

  std::string_view name() const override { return "LocalDiskBackend"; }
  bool contains(const CacheEngineKey& key, bool pin) override;
  bool exists_in_put_tasks(const CacheEngineKey& key) const override;
  void batched_submit_put_task(std::span<const CacheEngineKey> keys,
                               std::span<const PyRef> objs) override;
  void submit_put_task(const CacheEngineKey& key, const PyRef& obj);
  PyRef get_blocking(const CacheEngineKey& key) override;
  std::vector<PyRef> batched_get_non_blocking(std::span<const CacheEngineKey> keys) override;
  // The clock get_blocking's busy loop sleeps on (upstream: the engine thread's time.sleep);
  // null (the default): a wait throws kWouldBusyWait. The non-blocking get does not use it:
  // upstream's sleeps there on the storage manager's event loop (holding the disk lock), which
  // blocks every Redis job and the start of queued disk writes meanwhile; not modelled.
  void set_busy_loop_sleeper(BusyLoopSleeper* sleeper) { sleeper_ = sleeper; }
  bool pin(const CacheEngineKey& key) override;
  bool unpin(const CacheEngineKey& key) override;
  bool remove(const CacheEngineKey& key, bool force) override;
  void touch_cache() override;
  LocalCPUBackend* get_allocator_backend() override { return local_cpu_; }

  // The async prefetch (batched_get_non_blocking of an async lookup) in two halves, so that the
  // owner charges the read's time between them (async_prefetch.h):
  //   prefetch_allocate(k)   a CPU buffer for k's chunk (evicting, never waiting: an empty PyRef
  //                          when nothing is evictable); then k's entry is pinned and its recency
  //                          updated (a prefetch counts as a hit). Raises AssertionError when k is
  //                          not on disk (upstream asserts).
  //   prefetch_read(k, obj)  reads the file into obj and unpins k's entry once; false when the file
  //                          is missing (Quirks::disk_missing_file_raises_key_error decides
  //                          whether the entry's bytes are released).
  PyRef prefetch_allocate(const CacheEngineKey& key, std::string* path);
  bool prefetch_read(const CacheEngineKey& key, const std::string& path, MemoryObj& dst);

  // Queued writes with id >= first_id, in id order; `with_keys` false leaves PendingWrite::keys
  // empty (a scheduler that needs only ids and sizes allocates nothing per write).
  std::vector<PendingWrite> pending_writes(uint64_t first_id = 0, bool with_keys = true) const;
  // Completes one queued write; false if `id` is not pending here.
  bool complete_write(uint64_t id);
  size_t num_pending_writes() const { return pending_.size(); }
  std::vector<MemObjId> pending_objects() const {
    std::vector<MemObjId> out;
    for (const WriteJob& j : pending_) out.push_back(j.obj.id());
    return out;
  }

  // Observation.
  uint64_t max_cache_size() const { return max_cache_size_; }
  int64_t current_cache_size() const { return current_cache_size_; }  // reserved bytes
  int64_t usage() const { return usage_; }                            // written bytes
  std::vector<std::pair<CacheEngineKey, DiskCacheMetadata>> entries() const;
  std::vector<CacheEngineKey> in_flight() const { return put_tasks_.keys(); }
  const CachePolicy& cache_policy() const { return *policy_; }
  const DiskDirectory& directory() const { return *directory_; }
  size_t size() const { return dict_.size(); }
  // Sum of the entries' sizes / of the in-flight writes' physical sizes. With every disk quirk
  // fixed their sum is current_cache_size(); with them, current_cache_size() can only exceed it
  // (reservations that no entry or write holds any more).
  uint64_t resident_bytes() const;
  uint64_t in_flight_bytes() const;

 private:
  struct WriteJob {
    uint64_t id;
    CacheEngineKey key;
    PyRef obj;
  };
  const DiskCacheMetadata& meta(const CacheEngineKey& key) const;
  DiskCacheMetadata* find_meta(const CacheEngineKey& key);
  std::optional<DiskCacheMetadata> pop_entry(const CacheEngineKey& key);
  void insert_key(const CacheEngineKey& key, const MemoryObj& obj);
  void remove_put_task(const CacheEngineKey& key);
  // read_file: false (and the index entry dropped) when the file is missing.
  bool read_file(const CacheEngineKey& key, const std::string& path, MemoryObj& dst);
  void release_missing_entry(const CacheEngineKey& key);

  uint64_t max_cache_size_;
  std::unique_ptr<CachePolicy> policy_;
  LocalCPUBackend* local_cpu_;
  std::shared_ptr<DiskDirectory> directory_;
  Quirks quirks_;
  StorageEvents* events_;
  uint64_t* next_job_id_;
  int worker_id_;
  BusyLoopSleeper* sleeper_ = nullptr;

  KeyOrderedDict dict_;  // key -> slot in metas_
  std::vector<DiskCacheMetadata> metas_;
  std::vector<uint32_t> free_metas_;
  // The in-flight list (LocalDiskWorker.put_tasks: no duplicates, submission order) as an ordered
  // dict (values unused), so that membership and removal from its middle are O(1).
  KeyOrderedDict put_tasks_;
  std::deque<WriteJob> pending_;  // in id order (first_job_at_or_after)
  std::vector<CacheEngineKey> keys_in_request_;
  int64_t current_cache_size_ = 0;
  int64_t usage_ = 0;
  uint64_t unpins_ = 0;  // pin_count decrements (the eviction walks' token)
};

}  // namespace kvtwin::model::lmcache
