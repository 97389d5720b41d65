#include "model/lmcache/cache_policy.h"

#include "model/lmcache/fifo_policy.h"
#include "model/lmcache/lfu_policy.h"
#include "model/lmcache/lru_policy.h"
#include "model/lmcache/mru_policy.h"
#include "model/lmcache/s3fifo_policy.h"

namespace kvtwin::model::lmcache {

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
