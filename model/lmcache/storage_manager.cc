#include "model/lmcache/storage_manager.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::model::lmcache {
namespace {

bool in_list(const std::vector<std::string>* list, std::string_view name) {
  return std::find(list->begin(), list->end(), name) != list->end();
}

}  // namespace

StorageManager::StorageManager(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata,
                               const SharedStorage& shared, KeyScopeRegistry* registry)
    : allocator_(std::make_unique<TensorMemoryAllocator>(config.max_local_cpu_size_bytes)),
      shared_(shared) {
  KVTWIN_CHECK(config.max_local_cpu_size_bytes > 0) << "LMCache needs a CPU pool";
  auto cpu = std::make_unique<LocalCPUBackend>(allocator_.get(), config.cache_policy,
                                               config.local_cpu, config.use_layerwise,
                                               config.quirks, &events_, metadata.worker_id);
  local_cpu_ = cpu.get();
  backends_.push_back(std::move(cpu));
  if (config.local_disk && config.max_local_disk_size_bytes > 0) {
    auto disk = std::make_unique<LocalDiskBackend>(
        config.max_local_disk_size_bytes, config.cache_policy, local_cpu_, shared_.disk,
        config.quirks, &events_, &next_job_id_, metadata.worker_id);
    local_disk_ = disk.get();
    backends_.push_back(std::move(disk));
  }
  if (config.remote) {
    bool mla_as0 = mla_worker_id_as0(config, metadata) && metadata.worker_id != 0;
    auto remote = std::make_unique<RemoteBackend>(local_cpu_, shared_.remote, registry, mla_as0,
                                                  &events_, &next_job_id_, config.quirks);
    remote_ = remote.get();
    backends_.push_back(std::move(remote));
  }
  if (config.enable_async_loading)
    prefetcher_ = std::make_unique<AsyncPrefetcher>(this, config.quirks);
}

StorageManager::~StorageManager() {
  // Events and tiers release their references while the pool still exists.
  prefetcher_.reset();
  backends_.clear();
}

