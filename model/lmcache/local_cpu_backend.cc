#include "model/lmcache/local_cpu_backend.h"

#include <unordered_map>

#include "model/check.h"
#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

LocalCPUBackend::LocalCPUBackend(TensorMemoryAllocator* allocator, CachePolicyKind policy,
                                 bool use_hot, bool layerwise, const Quirks& quirks,
                                 StorageEvents* events, int worker_id)
    : allocator_(allocator),
      policy_(make_cache_policy(policy, quirks)),
      use_hot_(use_hot),
      layerwise_(layerwise),
      quirks_(quirks),
      events_(events),
      worker_id_(worker_id) {}

uint32_t LocalCPUBackend::add_entry(const CacheEngineKey& key, const PyRef& obj) {
  if (!free_entries_.empty()) {
    uint32_t slot = free_entries_.back();
    free_entries_.pop_back();
    entries_[slot] = obj;
    entry_keys_[slot] = key;
    return slot;
  }
  entries_.push_back(obj);
  entry_keys_.push_back(key);
  return static_cast<uint32_t>(entries_.size() - 1);
}

PyRef LocalCPUBackend::pop_entry(const CacheEngineKey& key) {
  std::optional<uint32_t> slot = hot_cache_.pop(key);
  if (!slot) return PyRef();
  policy_->on_tier_erase(key);
  events_->removed.push_back({Tier::kCpu, key, worker_id_});
  PyRef obj = std::move(entries_[*slot]);
  free_entries_.push_back(*slot);
  return obj;
}

bool LocalCPUBackend::entry_can_evict(uint32_t slot) const {
  return entries_[slot]->can_evict();
}

uint64_t LocalCPUBackend::scan_token(uint32_t predicate) const {
  constexpr int kPredicateBits = 20;
  KVTWIN_CHECK(predicate > 0 && predicate < (1u << kPredicateBits)) << "predicate " << predicate;
  const uint64_t state = allocator_->num_became_evictable() + evictable_inserts_;
  return state << kPredicateBits | predicate;
}

bool LocalCPUBackend::layer_group_can_evict(const CacheEngineKey& key, int num_layers) const {
  for (int l = 0; l < num_layers; ++l) {
    const uint32_t* slot = hot_cache_.find(key.layer(l));
    if (slot == nullptr || !entry_can_evict(*slot)) return false;
  }
  return true;
}

bool LocalCPUBackend::contains(const CacheEngineKey& key, bool pin) {
  const uint32_t* slot = hot_cache_.find(key);
  if (slot == nullptr) return false;
  if (pin) {
    allocator_->pin(entries_[*slot].id());
    keys_in_request_.push_back(key);
  }
  return true;
}

void LocalCPUBackend::touch_cache() {
  for (auto it = keys_in_request_.rbegin(); it != keys_in_request_.rend(); ++it)
    policy_->update_on_hit(*it, hot_cache_);
  keys_in_request_.clear();
}

void LocalCPUBackend::submit_put_task(const CacheEngineKey& key, const PyRef& obj) {
  if (hot_cache_.contains(key)) return;
  allocator_->ref_count_up(obj.id());
  hot_cache_.set(key, add_entry(key, obj));
  if (obj->can_evict()) ++evictable_inserts_;
  policy_->on_tier_insert(key);
  policy_->update_on_put(key);
}

void LocalCPUBackend::batched_submit_put_task(std::span<const CacheEngineKey> keys,
                                              std::span<const PyRef> objs) {
  if (!use_hot_) return;
  size_t n = std::min(keys.size(), objs.size());
  for (size_t i = 0; i < n; ++i) submit_put_task(keys[i], objs[i]);
}

PyRef LocalCPUBackend::get_blocking(const CacheEngineKey& key) {
  const uint32_t* slot = hot_cache_.find(key);
  if (slot == nullptr) return PyRef();
  allocator_->ref_count_up(entries_[*slot].id());
  return entries_[*slot];
}

