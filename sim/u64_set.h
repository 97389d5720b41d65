// U64Set: a set of 64-bit integers in one flat array (open addressing, linear probing,
// backward-shift deletion), for the instances' prefix index and the simulator's cancelled events:
// millions of inserts and erases per run, where std::unordered_set paid one allocation and one
// modulo each.
//
// Same contract as std::unordered_set<uint64_t> for insert / erase / contains / clear / size,
// with no iteration (so no order can leak into an output).
//
// Invariants: slots_.size() is a power of two and more than twice size_ (probe chains stay
// short); a slot holds kEmpty or a key; every key lies on the probe chain from its home slot with
// no kEmpty slot in between. The key kEmpty itself is kept in has_empty_key_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtwin::sim {

class U64Set {
 public:
  U64Set() : slots_(kMinSlots, kEmpty) {}

  size_t size() const { return size_ + (has_empty_key_ ? 1 : 0); }

  bool contains(uint64_t key) const {
    if (key == kEmpty) return has_empty_key_;
    for (size_t i = home(key);; i = (i + 1) & mask()) {
      if (slots_[i] == key) return true;
      if (slots_[i] == kEmpty) return false;
    }
  }

  // A demand load (changes nothing): reads the home slot of `key` and returns it for the caller
  // to consume (e.g. an asm sink). A pass of these over a run of scattered keys before inserting
  // or erasing them lets the core overlap the run's cache misses; on the development VM (AMD
  // EPYC) prefetch hints did not (see BlockHashToBlockMap::warm_pop).
  uint64_t warm(uint64_t key) const { return slots_[home(key)]; }
  // Returns true when the key was not there.
  bool insert(uint64_t key) {
    if (key == kEmpty) {
      bool added = !has_empty_key_;
      has_empty_key_ = true;
      return added;
    }
    if (2 * (size_ + 1) >= slots_.size()) grow();
    size_t i = home(key);
    for (; slots_[i] != kEmpty; i = (i + 1) & mask())
      if (slots_[i] == key) return false;
    slots_[i] = key;
    ++size_;
    return true;
  }

  // Returns true when the key was there.
  bool erase(uint64_t key) {
    if (key == kEmpty) {
      bool had = has_empty_key_;
      has_empty_key_ = false;
      return had;
    }
    size_t i = home(key);
    for (;; i = (i + 1) & mask()) {
      if (slots_[i] == kEmpty) return false;
      if (slots_[i] == key) break;
    }
    // Backward shift: pull later members of the chain into the hole when the hole lies on
    // their probe path (between their home and their slot, cyclically).
    size_t hole = i;
    for (size_t j = (hole + 1) & mask(); slots_[j] != kEmpty; j = (j + 1) & mask()) {
      size_t h = home(slots_[j]);
      if (((j - h) & mask()) >= ((j - hole) & mask())) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = kEmpty;
    --size_;
    return true;
  }

  void clear() {
    slots_.assign(kMinSlots, kEmpty);
    size_ = 0;
    has_empty_key_ = false;
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static constexpr size_t kMinSlots = 64;

  size_t mask() const { return slots_.size() - 1; }
  size_t home(uint64_t key) const {
    // Fibonacci hashing: the high bits of the product are well mixed even for regular keys.
    unsigned shift = 64 - static_cast<unsigned>(__builtin_ctzll(slots_.size()));
    return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift);
  }
  void grow() {
    std::vector<uint64_t> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, kEmpty);
    for (uint64_t k : old) {
      if (k == kEmpty) continue;
      size_t i = home(k);
      while (slots_[i] != kEmpty) i = (i + 1) & mask();
      slots_[i] = k;
    }
  }

  std::vector<uint64_t> slots_;
  size_t size_ = 0;
  bool has_empty_key_ = false;
};

}  // namespace kvtwin::sim
