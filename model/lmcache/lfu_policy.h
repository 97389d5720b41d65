// LFUCachePolicy: a frequency per key and, per frequency, a FIFO bucket of keys
// (freq_to_keys: SortedDict[int, dict]; key_to_freq: dict).
//
//   update_on_put(k):  key_to_freq[k] = 1; append k to bucket 1 (a key already in bucket 1 keeps
//                      its place, as a dict assignment does)
//   update_on_hit(k):  move k from bucket f to the end of bucket f+1 (KeyError for an unknown k)
//   evict(n):          scan buckets in ascending frequency, each oldest first; skip entries that
//                      cannot be evicted; the chosen keys leave both tables immediately
//
// Quirks::lfu_stale_bucket_entries (upstream behaviour): update_on_put of a key that is already
// known resets its frequency but leaves it in its old bucket (a stale entry), and the disk tier
// calls update_on_put when a write is submitted, before the key is in its index. The eviction
// scan looks every bucket entry up in the tier (`cache_dict[key]`) and raises KeyError on a key
// the tier does not hold. Fixed: update_on_put moves the key out of its old bucket, and the scan
// skips keys the tier does not hold.
#pragma once

#include <map>
#include <unordered_map>

#include "model/lmcache/cache_policy.h"

namespace kvtwin::model::lmcache {

class LFUCachePolicy final : public CachePolicy {
 public:
  explicit LFUCachePolicy(bool stale_bucket_entries) : stale_(stale_bucket_entries) {}
  CachePolicyKind kind() const override { return CachePolicyKind::kLfu; }
  void update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) override;
  void update_on_put(const CacheEngineKey& key) override;
  void update_on_force_evict(const CacheEngineKey& key) override;
  std::vector<CacheEngineKey> get_evict_candidates(const KeyOrderedDict& dict, int num_candidates,
                                                   const CanEvictFn& can_evict) override;
  std::vector<std::pair<int64_t, std::vector<CacheEngineKey>>> frequency_buckets() const override;

 private:
  void bucket_pop(int64_t freq, const CacheEngineKey& key);
  void bucket_add(int64_t freq, const CacheEngineKey& key);

  bool stale_;
  std::map<int64_t, KeyOrderedDict> freq_to_keys_;
  std::unordered_map<CacheEngineKey, int64_t, CacheEngineKeyHash> key_to_freq_;
};

}  // namespace kvtwin::model::lmcache
