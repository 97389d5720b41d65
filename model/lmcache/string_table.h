// StringTable<V>: a hash table from strings to V for the keyspaces the model holds by name — the
// local_disk directory (file names) and the Redis keyspace (key strings) — which reach millions of
// keys in long runs.
//
// Storage: an open-addressing index (linear probing, backward-shift deletion) of 16-byte slots
// (64-bit key hash, entry number) over a side table of entries (key, value) whose freed numbers
// are reused:
//
//   slots_:   | h=91c3.., e=4 | empty | h=07aa.., e=0 | h=07aa.., e=7 | empty | ...
//   entries_: e=0 {"model@1@0@<kid>@bf16.pt", v} ... e=4 {...} ... e=7 {...}
//
// A lookup walks one slot run (four slots per cache line) and compares a key only where the
// stored hash matches; deletion shifts plain 16-byte slots, never strings. Invariants:
//   - every live key's slot sits in the probe run starting at its home slot (hash & mask) with
//     no empty slot in between, and names the entry holding that key;
//   - live count * 2 <= capacity (grown by doubling before an insert would pass it);
//   - capacity is a power of two (or zero before the first insert);
//   - an entry is live iff exactly one slot names it; free_ lists the others.
// Iteration order (for_each) is the slot order: callers that print must sort.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvtwin::model::lmcache {

template <typename V>
class StringTable {
 public:
  // The value of `key`, value-initialised when absent.
  V& upsert(std::string key) {
    if ((live_ + 1) * 2 > slots_.size()) grow();
    const uint64_t h = hash_of(key);
    Slot& s = slots_[probe(key, h)];
    if (s.entry == kEmpty) {
      uint32_t e;
      if (free_.empty()) {
        e = static_cast<uint32_t>(entries_.size());
        entries_.emplace_back();
      } else {
        e = free_.back();
        free_.pop_back();
      }
      entries_[e].key = std::move(key);
      s = Slot{h, e};
      ++live_;
    }
    return entries_[s.entry].value;
  }

  // The value, or nullptr; valid until the next upsert or erase.
  V* find(std::string_view key) {
    if (live_ == 0) return nullptr;
    const Slot& s = slots_[probe(key, hash_of(key))];
    return s.entry == kEmpty ? nullptr : &entries_[s.entry].value;
  }
  const V* find(std::string_view key) const { return const_cast<StringTable*>(this)->find(key); }

  // Removes `key`; false when absent.
  bool erase(std::string_view key) {
    if (live_ == 0) return false;
    size_t hole = probe(key, hash_of(key));
    const uint32_t e = slots_[hole].entry;
    if (e == kEmpty) return false;
    entries_[e] = Entry{};
    free_.push_back(e);
    // Backward shift: pull later members of the run into the hole when their home slot allows it.
    const size_t mask = slots_.size() - 1;
    for (size_t j = (hole + 1) & mask; slots_[j].entry != kEmpty; j = (j + 1) & mask) {
      const size_t home = slots_[j].hash & mask;
      // j may move to the hole iff its home is not in the cyclic range (hole, j].
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --live_;
    return true;
  }

  size_t size() const { return live_; }

  // f(key, value) for every live key, in slot order.
  template <typename F>
  void for_each(F f) const {
    for (const Slot& s : slots_)
      if (s.entry != kEmpty) f(std::string_view(entries_[s.entry].key), entries_[s.entry].value);
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash = 0;
    uint32_t entry = kEmpty;
  };
  struct Entry {
    std::string key;  // empty while free (in free_)
    V value{};
  };

  static uint64_t hash_of(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

  // The slot naming `key`, or the empty slot ending its probe run; capacity must be > 0.
  size_t probe(std::string_view key, uint64_t h) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.entry == kEmpty || (s.hash == h && entries_[s.entry].key == key)) return i;
    }
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_ = std::vector<Slot>(old.empty() ? 1024 : old.size() * 2);
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.entry == kEmpty) continue;
      size_t i = s.hash & mask;
      while (slots_[i].entry != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace kvtwin::model::lmcache
