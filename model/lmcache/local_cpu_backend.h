// LocalCPUBackend (storage_backend/local_cpu_backend.py): the hot cache in the pinned CPU pool,
// and the allocator every other tier borrows CPU buffers from.
//
//   hot_cache   key -> memory object, in the policy's dict order (LRU/MRU/FIFO/LFU: insertion
//               order, LRU/MRU reorder on hits). The entry holds a Python reference and one
//               LMCache reference (ref_count_up at insert).
//   contains(k, pin)   presence; with pin the object is pinned and k is remembered for touch_cache
//   touch_cache()      update_on_hit for the remembered keys in REVERSE order: after a pinned
//                      lookup the first (prefix) chunk is the most recent, the deepest the least
//   submit_put_task    a key already present is left alone (no recency change, no reference);
//                      otherwise ref_count_up, append, update_on_put
//   get_blocking       ref_count_up, no recency change
//   remove(k, force)   pop, ref_count_down; the policy hears of it only when force
//   allocate(...)      try the pool; on failure evict ONE policy candidate (remove with
//                      force=false) and retry, until it fits or nothing is evictable; then give up
//                      (busy_loop=false, stores) or sleep 0.1 s and try again (busy_loop=true,
//                      loads), until something frees memory. The model sleeps through the
//                      caller's BusyLoopSleeper; with none, or when it says no wait can end, it
//                      throws kWouldBusyWait. With the hot cache off there is never a candidate.
//   batched_allocate   the layerwise version: evicts all layers of a candidate chunk at once and
//                      frees them with batched_free
//                      (Quirks::layerwise_eviction_ignores_other_layers)
//   clear()            removes (force) every evictable entry; returns their token count
//
// Eviction walks are named (CanEvictFn's token) by their predicate and by a count that grows
// whenever an entry may have started to pass it: an object became evictable (the allocator counts
// those) or an entry was inserted evictable. The layerwise fix's predicate also reads the other
// layers' entries; an inserted layer passes only if evictable, and a removed one makes its chunk
// fail. So a dict-order walk may skip entries that failed before (KeyOrderedDict's failing run).
//
// With local_cpu = false (use_hot false) nothing is ever inserted: the pool only stages I/O.
//
// Invariant: every hot-cache entry is a valid object with ref_count >= 1 (its own reference).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "model/lmcache/cache_policy.h"
#include "model/lmcache/key_ordered_dict.h"
#include "model/lmcache/memory_allocator.h"
#include "model/lmcache/storage_backend.h"

namespace kvtwin::model::lmcache {

// Upstream's busy loop sleeps this long between two tries (local_cpu_backend.py's time_to_wait).
inline constexpr double kBusyLoopSleepSecs = 0.1;

// The clock of a thread that busy-waits for CPU memory. sleep(seconds) lets `seconds` of the
// caller's time pass, in which other work (writes finishing) may free memory, and returns true;
// it returns false, without sleeping, when the caller models nothing that could end the wait
// (no write in flight): the model then throws kWouldBusyWait where upstream would go on waiting
// (for ever when references hold the pool; until its PinMonitor force-unpins, after the pin
// timeout, when pins do).
class BusyLoopSleeper {
 public:
  virtual ~BusyLoopSleeper() = default;
  virtual bool sleep(double seconds) = 0;
};

class LocalCPUBackend final : public StorageBackendInterface {
 public:
  LocalCPUBackend(TensorMemoryAllocator* allocator, CachePolicyKind policy, bool use_hot,
                  bool layerwise, const Quirks& quirks, StorageEvents* events, int worker_id);

  std::string_view name() const override { return "LocalCPUBackend"; }
  bool contains(const CacheEngineKey& key, bool pin) override;
  bool exists_in_put_tasks(const CacheEngineKey&) const override { return false; }
  void batched_submit_put_task(std::span<const CacheEngineKey> keys,
                               std::span<const PyRef> objs) override;
  void submit_put_task(const CacheEngineKey& key, const PyRef& obj);
  PyRef get_blocking(const CacheEngineKey& key) override;
  std::vector<PyRef> batched_get_non_blocking(std::span<const CacheEngineKey> keys) override;
  bool pin(const CacheEngineKey& key) override;
  bool unpin(const CacheEngineKey& key) override;
  bool remove(const CacheEngineKey& key, bool force) override;
  void touch_cache() override;
  bool has_clear() const override { return true; }
  int64_t clear() override;
  LocalCPUBackend* get_allocator_backend() override { return this; }

  // An empty PyRef when the allocation gave up. fmt nullopt: the backend's default (KV_T2D when
  // layerwise, else KV_2LTD). A busy loop sleeps through `sleeper`; without one, or when it
  // answers false, throws UpstreamError(kWouldBusyWait) where upstream would spin.
  PyRef allocate(const Shape& shape, KvDtype dtype, std::optional<MemoryFormat> fmt,
                 bool eviction = true, bool busy_loop = true, BusyLoopSleeper* sleeper = nullptr);
  std::vector<PyRef> batched_allocate(const Shape& shape, KvDtype dtype, int batch_size,
                                      std::optional<MemoryFormat> fmt, bool eviction = true,
                                      bool busy_loop = true);

  bool use_hot() const { return use_hot_; }
  // The health monitor's "local_cpu" fallback switches the hot cache on and back (upstream sets
  // the attribute).
  void set_use_hot(bool use_hot) { use_hot_ = use_hot; }
  TensorMemoryAllocator& allocator() { return *allocator_; }
  const TensorMemoryAllocator& allocator() const { return *allocator_; }
  const CachePolicy& cache_policy() const { return *policy_; }
  // Hot-cache entries in dict order.
  std::vector<std::pair<CacheEngineKey, MemObjId>> entries() const;
  size_t size() const { return hot_cache_.size(); }
  // The object of a key, or nullptr.
  const MemoryObj* peek(const CacheEngineKey& key) const;
  // A new Python reference to the object of a key (empty when absent).
  PyRef entry(const CacheEngineKey& key) const;
  // Sum of the entries' physical sizes.
  uint64_t resident_bytes() const;
  void check_invariants() const;

 private:
  MemoryFormat default_fmt(std::optional<MemoryFormat> fmt) const;
  bool entry_can_evict(uint32_t slot) const;
  // The token of a walk under `predicate` (1: entry_can_evict; 2 + n: the layerwise fix's
  // predicate over n layers) in the current state.
  uint64_t scan_token(uint32_t predicate) const;
  bool layer_group_can_evict(const CacheEngineKey& key, int num_layers) const;
  uint32_t add_entry(const CacheEngineKey& key, const PyRef& obj);
  PyRef pop_entry(const CacheEngineKey& key);

  TensorMemoryAllocator* allocator_;
  std::unique_ptr<CachePolicy> policy_;
  bool use_hot_;
  bool layerwise_;
  Quirks quirks_;
  StorageEvents* events_;
  int worker_id_;
  KeyOrderedDict hot_cache_;                // key -> slot in entries_
  std::vector<PyRef> entries_;              // the hot cache's Python references
  std::vector<CacheEngineKey> entry_keys_;  // the key of each slot of entries_
  std::vector<uint32_t> free_entries_;
  std::vector<CacheEngineKey> keys_in_request_;
  uint64_t evictable_inserts_ = 0;  // entries inserted evictable
};

}  // namespace kvtwin::model::lmcache
