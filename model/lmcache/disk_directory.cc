#include "model/lmcache/disk_directory.h"

#include <xxhash.h>

#include <utility>

namespace kvtwin::model::lmcache {

uint64_t DiskDirectory::hash_of(std::string_view name) {
  return XXH3_64bits(name.data(), name.size());
}

size_t DiskDirectory::probe(std::string_view name, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.entry == kEmpty || (s.hash == h && entries_[s.entry].name == name)) return i;
  }
}

void DiskDirectory::grow() {
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

void DiskDirectory::write(std::string name, uint64_t length, uint64_t content) {
  if ((live_ + 1) * 2 > slots_.size()) grow();
  const uint64_t h = hash_of(name);
  Slot& s = slots_[probe(name, h)];
  if (s.entry == kEmpty) {
    uint32_t e;
    if (free_.empty()) {
      e = static_cast<uint32_t>(entries_.size());
      entries_.emplace_back();
    } else {
      e = free_.back();
      free_.pop_back();
    }
    entries_[e].name = std::move(name);
    s = Slot{h, e};
    ++live_;
  }
  entries_[s.entry].file = File{length, content};
}

const DiskDirectory::File* DiskDirectory::find(std::string_view name) const {
  if (live_ == 0) return nullptr;
  const Slot& s = slots_[probe(name, hash_of(name))];
  return s.entry == kEmpty ? nullptr : &entries_[s.entry].file;
}

bool DiskDirectory::remove(std::string_view name) {
  if (live_ == 0) return false;
  size_t hole = probe(name, hash_of(name));
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

size_t DiskDirectory::count_with_prefix(std::string_view prefix) const {
  size_t n = 0;
  for (const Slot& s : slots_)
    if (s.entry != kEmpty &&
        std::string_view(entries_[s.entry].name).substr(0, prefix.size()) == prefix)
      ++n;
  return n;
}

}  // namespace kvtwin::model::lmcache
