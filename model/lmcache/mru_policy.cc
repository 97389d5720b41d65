#include "model/lmcache/mru_policy.h"

#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

void MRUCachePolicy::update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) {
  if (!dict.move_to_end(key)) raise(PyError::kKeyError, "MRU move_to_end: " + key.kid());
}

}  // namespace kvtwin::model::lmcache
