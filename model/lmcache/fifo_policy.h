// FIFOCachePolicy: insertion order only; hits change nothing; victims are the oldest evictable
// entries.
#pragma once

#include "model/lmcache/cache_policy.h"

namespace kvtwin::model::lmcache {

class FIFOCachePolicy final : public CachePolicy {
 public:
  CachePolicyKind kind() const override { return CachePolicyKind::kFifo; }
  void update_on_hit(const CacheEngineKey&, KeyOrderedDict&) override {}
  void update_on_put(const CacheEngineKey&) override {}
  void update_on_force_evict(const CacheEngineKey&) override {}
  std::vector<CacheEngineKey> get_evict_candidates(const KeyOrderedDict& dict, int num_candidates,
                                                   const CanEvictFn& can_evict) override;
  std::optional<CacheEngineKey> get_evict_candidate(const KeyOrderedDict& dict,
                                                    const CanEvictFn& can_evict) override;
};

}  // namespace kvtwin::model::lmcache
