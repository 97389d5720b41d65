// PageCache: the host's page cache over the disk tier's files, as the modelled links see it.
//
// LMCache's local disk backend writes and reads each chunk as one file through buffered I/O
// (unless extra_config.use_odirect), so the kernel keeps recently written and read files in
// memory: a read of a resident file is a memory copy, not a device read. This models that per
// file (one key per LMCache object) with least-recently-used replacement over `capacity` bytes,
// the memory the host can give the files:
//
//   insert(key, bytes)  a write or a device read brings the file in (most recently used);
//                       older files go, least recently used first, until it fits; a file
//                       larger than the whole cache is not kept
//   touch(key)          a read: true when resident (it becomes most recently used)
//   erase(key)          the file was deleted (LMCache's disk eviction unlinks it): its pages go
//
// Dirty data and writeback are the mover's (ModeledMover: a budget of dirty bytes per instance);
// here a written file is simply resident. Not modelled: read-ahead, partial files, reclaim
// waiting for a dirty file's writeback.
//
// Threading: the simulation thread only.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kvtwin::sim::hw {

class PageCache {
 public:
  explicit PageCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

  bool touch(std::string_view key);
  void insert(std::string_view key, uint64_t bytes);
  void erase(std::string_view key);

  uint64_t capacity_bytes() const { return capacity_; }
  uint64_t used_bytes() const { return used_; }
  uint64_t peak_bytes() const { return peak_; }
  void reset_peak() { peak_ = used_; }  // peaks from now on
  size_t num_files() const { return index_.size(); }

 private:
  struct File {
    std::string key;
    uint64_t bytes;
  };
  // Invariant: used_ is the sum of the files' bytes and at most capacity_; index_ maps each
  // file's key (a view of File::key, stable in its list node) to its node; lru_ runs from the
  // least to the most recently used.
  uint64_t capacity_;
  uint64_t used_ = 0;
  uint64_t peak_ = 0;
  std::list<File> lru_;
  std::unordered_map<std::string_view, std::list<File>::iterator> index_;
};

}  // namespace kvtwin::sim::hw
