#include "model/lmcache/lfu_policy.h"

#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

void LFUCachePolicy::bucket_pop(int64_t freq, const CacheEngineKey& key) {
  auto it = freq_to_keys_.find(freq);
  if (it == freq_to_keys_.end()) raise(PyError::kKeyError, "LFU bucket " + std::to_string(freq));
  if (!it->second.pop(key)) raise(PyError::kKeyError, "LFU bucket entry " + key.kid());
  if (it->second.empty()) freq_to_keys_.erase(it);
}

void LFUCachePolicy::bucket_add(int64_t freq, const CacheEngineKey& key) {
  freq_to_keys_[freq].set(key, 0);
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
  std::vector<CacheEngineKey> keys;
  std::vector<int64_t> freqs;
  for (const auto& [freq, bucket] : freq_to_keys_) {
    for (uint32_t n = bucket.first(); n != KeyOrderedDict::kEnd; n = bucket.next(n)) {
      const CacheEngineKey& key = bucket.key_at(n);
      const uint32_t* value = dict.find(key);
      if (value == nullptr) {
        if (stale_) raise(PyError::kKeyError, "LFU candidate not in the tier: " + key.kid());
        continue;
      }
      if (!can_evict(*value)) continue;
      keys.push_back(key);
      freqs.push_back(freq);
      if (key_to_freq_.erase(key) == 0) raise(PyError::kKeyError, "LFU key_to_freq: " + key.kid());
      if (static_cast<int>(keys.size()) == num_candidates) break;
    }
    if (static_cast<int>(keys.size()) == num_candidates) break;
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