std::vector<PyRef> LocalCPUBackend::batched_get_non_blocking(std::span<const CacheEngineKey> keys) {
  std::vector<PyRef> out;
  out.reserve(keys.size());
  for (const CacheEngineKey& key : keys) {
    const uint32_t* slot = hot_cache_.find(key);
    if (slot == nullptr) raise(PyError::kKeyError, "hot_cache[" + key.kid() + "]");
    allocator_->ref_count_up(entries_[*slot].id());
    out.push_back(entries_[*slot]);
  }
  return out;
}

bool LocalCPUBackend::pin(const CacheEngineKey& key) {
  const uint32_t* slot = hot_cache_.find(key);
  if (slot == nullptr) return false;
  allocator_->pin(entries_[*slot].id());
  return true;
}

bool LocalCPUBackend::unpin(const CacheEngineKey& key) {
  const uint32_t* slot = hot_cache_.find(key);
  if (slot == nullptr) return false;
  allocator_->unpin(entries_[*slot].id());
  return true;
}

bool LocalCPUBackend::remove(const CacheEngineKey& key, bool force) {
  PyRef obj = pop_entry(key);
  if (!obj) return false;
  allocator_->ref_count_down(obj.id());
  if (force) policy_->update_on_force_evict(key);
  return true;
}

int64_t LocalCPUBackend::clear() {
  if (!use_hot_) return 0;
  std::vector<CacheEngineKey> clear_keys;
  int64_t tokens = 0;
  for (uint32_t n = hot_cache_.first(); n != KeyOrderedDict::kEnd; n = hot_cache_.next(n)) {
    const MemoryObj& o = *entries_[hot_cache_.value_at(n)];
    if (!o.can_evict()) continue;
    clear_keys.push_back(hot_cache_.key_at(n));
    tokens += o.num_tokens();
  }
  batched_remove(clear_keys, /*force=*/true);
  return tokens;
}

MemoryFormat LocalCPUBackend::default_fmt(std::optional<MemoryFormat> fmt) const {
  if (fmt) return *fmt;
  return layerwise_ ? MemoryFormat::kKvT2D : MemoryFormat::kKv2LTD;
}

PyRef LocalCPUBackend::allocate(const Shape& shape, KvDtype dtype, std::optional<MemoryFormat> fmt,
                                bool eviction, bool busy_loop, BusyLoopSleeper* sleeper) {
  MemoryFormat f = default_fmt(fmt);
  PyRef obj = allocator_->allocate(shape, dtype, f);
  if (obj || !eviction) return obj;
  for (;;) {
    CanEvictFn can_evict([this](uint32_t slot) { return entry_can_evict(slot); }, scan_token(1));
    bool wait_other_requests = true;
    if (use_hot_) {
      std::optional<CacheEngineKey> victim = policy_->get_evict_candidate(hot_cache_, can_evict);
      if (victim) {
        wait_other_requests = false;
        batched_remove({&*victim, 1}, /*force=*/false);
      }
    }
    if (wait_other_requests) {
      if (!busy_loop) break;
      // Upstream sleeps, then tries the pool once more before asking the policy again.
      if (sleeper == nullptr || !sleeper->sleep(kBusyLoopSleepSecs))
        raise(PyError::kWouldBusyWait, "local cpu allocation waits for memory forever");
    }
    obj = allocator_->allocate(shape, dtype, f);
    if (obj) break;
  }
  return obj;
}

