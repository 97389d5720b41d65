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
  if (k.bucketed) present_[k.freq].emplace(k.seq, key);
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

// Offers each (frequency, key, the tier's value) that `walk` yields to `offer`, which keeps the
// first num_candidates evictable keys (they leave key_to_freq at once, their buckets after the
// walk) and stops the walk when it has them.
template <typename Walk>
std::vector<CacheEngineKey> LFUCachePolicy::take_candidates(int num_candidates,
                                                            const CanEvictFn& can_evict,
                                                            Walk walk) {
  std::vector<CacheEngineKey> keys;
  std::vector<int64_t> freqs;
  walk([&](int64_t freq, const CacheEngineKey& key, uint32_t value) {
    if (!can_evict(value)) return false;
    keys.push_back(key);
    freqs.push_back(freq);
    if (key_to_freq_.erase(key) == 0) raise(PyError::kKeyError, "LFU key_to_freq: " + key.kid());
    return static_cast<int>(keys.size()) == num_candidates;
  });
  for (size_t i = 0; i < keys.size(); ++i) bucket_pop(freqs[i], keys[i]);
  return keys;
}

std::vector<CacheEngineKey> LFUCachePolicy::get_evict_candidates(const KeyOrderedDict& dict,
                                                                 int num_candidates,
                                                                 const CanEvictFn& can_evict) {
  if (!stale_) {
    // The fix: the index holds exactly the bucket entries whose key the tier holds, in order.
    return take_candidates(num_candidates, can_evict, [&](const auto& offer) {
      for (const auto& [freq, held] : present_) {
        for (const auto& [seq, key] : held) {
          const uint32_t* value = dict.find(key);
          KVTWIN_CHECK(value != nullptr) << "LFU index: " << key.kid() << " is not in the tier";
          if (offer(freq, key, *value)) return;
        }
      }
    });
  }
  // Upstream's scan, bucket by bucket. Under a nonzero token each bucket keeps the run of entries
  // from its front that the last scan proved failing (KeyOrderedDict's failing run; every key in
  // it is in the tier, on_tier_erase forgets the runs of a key that leaves), and a scan jumps over
  // it: the same victims, and the same KeyError, as a scan of every entry.
  constexpr uint32_t kEnd = KeyOrderedDict::kEnd;
  const uint64_t token = can_evict.token();
  std::vector<CacheEngineKey> keys;
  std::vector<int64_t> freqs;
  bool done = false;
  for (const auto& [freq, bucket] : freq_to_keys_) {
    if (done) break;
    const auto [enter, leave] = token == 0 ? std::pair{kEnd, kEnd} : bucket.failing_run(token);
    const uint32_t start = bucket.first();
    uint32_t last_failed = kEnd;  // the scan proved [start, last_failed] failing
    bool noted = token == 0;
    auto note = [&] {  // once per bucket, at its first evictable key or at its end
      if (!noted && last_failed != kEnd) bucket.note_failing_run(token, start, last_failed);
      noted = true;
    };
    for (uint32_t n = start; n != kEnd; n = bucket.next(n)) {
      if (n == enter) {
        last_failed = n = leave;
        continue;
      }
      const CacheEngineKey& key = bucket.key_at(n);
      const uint32_t* value = dict.find(key);
      if (value == nullptr)
        raise(PyError::kKeyError, "LFU candidate not in the tier: " + key.kid());
      if (!can_evict(*value)) {
        last_failed = n;
        continue;
      }
      note();
      keys.push_back(key);
      freqs.push_back(freq);
      if (key_to_freq_.erase(key) == 0) raise(PyError::kKeyError, "LFU key_to_freq: " + key.kid());
      if (static_cast<int>(keys.size()) == num_candidates) {
        done = true;
        break;
      }
    }
    note();
  }
  for (size_t i = 0; i < keys.size(); ++i) bucket_pop(freqs[i], keys[i]);
  return keys;
}

std::vector<std::pair<int64_t, std::vector<CacheEngineKey>>> LFUCachePolicy::frequency_buckets()
    const {
  std::vector<std::pair<int64_t, std::vector<CacheEngineKey>>> out;
  for (const auto& [freq, bucket] : freq_to_keys_) out.emplace_back(freq, bucket.keys());
  return out;
}

}  // namespace kvtwin::model::lmcache
