// FIFOCachePolicy: insertion order only; hits change nothing; victims are the oldest evictable
// entries.
#pragma once

#include "model/lmcache/cache_policy.h"

namespace kvtwin::model::lmcache {

class FIFOCachePolicy final : public DictOrderCachePolicy {
 public:
  FIFOCachePolicy() : DictOrderCachePolicy(/*newest_first=*/false) {}
  CachePolicyKind kind() const override { return CachePolicyKind::kFifo; }
  void update_on_hit(const CacheEngineKey&, KeyOrderedDict&) override {}
  void update_on_put(const CacheEngineKey&) override {}
  void update_on_force_evict(const CacheEngineKey&) override {}
};

}  // namespace kvtwin::model::lmcache
