#include "model/lmcache/remote_backend.h"

#include <algorithm>
#include <cstring>

#include "model/check.h"
#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {
namespace {

void put_i32(RemoteMetadataBytes& b, int i, int32_t v) {
  uint32_t u = static_cast<uint32_t>(v);
  for (int k = 0; k < 4; ++k) b[4 * i + k] = static_cast<uint8_t>(u >> (8 * k));
}

int32_t get_i32(const RemoteMetadataBytes& b, int i) {
  uint32_t u = 0;
  for (int k = 0; k < 4; ++k) u |= static_cast<uint32_t>(b[4 * i + k]) << (8 * k);
  return static_cast<int32_t>(u);
}

std::optional<KvDtype> dtype_from_remote_code(int32_t code) {
  switch (code) {
    case 1:
    case 2:
      return KvDtype::kHalf;
    case 3:
      return KvDtype::kBfloat16;
    case 4:
      return KvDtype::kFloat;
    case 5:
      return KvDtype::kDouble;
    case 6:
      return KvDtype::kUint8;
    case 7:
      return KvDtype::kFp8E4m3fn;
    case 8:
      return KvDtype::kFp8E5m2;
  }
  return std::nullopt;
}

}  // namespace

bool mla_worker_id_as0(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata) {
  return config.remote_enable_mla_worker_id_as0.value_or(metadata.use_mla) && metadata.use_mla &&
         metadata.world_size > 1;
}

RemoteBackend::RemoteBackend(LocalCPUBackend* local_cpu, std::shared_ptr<RemoteKvStore> store,
                             KeyScopeRegistry* registry, bool mla_worker_id_as0_mode,
                             StorageEvents* events, uint64_t* next_job_id, const Quirks& quirks)
    : local_cpu_(local_cpu),
      store_(std::move(store)),
      registry_(registry),
      mla_worker_id_as0_mode_(mla_worker_id_as0_mode),
      events_(events),
      next_job_id_(next_job_id),
      quirks_(quirks) {
  KVTWIN_CHECK(local_cpu_ != nullptr) << "the remote tier needs the CPU tier as its allocator";
}

RemoteMetadataBytes RemoteBackend::serialize_metadata(const MemoryObj& obj) {
  RemoteMetadataBytes b{};
  put_i32(b, 0, static_cast<int32_t>(obj.byte_len));
  put_i32(b, 1, static_cast<int32_t>(obj.fmt));
  put_i32(b, 2, dtype_remote_code(obj.dtype).value_or(0));
  for (int d = 0; d < 4; ++d)  // the fixed writer pads shapes of rank < 4 with zeros
    put_i32(b, 3 + d, d < obj.shape.rank ? static_cast<int32_t>(obj.shape.dims[d]) : 0);
  return b;
}

bool RemoteBackend::serializable(const MemoryObj& obj) const {
  // Upstream asserts len(shape) == 4 (fixed: <= 4, which every Shape is) and looks the dtype up in
  // DTYPE_TO_INT (KeyError for a dtype without a code).
  if (quirks_.remote_metadata_requires_4d_shapes && obj.shape.rank != 4) return false;
  return dtype_remote_code(obj.dtype).has_value();
}

// The padding (trailing zero dims) is stripped only by the fixed reader; f4261ef6 reads all four
// dims, which is exact for the only shapes it can write (4-D).
Shape RemoteBackend::shape_of(const RemoteMetadataBytes& m) const {
  Shape s{get_i32(m, 3), get_i32(m, 4), get_i32(m, 5), get_i32(m, 6)};
  if (!quirks_.remote_metadata_requires_4d_shapes)
    while (s.rank > 1 && s.dims[s.rank - 1] == 0) --s.rank;
  return s;
}

CacheEngineKey RemoteBackend::remote_key(const CacheEngineKey& key) const {
  if (!mla_worker_id_as0_mode_) return key;
  const KeyScope& s = *key.scope;
  CacheEngineKey k = key;
  k.scope = registry_->intern(s.model_name, s.world_size, 0, s.dtype, s.tags);
  return k;
}

bool RemoteBackend::contains(const CacheEngineKey& key, bool /*pin*/) {
  ++exists_calls_;
  bool exists = store_->metadata(remote_key(key).to_string()) != nullptr;
  last_result_.reset();  // the EXISTS job's result replaces the executor's last one
  return exists;
}

void RemoteBackend::batched_submit_put_task(std::span<const CacheEngineKey> keys,
                                            std::span<const PyRef> objs) {
  if (mla_worker_id_as0_mode_) return;
  PutJob job;
  job.id = (*next_job_id_)++;
  size_t n = std::min(keys.size(), objs.size());
  for (size_t i = 0; i < objs.size(); ++i) {
    // ref_count_up, serialize (+1), ref_count_down: the serializer's reference remains.
    local_cpu_->allocator().ref_count_up(objs[i].id());
    job.objs.push_back(objs[i]);
  }
  job.keys.assign(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(n));
  pending_.push_back(std::move(job));
  ++events_->remote_writes_submitted;
}

