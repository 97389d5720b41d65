// S3FIFOCachePolicy — an EXTENSION beyond upstream f4261ef6 (LMCache gained an S3-FIFO policy in
// July 2026; this is the algorithm of Yang et al., SOSP 2023, in the CachePolicy interface, not a
// port of that later code).
//
//   small FIFO S (target 10% of the entries), main FIFO M, ghost FIFO G (keys only, at most as
//   many as S + M hold);  freq per key in 0..3, a hit adds 1.
//   put(k):    into M if k is in G (k leaves G), else into S
//   evict:     while no victim: if |S| >= 10% of |S|+|M| (or M is empty) take S's head:
//                freq > 1 -> move to M with freq 0; else victim (its key goes to G)
//              otherwise take M's head: freq > 0 -> freq -= 1, back to M's tail; else victim
//   An entry that cannot be evicted (pinned, referenced) goes back to its queue's tail unchanged;
//   so does a key the tier does not hold yet (the disk tier puts a key in its policy when the
//   write is submitted and in its dict when the write completes); after 5 * (|S| + |M|) steps
//   without a victim the scan gives up (nothing evictable).
//   A key leaves S and M when the tier erases it (on_tier_erase; a victim has left already).
// The tier's dict order is not used and not changed.
//
// Stop 30: the scan used to forget a key it did not find in the tier ("dropped behind our
// back"). A disk write still pending is such a key: forgotten, it was never a victim again once
// written, so the disk filled with entries no scan would evict and rejected later puts (with
// lmcache.upstream_fixes, a 20-minute 8B run with a 20-GiB disk wrote 1.16 TB to it against
// LRU's 3.06 TB; 3.33 TB now).
#pragma once

#include "model/lmcache/cache_policy.h"

namespace kvtwin::model::lmcache {

class S3FIFOCachePolicy final : public CachePolicy {
 public:
  CachePolicyKind kind() const override { return CachePolicyKind::kS3Fifo; }
  void update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) override;
  void update_on_put(const CacheEngineKey& key) override;
  void update_on_force_evict(const CacheEngineKey& key) override;
  void on_tier_erase(const CacheEngineKey& key) override;
  std::vector<CacheEngineKey> get_evict_candidates(const KeyOrderedDict& dict, int num_candidates,
                                                   const CanEvictFn& can_evict) override;

  size_t small_size() const { return small_.size(); }
  size_t main_size() const { return main_.size(); }
  size_t ghost_size() const { return ghost_.size(); }

 private:
  std::optional<CacheEngineKey> evict_one(const KeyOrderedDict& dict, const CanEvictFn& can_evict);
  void add_ghost(const CacheEngineKey& key);

  KeyOrderedDict small_;  // value: freq
  KeyOrderedDict main_;   // value: freq
  KeyOrderedDict ghost_;
};

}  // namespace kvtwin::model::lmcache
