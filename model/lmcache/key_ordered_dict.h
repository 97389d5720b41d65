// KeyOrderedDict: Python's insertion-ordered dict / OrderedDict keyed by CacheEngineKey, with a
// 32-bit value (the tier's handle of its entry).
//
// Semantics kept from Python: assigning an existing key keeps its position; pop removes without
// disturbing the others; move_to_end moves to the most-recent end (or the front with last=false)
// and fails on a missing key (KeyError upstream). Iteration is oldest -> newest and can run
// backwards (reversed(dict.items())).
//
// Storage: nodes in a vector linked by indices, freed nodes reused; lookup by an unordered_map from
// key to node. Order never depends on the hash map.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "model/check.h"
#include "model/lmcache/cache_engine_key.h"

namespace kvtwin::model::lmcache {

class KeyOrderedDict {
 public:
  static constexpr uint32_t kEnd = UINT32_MAX;

  size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  bool contains(const CacheEngineKey& key) const { return index_.count(key) != 0; }
  // The value, or nullptr.
  const uint32_t* find(const CacheEngineKey& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &nodes_[it->second].value;
  }
  // dict[key] = value: a new key goes to the end; an existing key keeps its place.
  void set(const CacheEngineKey& key, uint32_t value) {
    auto [it, inserted] = index_.try_emplace(key, kEnd);
    if (!inserted) {
      nodes_[it->second].value = value;
      return;
    }
    uint32_t n = new_node();
    nodes_[n].key = key;
    nodes_[n].value = value;
    link_back(n);
    it->second = n;
  }
  std::optional<uint32_t> pop(const CacheEngineKey& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    uint32_t n = it->second;
    index_.erase(it);
    unlink(n);
    uint32_t v = nodes_[n].value;
    free_.push_back(n);
    return v;
  }
  // False when the key is absent.
  bool move_to_end(const CacheEngineKey& key, bool last = true) {
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    uint32_t n = it->second;
    unlink(n);
    if (last) {
      link_back(n);
    } else {
      link_front(n);
    }
    return true;
  }
  void clear() {
    nodes_.clear();
    free_.clear();
    index_.clear();
    head_ = tail_ = kEnd;
  }

  // Node iteration: first() .. next(n) .. kEnd; last() .. prev(n) .. kEnd.
  uint32_t first() const { return head_; }
  uint32_t last() const { return tail_; }
  uint32_t next(uint32_t n) const { return nodes_[n].next; }
  uint32_t prev(uint32_t n) const { return nodes_[n].prev; }
  const CacheEngineKey& key_at(uint32_t n) const { return nodes_[n].key; }
  uint32_t value_at(uint32_t n) const { return nodes_[n].value; }

  std::vector<CacheEngineKey> keys() const {
    std::vector<CacheEngineKey> out;
    out.reserve(size());
    for (uint32_t n = head_; n != kEnd; n = nodes_[n].next) out.push_back(nodes_[n].key);
    return out;
  }

 private:
  struct Node {
    CacheEngineKey key;
    uint32_t value = 0;
    uint32_t prev = kEnd;
    uint32_t next = kEnd;
  };
  uint32_t new_node() {
    if (!free_.empty()) {
      uint32_t n = free_.back();
      free_.pop_back();
      return n;
    }
    nodes_.emplace_back();
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  void link_back(uint32_t n) {
    nodes_[n].prev = tail_;
    nodes_[n].next = kEnd;
    if (tail_ != kEnd) {
      nodes_[tail_].next = n;
    } else {
      head_ = n;
    }
    tail_ = n;
  }
  void link_front(uint32_t n) {
    nodes_[n].next = head_;
    nodes_[n].prev = kEnd;
    if (head_ != kEnd) {
      nodes_[head_].prev = n;
    } else {
      tail_ = n;
    }
    head_ = n;
  }
  void unlink(uint32_t n) {
    Node& x = nodes_[n];
    if (x.prev != kEnd) {
      nodes_[x.prev].next = x.next;
    } else {
      head_ = x.next;
    }
    if (x.next != kEnd) {
      nodes_[x.next].prev = x.prev;
    } else {
      tail_ = x.prev;
    }
    x.prev = x.next = kEnd;
  }

  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  std::unordered_map<CacheEngineKey, uint32_t, CacheEngineKeyHash> index_;
  uint32_t head_ = kEnd;
  uint32_t tail_ = kEnd;
};

}  // namespace kvtwin::model::lmcache