std::vector<PendingWrite> RemoteBackend::pending_writes(uint64_t first_id, bool with_keys) const {
  std::vector<PendingWrite> out;
  for (auto it = first_job_at_or_after(pending_, first_id); it != pending_.end(); ++it) {
    const PutJob& j = *it;
    uint64_t bytes = 0, phy = 0;
    for (const PyRef& o : j.objs) {
      if (!serializable(*o)) continue;  // fails before anything is sent
      bytes += o->byte_len;
      phy += o->phy_size;
    }
    out.push_back({j.id, Tier::kRemote, {}, bytes, phy});
    if (with_keys) out.back().keys = j.keys;
  }
  return out;
}

bool RemoteBackend::complete_write(uint64_t id) {
  auto it = first_job_at_or_after(pending_, id);
  if (it == pending_.end() || it->id != id) return false;
  PutJob job = std::move(*it);
  pending_.erase(it);
  for (size_t i = 0; i < job.keys.size(); ++i) {
    const MemoryObj& o = *job.objs[i];
    // A shape that is not 4-D or a dtype without a code fails inside the writer (assert /
    // KeyError), which the executor swallows: that key is not written.
    if (!serializable(o)) {
      ++events_->remote_write_errors;
      continue;
    }
    store_->set_both(job.keys[i].to_string(), {o.byte_len, o.content}, serialize_metadata(o));
  }
  for (const PyRef& o : job.objs) local_cpu_->allocator().ref_count_down(o.id());
  last_result_.reset();  // this job's result (None) replaces the last get's
  return true;
}

PyRef RemoteBackend::get_one(const CacheEngineKey& key) {
  std::string k = key.to_string();
  const RemoteMetadataBytes* meta = store_->metadata(k);
  if (meta == nullptr) return PyRef();
  RemoteMetadataBytes m = *meta;
  auto dtype = dtype_from_remote_code(get_i32(m, 2));
  if (!dtype) raise(PyError::kKeyError, "INT_TO_DTYPE");
  Shape shape = shape_of(m);
  auto fmt = static_cast<MemoryFormat>(get_i32(m, 1));
  PyRef obj = local_cpu_->allocate(shape, *dtype, fmt);
  if (!obj) return PyRef();
  const RemoteKvStore::KvBytes* kv = store_->kv_bytes(k);
  if (kv == nullptr) {
    // "Key exists but KV cache does not exist": delete the metadata; the buffer is dropped.
    store_->delete_metadata(k);
    return PyRef();
  }
  obj->content = kv->content;
  return obj;
}

std::optional<PyRef> RemoteBackend::prefetch_allocate(const CacheEngineKey& key) {
  const RemoteMetadataBytes* meta = store_->metadata(remote_key(key).to_string());
  if (meta == nullptr) return std::nullopt;
  RemoteMetadataBytes m = *meta;
  auto dtype = dtype_from_remote_code(get_i32(m, 2));
  if (!dtype) raise(PyError::kKeyError, "INT_TO_DTYPE");
  Shape shape = shape_of(m);
  auto fmt = static_cast<MemoryFormat>(get_i32(m, 1));
  return local_cpu_->allocate(shape, *dtype, fmt, /*eviction=*/true, /*busy_loop=*/false);
}

bool RemoteBackend::prefetch_fill(const CacheEngineKey& key, MemoryObj& dst) {
  std::string k = remote_key(key).to_string();
  const RemoteKvStore::KvBytes* kv = store_->kv_bytes(k);
  if (kv == nullptr) {
    store_->delete_metadata(k);
    return false;
  }
  dst.content = kv->content;
  return true;
}

PyRef RemoteBackend::get_blocking(const CacheEngineKey& key) {
  PyRef r = get_one(remote_key(key));
  if (!r) count_failed_get_blocking();
  last_result_ = r;
  return r;
}

std::vector<PyRef> RemoteBackend::batched_get_blocking(std::span<const CacheEngineKey> keys) {
  std::vector<PyRef> out;
  out.reserve(keys.size());
  bool failed = false;
  for (const CacheEngineKey& key : keys) {
    PyRef r = get_one(remote_key(key));
    failed = failed || !r;
    last_result_ = r;
    out.push_back(std::move(r));
  }
  if (failed) count_failed_get_blocking();  // once per call, whatever the number of misses
  return out;
}

std::vector<PyRef> RemoteBackend::batched_get_non_blocking(std::span<const CacheEngineKey> keys) {
  std::vector<PyRef> out;
  bool missed = false;
  for (const CacheEngineKey& key : keys) {
    PyRef r = get_one(remote_key(key));
    if (!r) {
      missed = true;  // upstream drops it and goes on
    } else if (missed && !quirks_.remote_prefetch_drops_missing_chunks) {
      local_cpu_->allocator().ref_count_down(r.id());  // the fix: past the leading run
    } else {
      out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace kvtwin::model::lmcache
