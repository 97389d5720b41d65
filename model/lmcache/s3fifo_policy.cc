#include "model/lmcache/s3fifo_policy.h"

#include <algorithm>

namespace kvtwin::model::lmcache {
namespace {
constexpr uint32_t kMaxFreq = 3;
}

void S3FIFOCachePolicy::update_on_hit(const CacheEngineKey& key, KeyOrderedDict& /*dict*/) {
  for (KeyOrderedDict* q : {&small_, &main_}) {
    if (const uint32_t* f = q->find(key)) {
      q->set(key, std::min(*f + 1, kMaxFreq));
      return;
    }
  }
}

void S3FIFOCachePolicy::update_on_put(const CacheEngineKey& key) {
  if (small_.contains(key) || main_.contains(key)) return;
  if (ghost_.pop(key)) {
    main_.set(key, 0);
  } else {
    small_.set(key, 0);
  }
}

void S3FIFOCachePolicy::update_on_force_evict(const CacheEngineKey& key) {
  small_.pop(key);
  main_.pop(key);
}

void S3FIFOCachePolicy::on_tier_erase(const CacheEngineKey& key) {
  small_.pop(key);
  main_.pop(key);
}

void S3FIFOCachePolicy::add_ghost(const CacheEngineKey& key) {
  ghost_.set(key, 0);
  size_t cap = std::max<size_t>(1, small_.size() + main_.size());
  while (ghost_.size() > cap) ghost_.pop(ghost_.key_at(ghost_.first()));
}

std::optional<CacheEngineKey> S3FIFOCachePolicy::evict_one(const KeyOrderedDict& dict,
                                                           const CanEvictFn& can_evict) {
  size_t budget = 5 * (small_.size() + main_.size());
  while (budget-- > 0 && (!small_.empty() || !main_.empty())) {
    size_t total = small_.size() + main_.size();
    bool from_small = !small_.empty() && (main_.empty() || small_.size() * 10 >= total);
    KeyOrderedDict& q = from_small ? small_ : main_;
    CacheEngineKey key = q.key_at(q.first());
    uint32_t freq = q.value_at(q.first());
    const uint32_t* value = dict.find(key);
    if (value == nullptr || !can_evict(*value)) {  // not in the tier yet, or held
      q.move_to_end(key);
      continue;
    }
    if (from_small) {
      q.pop(key);
      if (freq > 1) {
        main_.set(key, 0);
        continue;
      }
      add_ghost(key);
      return key;
    }
    if (freq > 0) {
      q.set(key, freq - 1);
      q.move_to_end(key);
      continue;
    }
    q.pop(key);
    return key;
  }
  return std::nullopt;
}

std::vector<CacheEngineKey> S3FIFOCachePolicy::get_evict_candidates(const KeyOrderedDict& dict,
                                                                    int num_candidates,
                                                                    const CanEvictFn& can_evict) {
  std::vector<CacheEngineKey> out;
  while (static_cast<int>(out.size()) < num_candidates) {
    auto k = evict_one(dict, can_evict);
    if (!k) break;
    out.push_back(*k);
  }
  return out;
}

}  // namespace kvtwin::model::lmcache
