#include "model/lmcache/mru_policy.h"

#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

void MRUCachePolicy::update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) {
  if (!dict.move_to_end(key)) raise(PyError::kKeyError, "MRU move_to_end: " + key.kid());
}

std::vector<CacheEngineKey> MRUCachePolicy::get_evict_candidates(const KeyOrderedDict& dict,
                                                                 int num_candidates,
                                                                 const CanEvictFn& can_evict) {
  std::vector<CacheEngineKey> out;
  for (uint32_t n = dict.last(); n != KeyOrderedDict::kEnd; n = dict.prev(n)) {
    if (!can_evict(dict.value_at(n))) continue;
    out.push_back(dict.key_at(n));
    if (static_cast<int>(out.size()) == num_candidates) break;
  }
  return out;
}

std::optional<CacheEngineKey> MRUCachePolicy::get_evict_candidate(const KeyOrderedDict& dict,
                                                                  const CanEvictFn& can_evict) {
  for (uint32_t n = dict.last(); n != KeyOrderedDict::kEnd; n = dict.prev(n))
    if (can_evict(dict.value_at(n))) return dict.key_at(n);
  return std::nullopt;
}

}  // namespace kvtwin::model::lmcache
