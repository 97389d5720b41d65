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
  constexpr uint32_t kEnd = KeyOrderedDict::kEnd;
  const uint64_t token = can_evict.token();
  // Walking forward the run is entered at its first node and left after its last; backward the
  // other way round.
  auto [enter, leave] = token == 0 ? std::pair{kEnd, kEnd} : dict.failing_run(token);
  if (newest_first_) std::swap(enter, leave);
  auto step = [&](uint32_t n) { return newest_first_ ? dict.prev(n) : dict.next(n); };
  const uint32_t start = newest_first_ ? dict.last() : dict.first();
  uint32_t last_failed = kEnd;  // the walk proved [start, last_failed] failing
  bool noted = token == 0;
  auto note = [&] {  // once, at the first evictable key or at the end
    if (noted || last_failed == kEnd) return;
    noted = true;
    if (newest_first_) {
      dict.note_failing_run(token, last_failed, start);
    } else {
      dict.note_failing_run(token, start, last_failed);
    }
  };
  for (uint32_t n = start; n != kEnd; n = step(n)) {
    if (n == enter) {
      last_failed = n = leave;
    } else if (!can_evict(dict.value_at(n))) {
      last_failed = n;
    } else {
      note();
      noted = true;
      if (take(dict.key_at(n))) return;
    }
  }
  note();
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
