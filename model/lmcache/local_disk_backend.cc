#include "model/lmcache/local_disk_backend.h"

#include <algorithm>

#include "model/check.h"
#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

LocalDiskBackend::LocalDiskBackend(uint64_t max_cache_size, CachePolicyKind policy,
                                   LocalCPUBackend* local_cpu,
                                   std::shared_ptr<DiskDirectory> directory, const Quirks& quirks,
                                   StorageEvents* events, uint64_t* next_job_id, int worker_id)
    : max_cache_size_(max_cache_size),
      policy_(make_cache_policy(policy, quirks)),
      local_cpu_(local_cpu),
      directory_(std::move(directory)),
      quirks_(quirks),
      events_(events),
      next_job_id_(next_job_id),
      worker_id_(worker_id) {
  KVTWIN_CHECK(local_cpu_ != nullptr) << "the disk tier needs the CPU tier as its allocator";
}

DiskCacheMetadata* LocalDiskBackend::find_meta(const CacheEngineKey& key) {
  const uint32_t* slot = dict_.find(key);
  return slot == nullptr ? nullptr : &metas_[*slot];
}

const DiskCacheMetadata& LocalDiskBackend::meta(const CacheEngineKey& key) const {
  const uint32_t* slot = dict_.find(key);
  if (slot == nullptr) raise(PyError::kKeyError, "disk dict[" + key.kid() + "]");
  return metas_[*slot];
}

std::optional<DiskCacheMetadata> LocalDiskBackend::pop_entry(const CacheEngineKey& key) {
  std::optional<uint32_t> slot = dict_.pop(key);
  if (!slot) return std::nullopt;
  policy_->on_tier_erase(key);
  events_->removed.push_back({Tier::kDisk, key, worker_id_});
  free_metas_.push_back(*slot);
  return std::move(metas_[*slot]);
}

bool LocalDiskBackend::contains(const CacheEngineKey& key, bool pin) {
  DiskCacheMetadata* m = find_meta(key);
  if (m == nullptr) return false;
  if (pin) {
    ++m->pin_count;
    keys_in_request_.push_back(key);
  }
  return true;
}

void LocalDiskBackend::touch_cache() {
  for (auto it = keys_in_request_.rbegin(); it != keys_in_request_.rend(); ++it)
    policy_->update_on_hit(*it, dict_);
  keys_in_request_.clear();
}

bool LocalDiskBackend::exists_in_put_tasks(const CacheEngineKey& key) const {
  return put_tasks_.contains(key);
}

void LocalDiskBackend::remove_put_task(const CacheEngineKey& key) {
  put_tasks_.pop(key);
}

void LocalDiskBackend::submit_put_task(const CacheEngineKey& key, const PyRef& obj) {
  if (!obj->valid) raise(PyError::kAssertionError, "memory_obj.tensor is None");
  if (exists_in_put_tasks(key)) return;  // skip repeated save
  if (!quirks_.disk_reput_double_accounting && dict_.contains(key)) return;
  put_tasks_.set(key, 0);
  int64_t required = static_cast<int64_t>(obj->phy_size);
  bool evict_success = true;
  while (current_cache_size_ + required > static_cast<int64_t>(max_cache_size_)) {
    CanEvictFn can_evict([this](uint32_t slot) { return metas_[slot].can_evict(); }, unpins_ + 1);
    std::optional<CacheEngineKey> victim = policy_->get_evict_candidate(dict_, can_evict);
    if (!victim) {
      evict_success = false;
      break;
    }
    current_cache_size_ -= meta(*victim).size;
    batched_remove({&*victim, 1}, /*force=*/false);
  }
  if (!evict_success) {
    if (!quirks_.disk_rejected_put_stays_in_flight) remove_put_task(key);
    return;
  }
  current_cache_size_ += required;
  policy_->update_on_put(key);
  local_cpu_->allocator().ref_count_up(obj.id());
  pending_.push_back({(*next_job_id_)++, key, obj});
  ++events_->disk_writes_submitted;
}

