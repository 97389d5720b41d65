#include "model/lmcache/storage_backend.h"

namespace kvtwin::model::lmcache {

std::vector<PyRef> StorageBackendInterface::batched_get_blocking(
    std::span<const CacheEngineKey> keys) {
  std::vector<PyRef> out;
  out.reserve(keys.size());
  for (const CacheEngineKey& k : keys) out.push_back(get_blocking(k));
  return out;
}

int StorageBackendInterface::batched_remove(std::span<const CacheEngineKey> keys, bool force) {
  int n = 0;
  for (const CacheEngineKey& k : keys) n += remove(k, force) ? 1 : 0;
  return n;
}

int StorageBackendInterface::batched_contains(std::span<const CacheEngineKey> keys, bool pin) {
  int hits = 0;
  for (const CacheEngineKey& k : keys) {
    if (!contains(k, pin)) break;
    ++hits;
  }
  return hits;
}

}  // namespace kvtwin::model::lmcache
