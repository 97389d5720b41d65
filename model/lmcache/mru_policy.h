// MRUCachePolicy: a hit moves the key to the newest end; victims are the newest evictable entries
// (scanning reversed(dict.items())).
#pragma once

#include "model/lmcache/cache_policy.h"

namespace kvtwin::model::lmcache {

class MRUCachePolicy final : public DictOrderCachePolicy {
 public:
  MRUCachePolicy() : DictOrderCachePolicy(/*newest_first=*/true) {}
  CachePolicyKind kind() const override { return CachePolicyKind::kMru; }
  void update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) override;
  void update_on_put(const CacheEngineKey&) override {}
  void update_on_force_evict(const CacheEngineKey&) override {}
};

}  // namespace kvtwin::model::lmcache
