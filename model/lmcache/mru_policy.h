// MRUCachePolicy: a hit moves the key to the newest end; victims are the newest evictable entries
// (scanning reversed(dict.items())).
#pragma once

#include "model/lmcache/cache_policy.h"

namespace kvtwin::model::lmcache {

class MRUCachePolicy final : public CachePolicy {
 public:
  CachePolicyKind kind() const override { return CachePolicyKind::kMru; }
  void update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) override;
  void update_on_put(const CacheEngineKey&) override {}
  void update_on_force_evict(const CacheEngineKey&) override {}
  std::vector<CacheEngineKey> get_evict_candidates(const KeyOrderedDict& dict, int num_candidates,
                                                   const CanEvictFn& can_evict) override;
  std::optional<CacheEngineKey> get_evict_candidate(const KeyOrderedDict& dict,
                                                    const CanEvictFn& can_evict) override;
};

}  // namespace kvtwin::model::lmcache
