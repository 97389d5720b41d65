// CachePolicy: how a tier orders its entries and picks eviction victims
// (storage_backend/cache_policy/). The tier owns the dict of its entries (a KeyOrderedDict, oldest
// first); the policy may reorder it on hits and may keep its own tables.
//
//   policy  dict order      update_on_put     update_on_hit        get_evict_candidates(n)
//   LRU     insertion       -                 move_to_end          oldest evictable first
//   MRU     insertion       -                 move_to_end          newest evictable first
//   FIFO    insertion       -                 -                    oldest evictable first
//   LFU     insertion       freq = 1          freq += 1            lowest freq, FIFO within a
//                                                                  freq; drops chosen keys from
//                                                                  its own tables at once
//   S3FIFO  (extension beyond upstream, see s3fifo_policy.h)
//
// update_on_force_evict is called only for explicit removals; the eviction path of the tiers
// removes victims with force=false, so a policy is not told about them (only LFU, which dropped
// them itself while choosing, stays consistent).
//
// Errors: where upstream raises KeyError (move_to_end of a missing key, a frequency lookup of an
// unknown key, a bucket entry whose key is not in the tier) the policy throws
// UpstreamError(kKeyError); see Quirks::lfu_stale_bucket_entries.
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/lmcache/cache_engine_key.h"
#include "model/lmcache/config.h"
#include "model/lmcache/key_ordered_dict.h"

namespace kvtwin::model::lmcache {

// can_evict of the tier's value for a dict entry, and optionally a token (nonzero) naming the
// predicate together with the tier state it reads. The caller promises: an entry that failed the
// predicate fails it again under the same token (unless the dict itself reassigned its value).
// The dict-order policies then resume their walks past entries known to fail (KeyOrderedDict's
// failing run); token 0 promises nothing.
class CanEvictFn {
 public:
  template <typename F>
  requires(!std::same_as<std::decay_t<F>, CanEvictFn> &&
           std::is_invocable_r_v<bool, const F&, uint32_t>)
      CanEvictFn(F fn, uint64_t token = 0)  // NOLINT(google-explicit-constructor): a callable
      : fn_(std::move(fn)), token_(token) {}
  bool operator()(uint32_t value) const { return fn_(value); }
  uint64_t token() const { return token_; }

 private:
  std::function<bool(uint32_t value)> fn_;
  uint64_t token_ = 0;
};

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;
  virtual CachePolicyKind kind() const = 0;
  virtual void update_on_hit(const CacheEngineKey& key, KeyOrderedDict& dict) = 0;
  virtual void update_on_put(const CacheEngineKey& key) = 0;
  virtual void update_on_force_evict(const CacheEngineKey& key) = 0;
  // Up to num_candidates keys, in eviction order.
  virtual std::vector<CacheEngineKey> get_evict_candidates(const KeyOrderedDict& dict,
                                                           int num_candidates,
                                                           const CanEvictFn& can_evict) = 0;
  // The first of get_evict_candidates(dict, 1, can_evict), with the same effects on the policy,
  // or nullopt. Callers evict one key per round; the dict-order policies override this to walk
  // the dict without building a vector.
  virtual std::optional<CacheEngineKey> get_evict_candidate(const KeyOrderedDict& dict,
                                                            const CanEvictFn& can_evict) {
    std::vector<CacheEngineKey> v = get_evict_candidates(dict, 1, can_evict);
    if (v.empty()) return std::nullopt;
    return std::move(v.front());
  }
  // The tier's dict gained or lost `key` (its owner calls these at every insert of a new key and
  // every removal). Only LFU keeps track (its buckets hold keys the tier does not hold yet).
  virtual void on_tier_insert(const CacheEngineKey& /*key*/) {}
  virtual void on_tier_erase(const CacheEngineKey& /*key*/) {}
  // LFU: (frequency, keys) buckets in ascending frequency, each in bucket order (stale entries
  // included). Empty for the other policies.
  virtual std::vector<std::pair<int64_t, std::vector<CacheEngineKey>>> frequency_buckets() const {
    return {};
  }
};

// LRU, FIFO and MRU: the victims are the dict's evictable keys in dict order, oldest first or
// (MRU) newest first; the three differ only in what a hit does to the order. Under a nonzero
// token the walk jumps over the dict's failing run and records, at its first evictable key, the
// run of keys it proved failing from its starting end.
class DictOrderCachePolicy : public CachePolicy {
 public:
  std::vector<CacheEngineKey> get_evict_candidates(const KeyOrderedDict& dict, int num_candidates,
                                                   const CanEvictFn& can_evict) override;
  // The same walk, stopped at the first evictable key: no vector is built.
  std::optional<CacheEngineKey> get_evict_candidate(const KeyOrderedDict& dict,
                                                    const CanEvictFn& can_evict) override;

 protected:
  explicit DictOrderCachePolicy(bool newest_first) : newest_first_(newest_first) {}

 private:
  // Calls take(key) for each evictable key in eviction order until it returns true.
  template <typename Take>
  void for_each_evictable(const KeyOrderedDict& dict, const CanEvictFn& can_evict, Take take) const;

  bool newest_first_;
};

std::unique_ptr<CachePolicy> make_cache_policy(CachePolicyKind kind, const Quirks& quirks);

}  // namespace kvtwin::model::lmcache
