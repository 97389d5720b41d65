// DiskDirectory: the local_disk directory as the model sees it — file names with their length and
// logical content, no bytes. Shared by the ranks of one node (upstream: one directory, one file per
// key, the key string names the rank). Faults are injected by deleting files (golden disk_unlink).
//
// Storage: an open-addressing table (linear probing, backward-shift deletion) of
// (64-bit name hash, name, file). A lookup touches one slot run and compares the full name only
// where the stored hash matches, so the long shared "<model>@<ws>@<worker>@" prefix of the names
// costs one memcmp per hit instead of a node chase per probe. Invariants:
//   - every live name sits in the probe run starting at its home slot (hash & mask) with no empty
//     slot in between;
//   - live count * 8 <= capacity * 7 (grown by doubling before an insert would pass it);
//   - capacity is a power of two (or zero before the first write).
// Nothing depends on the order of names (count_with_prefix is a plain scan).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvtwin::model::lmcache {

class DiskDirectory {
 public:
  struct File {
    uint64_t length = 0;   // bytes written
    uint64_t content = 0;  // logical payload tag
  };

  // Creates or overwrites `name`.
  void write(std::string name, uint64_t length, uint64_t content);
  const File* find(std::string_view name) const;
  // os.remove: false when the file does not exist (upstream raises FileNotFoundError).
  bool remove(std::string_view name);
  // A scan: only reports and golden probes ask.
  size_t count_with_prefix(std::string_view prefix) const;
  size_t size() const { return live_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    bool used = false;
    std::string name;
    File file;
  };

  static uint64_t hash_of(std::string_view name);
  // The slot holding `name`, or the empty slot ending its probe run; capacity must be > 0.
  size_t probe(std::string_view name, uint64_t h) const;
  void grow();

  std::vector<Slot> slots_;
  size_t live_ = 0;
};

}  // namespace kvtwin::model::lmcache
