// LRUCachePolicy: recency = dict order; a hit moves the key to the newest end; victims are the
// oldest evictable entries. (Upstream also records chunk reuse times for metrics; not modelled.)
#pragma once

#include "model/lmcache/cache_policy.h"

namespace kvtwin::model::lmcache {

class LRUCachePolicy final : public DictOrderCachePolicy {
 public:
  LRUCachePolicy() : DictOrderCachePolicy(/*newest_first=*/false) {}
  CachePolicyKind kind() const override { return CachePolicyKind::kLru; }
  void update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) override;
  void update_on_put(const CacheEngineKey&) override {}
  void update_on_force_evict(const CacheEngineKey&) override {}
};

}  // namespace kvtwin::model::lmcache