std::vector<PyRef> LocalCPUBackend::batched_allocate(const Shape& shape, KvDtype dtype,
                                                     int batch_size,
                                                     std::optional<MemoryFormat> fmt, bool eviction,
                                                     bool busy_loop) {
  MemoryFormat f = default_fmt(fmt);
  std::vector<PyRef> objs = allocator_->batched_allocate(shape, dtype, batch_size, f);
  if (!objs.empty() || !eviction) return objs;
  // The fix's verdict per chunk (keyed by its layer-0 key): a scan meets a chunk's layer entries
  // apart (store_layer puts layer by layer), and the verdict holds for the whole call, since only
  // the chunks evicted here change. Each chunk's layers are then looked up once, not per entry.
  std::unordered_map<CacheEngineKey, bool, CacheEngineKeyHash> chunk_verdict;
  auto can_evict_fn = [this, batch_size, &chunk_verdict](uint32_t slot) {
    if (!entry_can_evict(slot)) return false;
    if (quirks_.layerwise_eviction_ignores_other_layers) return true;
    // The fix: every layer of the candidate's chunk must be evictable.
    auto [it, fresh] = chunk_verdict.try_emplace(entry_keys_[slot].layer(0), false);
    if (fresh) it->second = layer_group_can_evict(entry_keys_[slot], batch_size);
    return it->second;
  };
  const uint32_t predicate =
      quirks_.layerwise_eviction_ignores_other_layers ? 1 : 2 + static_cast<uint32_t>(batch_size);
  for (;;) {
    CanEvictFn can_evict(can_evict_fn, scan_token(predicate));
    bool wait_other_requests = true;
    if (use_hot_) {
      std::vector<CacheEngineKey> victims = policy_->get_evict_candidates(hot_cache_, 1, can_evict);
      if (!victims.empty()) {
        wait_other_requests = false;
        for (const CacheEngineKey& victim : victims) {
          std::vector<PyRef> old;
          std::vector<MemObjId> old_ids;
          for (const CacheEngineKey& key : victim.split_layers(batch_size)) {
            const uint32_t* slot = hot_cache_.find(key);
            if (slot == nullptr) raise(PyError::kKeyError, "hot_cache[" + key.kid() + "]");
            old.push_back(entries_[*slot]);
            old_ids.push_back(entries_[*slot].id());
            policy_->update_on_force_evict(key);
            pop_entry(key);
          }
          allocator_->batched_free(old_ids);
        }
      }
    }
    if (wait_other_requests) {
      if (!busy_loop) break;
      raise(PyError::kWouldBusyWait, "local cpu batched allocation waits for memory forever");
    }
    objs = allocator_->batched_allocate(shape, dtype, batch_size, f);
    if (!objs.empty()) break;
  }
  return objs;
}

std::vector<std::pair<CacheEngineKey, MemObjId>> LocalCPUBackend::entries() const {
  std::vector<std::pair<CacheEngineKey, MemObjId>> out;
  out.reserve(hot_cache_.size());
  for (uint32_t n = hot_cache_.first(); n != KeyOrderedDict::kEnd; n = hot_cache_.next(n))
    out.emplace_back(hot_cache_.key_at(n), entries_[hot_cache_.value_at(n)].id());
  return out;
}

const MemoryObj* LocalCPUBackend::peek(const CacheEngineKey& key) const {
  const uint32_t* slot = hot_cache_.find(key);
  return slot == nullptr ? nullptr : &*entries_[*slot];
}

PyRef LocalCPUBackend::entry(const CacheEngineKey& key) const {
  const uint32_t* slot = hot_cache_.find(key);
  return slot == nullptr ? PyRef() : entries_[*slot];
}

uint64_t LocalCPUBackend::resident_bytes() const {
  uint64_t total = 0;
  for (uint32_t n = hot_cache_.first(); n != KeyOrderedDict::kEnd; n = hot_cache_.next(n))
    total += entries_[hot_cache_.value_at(n)]->phy_size;
  return total;
}

void LocalCPUBackend::check_invariants() const {
  for (uint32_t n = hot_cache_.first(); n != KeyOrderedDict::kEnd; n = hot_cache_.next(n)) {
    const MemoryObj& o = *entries_[hot_cache_.value_at(n)];
    KVTWIN_CHECK(o.valid) << "hot-cache entry " << hot_cache_.key_at(n).kid() << " was freed";
    KVTWIN_CHECK(o.ref_count >= 1)
        << "hot-cache entry " << hot_cache_.key_at(n).kid() << " has ref_count " << o.ref_count;
  }
}

}  // namespace kvtwin::model::lmcache
