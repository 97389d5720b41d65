#include "model/lmcache/lru_policy.h"

#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

void LRUCachePolicy::update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) {
  if (!dict.move_to_end(key)) raise(PyError::kKeyError, "LRU move_to_end: " + key.kid());
}

}  // namespace kvtwin::model::lmcache