void LocalDiskBackend::batched_submit_put_task(std::span<const CacheEngineKey> keys,
                                               std::span<const PyRef> objs) {
  size_t n = std::min(keys.size(), objs.size());
  for (size_t i = 0; i < n; ++i) submit_put_task(keys[i], objs[i]);
}

std::vector<PendingWrite> LocalDiskBackend::pending_writes(uint64_t first_id,
                                                           bool with_keys) const {
  std::vector<PendingWrite> out;
  auto from = first_job_at_or_after(pending_, first_id);
  out.reserve(static_cast<size_t>(pending_.end() - from));
  for (auto it = from; it != pending_.end(); ++it) {
    out.push_back({it->id, Tier::kDisk, {}, it->obj->byte_len, it->obj->phy_size});
    if (with_keys) out.back().keys.push_back(it->key);
  }
  return out;
}

bool LocalDiskBackend::complete_write(uint64_t id) {
  auto it = first_job_at_or_after(pending_, id);
  if (it == pending_.end() || it->id != id) return false;
  WriteJob job = std::move(*it);
  pending_.erase(it);
  // async_save_bytes_to_disk
  MemoryObj& o = *job.obj;
  uint64_t written = quirks_.disk_usage_counts_unaligned_writes ? o.byte_len : o.phy_size;
  usage_ += static_cast<int64_t>(written);
  directory_->write(job.key.disk_file_name(), o.byte_len, o.content);
  local_cpu_->allocator().ref_count_down(job.obj.id());
  insert_key(job.key, *job.obj);
  remove_put_task(job.key);
  return true;
}

void LocalDiskBackend::insert_key(const CacheEngineKey& key, const MemoryObj& obj) {
  if (dict_.contains(key)) {
    policy_->update_on_hit(key, dict_);
    return;
  }
  uint32_t slot;
  if (!free_metas_.empty()) {
    slot = free_metas_.back();
    free_metas_.pop_back();
  } else {
    slot = static_cast<uint32_t>(metas_.size());
    metas_.emplace_back();
  }
  metas_[slot] = DiskCacheMetadata{obj.phy_size, obj.shape, obj.dtype, obj.fmt, 0};
  dict_.set(key, slot);
  policy_->on_tier_insert(key);
}

void LocalDiskBackend::release_missing_entry(const CacheEngineKey& key) {
  std::optional<DiskCacheMetadata> m = pop_entry(key);
  if (!m) return;
  if (quirks_.disk_missing_file_raises_key_error) return;
  current_cache_size_ -= static_cast<int64_t>(m->size);
  usage_ -= static_cast<int64_t>(m->size);
  policy_->update_on_force_evict(key);
}

bool LocalDiskBackend::read_file(const CacheEngineKey& key, const std::string& path,
                                 MemoryObj& dst) {
  const DiskDirectory::File* f = directory_->find(path);
  if (f == nullptr) {
    release_missing_entry(key);  // "File not found on disk": the entry is popped
    return false;
  }
  dst.content = f->content;
  return true;
}

PyRef LocalDiskBackend::get_blocking(const CacheEngineKey& key) {
  if (!dict_.contains(key)) return PyRef();
  policy_->update_on_hit(key, dict_);
  DiskCacheMetadata m = meta(key);  // a copy: the entry may go while the allocation sleeps
  PyRef obj = local_cpu_->allocate(m.shape, m.dtype, m.fmt, true, true, sleeper_);
  if (!obj) raise(PyError::kAssertionError, "Memory allocation failed during disk load.");
  bool ok = read_file(key, key.disk_file_name(), *obj);
  if (!ok && !quirks_.disk_missing_file_raises_key_error) {
    local_cpu_->allocator().ref_count_down(obj.id());  // the fix releases the buffer
    return PyRef();
  }
  meta(key);  // `self.dict[key].cached_positions`: KeyError after a missing file
  return obj;
}

