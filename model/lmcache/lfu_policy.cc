#include "model/lmcache/lfu_policy.h"

#include <utility>

#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

void LFUCachePolicy::bucket_pop(int64_t freq, const CacheEngineKey& key) {
  auto it = freq_to_keys_.find(freq);
  if (it == freq_to_keys_.end()) raise(PyError::kKeyError, "LFU bucket " + std::to_string(freq));
  if (!it->second.pop(key)) raise(PyError::kKeyError, "LFU bucket entry " + key.kid());
  if (it->second.empty()) freq_to_keys_.erase(it);
  if (!stale_) index_drop(freq, key);
}

void LFUCachePolicy::bucket_add(int64_t freq, const CacheEngineKey& key) {
  KeyOrderedDict& bucket = freq_to_keys_[freq];
  const bool appended = !bucket.contains(key);
  bucket.set(key, 0);
  if (stale_ || !appended) return;
  KeyIndex& k = index_[key];
  k.bucketed = true;
  k.freq = freq;
  k.seq = next_seq_++;
  if (k.held) present_[freq].emplace(k.seq, key);
}

void LFUCachePolicy::unlist(const KeyIndex& k) {
  auto p = present_.find(k.freq);
  if (p == present_.end()) return;
  p->second.erase(k.seq);
  if (p->second.empty()) present_.erase(p);
}

void LFUCachePolicy::index_drop(int64_t freq, const CacheEngineKey& key) {
  auto it = index_.find(key);
  if (it == index_.end() || !it->second.bucketed || it->second.freq != freq) return;
  if (it->second.held) {
    unlist(it->second);
    it->second.bucketed = false;
  } else {
    index_.erase(it);
  }
}

void LFUCachePolicy::on_tier_insert(const CacheEngineKey& key) {
  if (stale_) return;
  KeyIndex& k = index_[key];
  if (std::exchange(k.held, true)) return;
  if (!k.bucketed) return;
  present_[k.freq].emplace(k.seq, key);
  auto p = failing_prefix_.find(k.freq);
  if (p != failing_prefix_.end() && k.seq <= p->second.last_seq) failing_prefix_.erase(p);
}

void LFUCachePolicy::on_tier_erase(const CacheEngineKey& key) {
  if (stale_) {
    // A bucket entry whose key left the tier makes upstream's scan raise KeyError when it gets
    // there: a bucket's failing run must not jump over it.
    for (const auto& [freq, bucket] : freq_to_keys_)
      if (bucket.contains(key)) bucket.forget_failing_run();
    return;
  }
  auto it = index_.find(key);
  if (it == index_.end() || !it->second.held) return;
  if (it->second.bucketed) {
    unlist(it->second);
    it->second.held = false;
  } else {
    index_.erase(it);
  }
}

void LFUCachePolicy::update_on_hit(const CacheEngineKey& key, KeyOrderedDict& /*dict*/) {
  auto it = key_to_freq_.find(key);
  if (it == key_to_freq_.end()) raise(PyError::kKeyError, "LFU key_to_freq: " + key.kid());
  int64_t freq = it->second;
  bucket_pop(freq, key);
  it->second = freq + 1;
  bucket_add(freq + 1, key);
}

void LFUCachePolicy::update_on_put(const CacheEngineKey& key) {
  if (!stale_) {
    auto it = key_to_freq_.find(key);
    if (it != key_to_freq_.end()) {
      auto b = freq_to_keys_.find(it->second);
      if (b != freq_to_keys_.end()) {
        b->second.pop(key);
        if (b->second.empty()) freq_to_keys_.erase(b);
      }
      index_drop(it->second, key);
    }
  }
  key_to_freq_[key] = 1;
  bucket_add(1, key);
}

void LFUCachePolicy::update_on_force_evict(const CacheEngineKey& key) {
  auto it = key_to_freq_.find(key);
  if (it == key_to_freq_.end()) return;
  int64_t freq = it->second;
  key_to_freq_.erase(it);
  if (freq == 0) return;  // `if not freq: return`
  bucket_pop(freq, key);
}

std::vector<CacheEngineKey> LFUCachePolicy::get_evict_candidates(const KeyOrderedDict& dict,
                                                                 int num_candidates,
                                                                 const CanEvictFn& can_evict) {
  const uint64_t token = can_evict.token();
  std::vector<CacheEngineKey> keys;
  std::vector<int64_t> freqs;
  // Keeps an evictable key (it leaves key_to_freq at once, its bucket after the scan); true when
  // the scan has num_candidates.
  auto take = [&](int64_t freq, const CacheEngineKey& key) {
    keys.push_back(key);
    freqs.push_back(freq);
    if (key_to_freq_.erase(key) == 0) raise(PyError::kKeyError, "LFU key_to_freq: " + key.kid());
    return static_cast<int>(keys.size()) == num_candidates;
  };
  auto finish = [&] {
    for (size_t i = 0; i < keys.size(); ++i) bucket_pop(freqs[i], keys[i]);
    return std::move(keys);
  };
  if (!stale_) {
    // The fix: the index holds exactly the bucket entries whose key the tier holds, in order.
    // Under a nonzero token each frequency's scan starts after its failing prefix.
    for (const auto& [freq, held] : present_) {
      auto it = held.begin();
      bool failed = false;  // the scan proved held's entries up to last_failed failing
      uint64_t last_failed = 0;
      if (token != 0) {
        auto p = failing_prefix_.find(freq);
        if (p != failing_prefix_.end() && p->second.token == token) {
          it = held.upper_bound(p->second.last_seq);
          failed = true;
          last_failed = p->second.last_seq;
        }
      }
      bool noted = token == 0;
      auto note = [&, f = freq] {  // once per frequency, at its first evictable key or its end
        if (!noted && failed) failing_prefix_[f] = FailingPrefix{token, last_failed};
        noted = true;
      };
      for (; it != held.end(); ++it) {
        const auto& [seq, key] = *it;
        const uint32_t* value = dict.find(key);
        KVTWIN_CHECK(value != nullptr) << "LFU index: " << key.kid() << " is not in the tier";
        if (!can_evict(*value)) {
          failed = true;
          last_failed = seq;
          continue;
        }
        note();
        if (take(freq, key)) return finish();
      }
      note();
    }
    return finish();
  }
  // Upstream's scan, bucket by bucket, each a resumable walk (KeyOrderedDict): the bucket's
  // failing run holds keys the tier held when it was proved, and on_tier_erase forgets the runs of
  // a key that leaves, so the walk meets, and raises KeyError on, every stale entry a scan of
  // every entry would.
  for (const auto& [freq, bucket] : freq_to_keys_) {
    bool full = false;
    bucket.walk_past_failing_run(
        token, /*newest_first=*/false,
        [&](uint32_t n) {
          const uint32_t* value = dict.find(bucket.key_at(n));
          if (value == nullptr)
            raise(PyError::kKeyError, "LFU candidate not in the tier: " + bucket.key_at(n).kid());
          return can_evict(*value);
        },
        [&, f = freq](uint32_t n) { return full = take(f, bucket.key_at(n)); });
    if (full) break;
  }
  return finish();
}

std::vector<std::pair<int64_t, std::vector<CacheEngineKey>>> LFUCachePolicy::frequency_buckets()
    const {
  std::vector<std::pair<int64_t, std::vector<CacheEngineKey>>> out;
  for (const auto& [freq, bucket] : freq_to_keys_) out.emplace_back(freq, bucket.keys());
  return out;
}

}  // namespace kvtwin::model::lmcache
