// KeyOrderedDict: Python's insertion-ordered dict / OrderedDict keyed by CacheEngineKey, with a
// 32-bit value (the tier's handle of its entry).
//
// Semantics kept from Python: assigning an existing key keeps its position; pop removes without
// disturbing the others; move_to_end moves to the most-recent end (or the front with last=false)
// and fails on a missing key (KeyError upstream). Iteration is oldest -> newest and can run
// backwards (reversed(dict.items())).
//
// Storage: nodes in a vector linked by indices, freed nodes reused; lookup through an open-
// addressing index of (key fingerprint, node) pairs, linear probing, at most half full, deletion
// by backward shift (no tombstones). A probe compares the fingerprint first and the node's key
// only on a match:
//
//   index_:  | fp 91c3.., node 4 | empty | fp 07aa.., node 0 | fp 07aa.., node 7 | empty | ...
//            home slot of a key = mix(fingerprint) & mask; a run holds keys whose home is at or
//            before it, so a lookup stops at the first empty slot.
//
// Order never depends on the index.
//
// Resumable walks. The dict-order eviction policies walk from one end to the first entry that
// passes their owner's predicate (can_evict), and a tier full of entries it may not evict (held
// by pending writes, pinned) makes every walk step over the same entries again. An owner that can
// name its predicate together with the state the predicate reads by a token (nonzero; a new token
// whenever an entry may have started to pass) lets the dict keep one run of adjacent entries that
// failed it:
//
//   oldest ... [run_first .. run_last] ... newest     every entry in the run failed under run_token
//
// A walk that meets an end of the run jumps over it, and records the run it proved (see
// walk_past_failing_run). The dict keeps the run on its entries: an end that is popped or moved
// away moves inward (the run empties when its last entry goes), interior entries may leave, new
// entries arrive outside it; reassigning a value or clear() drops it. Entries failing the
// predicate stay failing under an unchanged token, and the run's order is the dict's, so a walk
// that jumps visits the same passing entries in the same order as one that does not.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "model/check.h"
#include "model/lmcache/cache_engine_key.h"

namespace kvtwin::model::lmcache {

class KeyOrderedDict {
 public:
  static constexpr uint32_t kEnd = UINT32_MAX;

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool contains(const CacheEngineKey& key) const { return find_slot(key) != kEnd; }
  // The value, or nullptr.
  const uint32_t* find(const CacheEngineKey& key) const {
    uint32_t i = find_slot(key);
    return i == kEnd ? nullptr : &nodes_[index_[i].node].value;
  }
  // dict[key] = value: a new key goes to the end; an existing key keeps its place.
  void set(const CacheEngineKey& key, uint32_t value) {
    if (uint32_t i = find_slot(key); i != kEnd) {
      if (nodes_[index_[i].node].value != value) drop_run();
      nodes_[index_[i].node].value = value;
      return;
    }
    if (2 * (count_ + 1) > index_.size()) grow();
    uint32_t n = new_node();
    nodes_[n].key = key;
    nodes_[n].value = value;
    link_back(n);
    insert_index(key.fingerprint(), n);
    ++count_;
  }
  std::optional<uint32_t> pop(const CacheEngineKey& key) {
    uint32_t i = find_slot(key);
    if (i == kEnd) return std::nullopt;
    uint32_t n = index_[i].node;
    erase_index(i);
    --count_;
    leave_run(n);
    unlink(n);
    uint32_t v = nodes_[n].value;
    free_.push_back(n);
    return v;
  }
  // False when the key is absent.
  bool move_to_end(const CacheEngineKey& key, bool last = true) {
    uint32_t i = find_slot(key);
    if (i == kEnd) return false;
    uint32_t n = index_[i].node;
    leave_run(n);
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
    count_ = 0;
    head_ = tail_ = kEnd;
    drop_run();
  }

  // The failing run under `token`: {first, last} nodes, or {kEnd, kEnd} when there is none (or it
  // was recorded under another token). REQUIRES: token != 0.
  std::pair<uint32_t, uint32_t> failing_run(uint64_t token) const {
    if (token != run_token_) return {kEnd, kEnd};
    return {run_first_, run_last_};
  }
  // Records that every entry from `first` to `last` (dict order, both present) failed the
  // predicate named by `token`; replaces the run kept so far. REQUIRES: token != 0.
  void note_failing_run(uint64_t token, uint32_t first, uint32_t last) const {
    run_token_ = token;
    run_first_ = first;
    run_last_ = last;
  }
  // Forgets the run: for an owner whose walks read another dict's values (LFU's buckets), when
  // one of the run's keys may have changed there in a way no token names.
  void forget_failing_run() const { note_failing_run(0, kEnd, kEnd); }