std::vector<PyRef> LocalDiskBackend::batched_get_non_blocking(
    std::span<const CacheEngineKey> keys) {
  std::vector<PyRef> objs;
  std::vector<std::string> paths;
  for (const CacheEngineKey& key : keys) {
    DiskCacheMetadata* m = find_meta(key);
    if (m == nullptr) raise(PyError::kAssertionError, "Key not found in disk cache after pinning");
    std::string path = key.disk_file_name();
    Shape shape = m->shape;
    KvDtype dtype = m->dtype;
    MemoryFormat fmt = m->fmt;
    PyRef obj = local_cpu_->allocate(shape, dtype, fmt);
    if (!obj) raise(PyError::kAssertionError, "Memory allocation failed during async disk load.");
    m = find_meta(key);  // the allocation may not touch the disk index, but stay safe
    ++m->pin_count;
    policy_->update_on_hit(key, dict_);
    objs.push_back(std::move(obj));
    paths.push_back(std::move(path));
  }
  // The prefetch job (run at once in the model): read, then unpin.
  for (size_t i = 0; i < keys.size(); ++i) {
    bool ok = read_file(keys[i], paths[i], *objs[i]);
    if (!ok && !quirks_.disk_missing_file_raises_key_error) {
      // The fix: a miss (None) instead of a garbage buffer; retrieve_layer stops there.
      local_cpu_->allocator().ref_count_down(objs[i].id());
      objs[i].reset();
      continue;
    }
    --const_cast<DiskCacheMetadata&>(meta(keys[i])).pin_count;
    ++unpins_;
  }
  return objs;
}

PyRef LocalDiskBackend::prefetch_allocate(const CacheEngineKey& key, std::string* path) {
  DiskCacheMetadata* m = find_meta(key);
  if (m == nullptr) raise(PyError::kAssertionError, "Key not found in disk cache after pinning");
  *path = key.disk_file_name();
  Shape shape = m->shape;
  KvDtype dtype = m->dtype;
  MemoryFormat fmt = m->fmt;
  PyRef obj = local_cpu_->allocate(shape, dtype, fmt, /*eviction=*/true, /*busy_loop=*/false);
  if (!obj) return obj;
  ++find_meta(key)->pin_count;
  policy_->update_on_hit(key, dict_);
  return obj;
}

bool LocalDiskBackend::prefetch_read(const CacheEngineKey& key, const std::string& path,
                                     MemoryObj& dst) {
  if (!read_file(key, path, dst)) return false;
  unpin(key);
  return true;
}

bool LocalDiskBackend::pin(const CacheEngineKey& key) {
  DiskCacheMetadata* m = find_meta(key);
  if (m == nullptr) return false;
  ++m->pin_count;
  return true;
}

bool LocalDiskBackend::unpin(const CacheEngineKey& key) {
  DiskCacheMetadata* m = find_meta(key);
  if (m == nullptr) return false;
  --m->pin_count;
  ++unpins_;
  return true;
}

bool LocalDiskBackend::remove(const CacheEngineKey& key, bool force) {
  std::optional<DiskCacheMetadata> m = pop_entry(key);
  if (!m) return false;
  usage_ -= static_cast<int64_t>(m->size);
  if (force && !quirks_.disk_remove_keeps_reservation)
    current_cache_size_ -= static_cast<int64_t>(m->size);
  std::string path = key.disk_file_name();
  if (!directory_->remove(path)) raise(PyError::kFileNotFoundError, "os.remove(" + path + ")");
  if (force) policy_->update_on_force_evict(key);
  return true;
}

std::vector<std::pair<CacheEngineKey, DiskCacheMetadata>> LocalDiskBackend::entries() const {
  std::vector<std::pair<CacheEngineKey, DiskCacheMetadata>> out;
  out.reserve(dict_.size());
  for (uint32_t n = dict_.first(); n != KeyOrderedDict::kEnd; n = dict_.next(n))
    out.emplace_back(dict_.key_at(n), metas_[dict_.value_at(n)]);
  return out;
}

uint64_t LocalDiskBackend::resident_bytes() const {
  uint64_t total = 0;
  for (uint32_t n = dict_.first(); n != KeyOrderedDict::kEnd; n = dict_.next(n))
    total += metas_[dict_.value_at(n)].size;
  return total;
}

uint64_t LocalDiskBackend::in_flight_bytes() const {
  uint64_t total = 0;
  for (const WriteJob& j : pending_) total += j.obj->phy_size;
  return total;
}

}  // namespace kvtwin::model::lmcache
