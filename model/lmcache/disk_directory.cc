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
    if (!s.used || (s.hash == h && s.name == name)) return i;
  }
}

void DiskDirectory::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_ = std::vector<Slot>(old.empty() ? 1024 : old.size() * 2);
  const size_t mask = slots_.size() - 1;
  for (Slot& s : old) {
    if (!s.used) continue;
    size_t i = s.hash & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = std::move(s);
  }
}

void DiskDirectory::write(std::string name, uint64_t length, uint64_t content) {
  if ((live_ + 1) * 8 > slots_.size() * 7) grow();
  const uint64_t h = hash_of(name);
  Slot& s = slots_[probe(name, h)];
  if (!s.used) {
    s.used = true;
    s.hash = h;
    s.name = std::move(name);
    ++live_;
  }
  s.file = File{length, content};
}

const DiskDirectory::File* DiskDirectory::find(std::string_view name) const {
  if (live_ == 0) return nullptr;
  const Slot& s = slots_[probe(name, hash_of(name))];
  return s.used ? &s.file : nullptr;
}

bool DiskDirectory::remove(std::string_view name) {
  if (live_ == 0) return false;
  size_t hole = probe(name, hash_of(name));
  if (!slots_[hole].used) return false;
  // Backward shift: pull later members of the run into the hole when their home slot allows it.
  const size_t mask = slots_.size() - 1;
  for (size_t j = (hole + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
    const size_t home = slots_[j].hash & mask;
    // j may move to the hole iff its home is not in the cyclic range (hole, j].
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      slots_[hole] = std::move(slots_[j]);
      hole = j;
    }
  }
  slots_[hole].used = false;
  slots_[hole].name.clear();
  slots_[hole].file = File{};
  --live_;
  return true;
}

size_t DiskDirectory::count_with_prefix(std::string_view prefix) const {
  size_t n = 0;
  for (const Slot& s : slots_)
    if (s.used && std::string_view(s.name).substr(0, prefix.size()) == prefix) ++n;
  return n;
}

}  // namespace kvtwin::model::lmcache
