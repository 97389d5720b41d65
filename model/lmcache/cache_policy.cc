#include "model/lmcache/cache_policy.h"

#include <utility>

#include "model/lmcache/fifo_policy.h"
#include "model/lmcache/lfu_policy.h"
#include "model/lmcache/lru_policy.h"
#include "model/lmcache/mru_policy.h"
#include "model/lmcache/s3fifo_policy.h"

namespace kvtwin::model::lmcache {

template <typename Take>
void DictOrderCachePolicy::for_each_evictable(const KeyOrderedDict& dict,
                                              const CanEvictFn& can_evict, Take take) const {
  dict.walk_past_failing_run(
      can_evict.token(), newest_first_, [&](uint32_t n) { return can_evict(dict.value_at(n)); },
      [&](uint32_t n) { return take(dict.key_at(n)); });
}

std::vector<CacheEngineKey> DictOrderCachePolicy::get_evict_candidates(
    const KeyOrderedDict& dict, int num_candidates, const CanEvictFn& can_evict) {
  std::vector<CacheEngineKey> out;
  for_each_evictable(dict, can_evict, [&](const CacheEngineKey& key) {
    out.push_back(key);
    return static_cast<int>(out.size()) == num_candidates;
  });
  return out;
}

std::optional<CacheEngineKey> DictOrderCachePolicy::get_evict_candidate(
    const KeyOrderedDict& dict, const CanEvictFn& can_evict) {
  std::optional<CacheEngineKey> out;
  for_each_evictable(dict, can_evict, [&](const CacheEngineKey& key) {
    out = key;
    return true;
  });
  return out;
}

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, const Quirks& quirks) {
  switch (kind) {
    case CachePolicyKind::kLru:
      return std::make_unique<LRUCachePolicy>();
    case CachePolicyKind::kLfu:
      return std::make_unique<LFUCachePolicy>(quirks.lfu_stale_bucket_entries);
    case CachePolicyKind::kFifo:
      return std::make_unique<FIFOCachePolicy>();
    case CachePolicyKind::kMru:
      return std::make_unique<MRUCachePolicy>();
    case CachePolicyKind::kS3Fifo:
      return std::make_unique<S3FIFOCachePolicy>();
  }
  return nullptr;
}

}  // namespace kvtwin::model::lmcache