StorageBackendInterface* StorageManager::backend(std::string_view name) {
  for (auto& b : backends_) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

std::vector<std::string> StorageManager::backend_names() const {
  std::vector<std::string> out;
  for (const auto& b : backends_) out.emplace_back(b->name());
  return out;
}

void StorageManager::set_backend_bypass(const std::string& name, bool bypassed) {
  if (bypassed) {
    bypassed_.insert(name);
  } else {
    bypassed_.erase(name);
  }
}

std::vector<StorageBackendInterface*> StorageManager::active(
    std::string_view location, const std::vector<std::string>* search_range) const {
  std::vector<StorageBackendInterface*> out;
  for (const auto& b : backends_) {
    std::string_view name = b->name();
    if (freeze_ && name != "LocalCPUBackend") continue;
    if (bypassed_.count(std::string(name)) != 0) continue;
    if (!location.empty() && name != location) continue;
    if (search_range != nullptr && !search_range->empty() && !in_list(search_range, name)) continue;
    out.push_back(b.get());
  }
  return out;
}

PyRef StorageManager::allocate(const Shape& shape, KvDtype dtype, std::optional<MemoryFormat> fmt,
                               bool eviction, bool busy_loop) {
  return local_cpu_->allocate(shape, dtype, fmt, eviction, busy_loop);
}

std::vector<PyRef> StorageManager::batched_allocate(const Shape& shape, KvDtype dtype,
                                                    int batch_size, std::optional<MemoryFormat> fmt,
                                                    bool eviction, bool busy_loop) {
  return local_cpu_->batched_allocate(shape, dtype, batch_size, fmt, eviction, busy_loop);
}

void StorageManager::batched_put(std::span<const CacheEngineKey> keys, std::span<const PyRef> objs,
                                 std::string_view location) {
  // Every tier allocates through the CPU tier, so all share the callers' objects.
  for (const auto& b : backends_) {
    if (!location.empty() && b->name() != location) continue;
    if (bypassed_.count(std::string(b->name())) != 0) continue;
    b->batched_submit_put_task(keys, objs);
  }
  for (const PyRef& o : objs) allocator_->ref_count_down(o.id());
}

std::pair<std::string, std::vector<PyRef>> StorageManager::batched_get(
    std::span<const CacheEngineKey> keys, std::string_view location) {
  for (StorageBackendInterface* b : active(location, nullptr)) {
    std::vector<PyRef> objs = b->batched_get_blocking(keys);
    if (objs.empty()) continue;  // `if memory_objs:`
    bool any_none = std::any_of(objs.begin(), objs.end(), [](const PyRef& r) { return !r; });
    if (b != local_cpu_ && !any_none) local_cpu_->batched_submit_put_task(keys, objs);
    return {std::string(b->name()), std::move(objs)};
  }
  return {"", std::vector<PyRef>(keys.size())};
}

std::vector<PyRef> StorageManager::layerwise_get_layer(std::span<const CacheEngineKey> keys,
                                                       std::string_view location) {
  StorageBackendInterface* b = backend(location.empty() ? "LocalCPUBackend" : location);
  KVTWIN_CHECK(b != nullptr) << "no tier " << location;
  return b->batched_get_non_blocking(keys);
}

std::string StorageManager::contains(const CacheEngineKey& key,
                                     const std::vector<std::string>* search_range, bool pin) {
  for (StorageBackendInterface* b : active({}, search_range)) {
    if (b->contains(key, pin)) return std::string(b->name());
  }
  return "";
}

std::pair<int, BlockMapping> StorageManager::batched_contains(
    std::span<const CacheEngineKey> keys, const std::vector<std::string>* search_range, bool pin) {
  size_t total = keys.size();
  int hits_total = 0;
  BlockMapping mapping;
  std::span<const CacheEngineKey> rest = keys;
  for (StorageBackendInterface* b : active({}, search_range)) {
    int hits = b->batched_contains(rest, pin);
    if (hits == 0) continue;
    mapping.emplace_back(std::string(b->name()),
                         std::vector<CacheEngineKey>(rest.begin(), rest.begin() + hits));
    hits_total += hits;
    if (static_cast<size_t>(hits_total) == total) break;
    rest = rest.subspan(static_cast<size_t>(hits));
  }
  return {hits_total, std::move(mapping)};
}

ChunkMapping StorageManager::get_block_mapping(std::span<const ChunkInfo> chunk_infos) {
  std::vector<CacheEngineKey> keys;
  keys.reserve(chunk_infos.size());
  for (const ChunkInfo& c : chunk_infos) keys.push_back(c.key);
  std::span<const CacheEngineKey> rest = keys;
  ChunkMapping mapping;
  size_t total_hits = 0;
  for (StorageBackendInterface* b : active({}, nullptr)) {
    int hits = b->batched_contains(rest, false);
    if (hits == 0) continue;
    mapping.emplace_back(std::string(b->name()),
                         std::vector<ChunkInfo>(chunk_infos.begin() + total_hits,
                                                chunk_infos.begin() + total_hits + hits));
    total_hits += static_cast<size_t>(hits);
    if (total_hits == keys.size()) break;
    rest = rest.subspan(static_cast<size_t>(hits));
  }
  return mapping;
}

void StorageManager::touch_cache() {
  for (auto& b : backends_) {
    if (b->name() == "LocalCPUBackend" || b->name() == "LocalDiskBackend") b->touch_cache();
  }
}

int StorageManager::remove(const CacheEngineKey& key, const std::vector<std::string>* locations) {
  int n = 0;
  for (auto& b : backends_) {
    if (locations == nullptr || in_list(locations, b->name())) n += b->remove(key, true) ? 1 : 0;
  }
  return n;
}

void StorageManager::batched_unpin(std::span<const CacheEngineKey> keys,
                                   const std::vector<std::string>* locations) {
  for (auto& b : backends_) {
    if (locations != nullptr && !in_list(locations, b->name())) continue;
    for (const CacheEngineKey& k : keys) b->unpin(k);
  }
}

int64_t StorageManager::clear(const std::vector<std::string>* locations) {
  int64_t n = 0;
  for (auto& b : backends_) {
    if (locations != nullptr && !in_list(locations, b->name())) continue;
    if (b->has_clear()) n += b->clear();
  }
  return n;
}

std::vector<PendingWrite> StorageManager::pending_writes(uint64_t first_id, bool with_keys) const {
  std::vector<PendingWrite> out;
  if (local_disk_ != nullptr) out = local_disk_->pending_writes(first_id, with_keys);
  if (remote_ != nullptr) {
    for (PendingWrite& w : remote_->pending_writes(first_id, with_keys))
      out.push_back(std::move(w));
  }
  std::sort(out.begin(), out.end(),
            [](const PendingWrite& a, const PendingWrite& b) { return a.id < b.id; });
  return out;
}

bool StorageManager::complete_write(uint64_t id) {
  if (local_disk_ != nullptr && local_disk_->complete_write(id)) return true;
  if (remote_ != nullptr && remote_->complete_write(id)) return true;
  return false;
}

StorageManager::Completed StorageManager::complete_all_writes() {
  Completed c;
  if (local_disk_ != nullptr) {
    for (const PendingWrite& w : local_disk_->pending_writes()) {
      local_disk_->complete_write(w.id);
      ++c.disk;
    }
  }
  if (remote_ != nullptr) {
    for (const PendingWrite& w : remote_->pending_writes()) {
      remote_->complete_write(w.id);
      ++c.remote;
    }
  }
  return c;
}

std::vector<MemObjId> StorageManager::held_objects() const {
  std::vector<MemObjId> out;
  for (const auto& [key, id] : local_cpu_->entries()) out.push_back(id);
  if (local_disk_ != nullptr) {
    for (MemObjId id : local_disk_->pending_objects()) out.push_back(id);
  }
  if (remote_ != nullptr) {
    for (MemObjId id : remote_->pending_objects()) out.push_back(id);
  }
  if (prefetcher_) prefetcher_->append_held_objects(&out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void StorageManager::release_executor_results() {
  if (remote_ != nullptr) remote_->release_executor_results();
}

}  // namespace kvtwin::model::lmcache
