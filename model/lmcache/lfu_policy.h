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
//
// The upstream scan resumes (stop 22; not upstream's: the same victims and the same KeyError,
// found without re-walking): a tier full of entries it may not evict (held by pending writes)
// made every allocation walk the low-frequency buckets over the same entries again (a layerwise
// DeepSeek run with 64-token chunks: 90.6 s, 74 % of it in the scan). Under the tier's token
// (CanEvictFn) each bucket keeps the run of entries from its front that the last scan proved
// failing (KeyOrderedDict's failing run) and the next scan jumps over it. Every key in a run is in
// the tier when the run is proved, and on_tier_erase forgets the runs of the buckets that hold a
// key leaving the tier, so the scan still meets, and raises on, a stale entry of a removed key.
// The tiers never give a held key a new value in place (a re-put of a held key is skipped), so
// the token covers every way a run's entry could start to pass. The fixed scan resumes the same
// way over its index: per frequency, a failing prefix of `present_` by sequence number (see
// FailingPrefix).
//
// The fixed scan's index (not upstream's: the same victims, found without the walk): the disk
// tier puts a key in its policy when the write is submitted and in its dict when the write
// completes, so pending writes sit at the front of bucket 1, and a scan that skipped them one by
// one cost 8 billion lookups in a run with a full disk (stop-20 report). With the fix, each bucket
// entry gets a sequence number when it is appended (bucket order is append order: entries are
// only appended and popped), and `present_` holds, per frequency, the entries whose key the tier
// holds, by sequence number (the tier reports its inserts and removals: on_tier_insert /
// on_tier_erase). The scan walks `present_`: every key it meets is in the tier.
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
  void on_tier_insert(const CacheEngineKey& key) override;
  void on_tier_erase(const CacheEngineKey& key) override;

 private:
  void bucket_pop(int64_t freq, const CacheEngineKey& key);
  void bucket_add(int64_t freq, const CacheEngineKey& key);
  // The fix's index (stale_ false only): `key`'s bucket entry left bucket `freq`.
  void index_drop(int64_t freq, const CacheEngineKey& key);

  bool stale_;
  std::map<int64_t, KeyOrderedDict> freq_to_keys_;
  std::unordered_map<CacheEngineKey, int64_t, CacheEngineKeyHash> key_to_freq_;
  // The fix's index: per key, whether the tier holds it and its bucket entry (frequency,
  // sequence number), kept while either is true; per frequency, the entries of held keys in
  // bucket order.
  struct KeyIndex {
    bool held = false;
    bool bucketed = false;
    int64_t freq = 0;
    uint64_t seq = 0;
  };
  void unlist(const KeyIndex& k);  // out of present_
  std::unordered_map<CacheEngineKey, KeyIndex, CacheEngineKeyHash> index_;
  std::map<int64_t, std::map<uint64_t, CacheEngineKey>> present_;
  uint64_t next_seq_ = 0;
  // The fixed scan resumes too: per frequency, the token under which the scan proved every entry
  // of present_[freq] up to sequence number last_seq failing. Entries arrive with new, larger
  // sequence numbers, except a bucketed key the tier holds again (on_tier_insert), which drops
  // the prefix it falls in.
  struct FailingPrefix {
    uint64_t token = 0;
    uint64_t last_seq = 0;
  };
  std::map<int64_t, FailingPrefix> failing_prefix_;
};

}  // namespace kvtwin::model::lmcache
