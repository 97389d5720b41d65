// DiskDirectory: the local_disk directory as the model sees it — file names with their length and
// logical content, no bytes. Shared by the ranks of one node (upstream: one directory, one file per
// key, the key string names the rank). Faults are injected by deleting files (golden disk_unlink).
//
// Storage: an open-addressing index (linear probing, backward-shift deletion) of 16-byte slots
// (64-bit name hash, entry number) over a side table of entries (name, file) whose freed numbers
// are reused:
//
//   slots_:   | h=91c3.., e=4 | empty | h=07aa.., e=0 | h=07aa.., e=7 | empty | ...
//   entries_: e=0 {"model@1@0@<kid>@bf16.pt", file} ... e=4 {...} ... e=7 {...}
//
// A lookup walks one slot run (four slots per cache line) and compares a name only where the
// stored hash matches; deletion shifts plain 16-byte slots, never strings. Invariants:
//   - every live name's slot sits in the probe run starting at its home slot (hash & mask) with
//     no empty slot in between, and names the entry holding that name;
//   - live count * 2 <= capacity (grown by doubling before an insert would pass it);
//   - capacity is a power of two (or zero before the first write);
//   - an entry is live iff exactly one slot names it; free_ lists the others.
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
  // The file, or nullptr; valid until the next write or remove.
  const File* find(std::string_view name) const;
  // os.remove: false when the file does not exist (upstream raises FileNotFoundError).
  bool remove(std::string_view name);
  // A scan: only reports and golden probes ask.
  size_t count_with_prefix(std::string_view prefix) const;
  size_t size() const { return live_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t hash = 0;
    uint32_t entry = kEmpty;
  };
  struct Entry {
    std::string name;  // empty while free (in free_)
    File file;
  };

  static uint64_t hash_of(std::string_view name);
  // The slot naming `name`, or the empty slot ending its probe run; capacity must be > 0.
  size_t probe(std::string_view name, uint64_t h) const;
  void grow();

  std::vector<Slot> slots_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace kvtwin::model::lmcache