  // The resumable walk: from the oldest node (newest_first: the newest) over every node, jumping
  // over the failing run under `token` (token 0: no run, nothing recorded), calls take(n) for each
  // node with passes(n) until take returns true; at the first passing node (or the end) it records
  // the run it proved failing from its start. passes may throw: nothing is recorded then.
  template <typename Passes, typename Take>
  void walk_past_failing_run(uint64_t token, bool newest_first, Passes passes, Take take) const {
    // Walking forward the run is entered at its first node and left after its last; backward the
    // other way round.
    auto [enter, leave] = token == 0 ? std::pair{kEnd, kEnd} : failing_run(token);
    if (newest_first) std::swap(enter, leave);
    const uint32_t start = newest_first ? last() : first();
    uint32_t last_failed = kEnd;  // the walk proved [start, last_failed] failing
    bool noted = token == 0;
    auto note = [&] {  // once, at the first passing node or at the end
      if (!noted && last_failed != kEnd) {
        if (newest_first) {
          note_failing_run(token, last_failed, start);
        } else {
          note_failing_run(token, start, last_failed);
        }
      }
      noted = true;
    };
    for (uint32_t n = start; n != kEnd; n = newest_first ? prev(n) : next(n)) {
      if (n == enter) {
        last_failed = n = leave;
      } else if (!passes(n)) {
        last_failed = n;
      } else {
        note();
        if (take(n)) return;
      }
    }
    note();
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

  struct Slot {
    uint64_t fp = 0;
    uint32_t node = kEnd;  // kEnd: empty
  };
  size_t home(uint64_t fp) const {
    return static_cast<size_t>((fp * 0x9e3779b97f4a7c15ULL) >> 17) & (index_.size() - 1);
  }
  // The index slot holding `key`, or kEnd.
  uint32_t find_slot(const CacheEngineKey& key) const {
    if (count_ == 0) return kEnd;
    const uint64_t fp = key.fingerprint();
    const size_t mask = index_.size() - 1;
    for (size_t i = home(fp);; i = (i + 1) & mask) {
      const Slot& s = index_[i];
      if (s.node == kEnd) return kEnd;
      if (s.fp == fp && nodes_[s.node].key == key) return static_cast<uint32_t>(i);
    }
  }
  void insert_index(uint64_t fp, uint32_t node) {
    const size_t mask = index_.size() - 1;
    size_t i = home(fp);
    while (index_[i].node != kEnd) i = (i + 1) & mask;
    index_[i] = Slot{fp, node};
  }
  // Backward shift: later members of the run move into the hole unless their home lies
  // cyclically in (hole, their slot].
  void erase_index(size_t hole) {
    const size_t mask = index_.size() - 1;
    for (size_t j = (hole + 1) & mask; index_[j].node != kEnd; j = (j + 1) & mask) {
      size_t h = home(index_[j].fp);
      bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays) continue;
      index_[hole] = index_[j];
      hole = j;
    }
    index_[hole] = Slot{};
  }
  void grow() {
    std::vector<Slot> old = std::move(index_);
    index_.assign(std::max<size_t>(16, 2 * old.size()), Slot{});
    for (const Slot& s : old)
      if (s.node != kEnd) insert_index(s.fp, s.node);
  }

  // Node n leaves its place (popped or moved): a run end moves inward.
  void leave_run(uint32_t n) {
    if (n == run_first_) {
      if (n == run_last_) {
        drop_run();
      } else {
        run_first_ = nodes_[n].next;
      }
    } else if (n == run_last_) {
      run_last_ = nodes_[n].prev;
    }
  }
  void drop_run() { note_failing_run(0, kEnd, kEnd); }

  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  std::vector<Slot> index_;  // size 0 or a power of two, at most half full
  size_t count_ = 0;
  uint32_t head_ = kEnd;
  uint32_t tail_ = kEnd;
  // The failing run (see the header); run_token_ 0: none. Walks record it through a const dict.
  mutable uint64_t run_token_ = 0;
  mutable uint32_t run_first_ = kEnd;
  mutable uint32_t run_last_ = kEnd;
};

}  // namespace kvtwin::model::lmcache
