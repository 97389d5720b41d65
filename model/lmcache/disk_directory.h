// DiskDirectory: the local_disk directory as the model sees it — file names with their length and
// logical content, no bytes. Shared by the ranks of one node (upstream: one directory, one file per
// key, the key string names the rank). Faults are injected by deleting files (golden disk_unlink).
//
// Storage: a StringTable (string_table.h). Nothing depends on the order of names
// (count_with_prefix is a plain scan).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/lmcache/string_table.h"

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
  size_t size() const { return files_.size(); }

 private:
  StringTable<File> files_;
};

}  // namespace kvtwin::model::lmcache
