#include "model/lmcache/fifo_policy.h"

namespace kvtwin::model::lmcache {

std::vector<CacheEngineKey> FIFOCachePolicy::get_evict_candidates(const KeyOrderedDict& dict,
                                                                  int num_candidates,
                                                                  const CanEvictFn& can_evict) {
  std::vector<CacheEngineKey> out;
  for (uint32_t n = dict.first(); n != KeyOrderedDict::kEnd; n = dict.next(n)) {
    if (!can_evict(dict.value_at(n))) continue;
    out.push_back(dict.key_at(n));
    if (static_cast<int>(out.size()) == num_candidates) break;
  }
  return out;
}

std::optional<CacheEngineKey> FIFOCachePolicy::get_evict_candidate(const KeyOrderedDict& dict,
                                                                   const CanEvictFn& can_evict) {
  for (uint32_t n = dict.first(); n != KeyOrderedDict::kEnd; n = dict.next(n))
    if (can_evict(dict.value_at(n))) return dict.key_at(n);
  return std::nullopt;
}

}  // namespace kvtwin::model::lmcache
