// DiskDirectory: the local_disk directory as the model sees it — file names with their length and
// logical content, no bytes. Shared by the ranks of one node (upstream: one directory, one file per
// key, the key string names the rank). Faults are injected by deleting files (golden disk_unlink).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kvtwin::model::lmcache {

class DiskDirectory {
 public:
  struct File {
    uint64_t length = 0;   // bytes written
    uint64_t content = 0;  // logical payload tag
  };

  void write(const std::string& name, uint64_t length, uint64_t content) {
    files_[name] = File{length, content};
  }
  const File* find(const std::string& name) const {
    auto it = files_.find(name);
    return it == files_.end() ? nullptr : &it->second;
  }
  // os.remove: false when the file does not exist (upstream raises FileNotFoundError).
  bool remove(const std::string& name) { return files_.erase(name) != 0; }
  // A scan: only reports and golden probes ask.
  size_t count_with_prefix(std::string_view prefix) const {
    size_t n = 0;
    for (const auto& [name, file] : files_)
      if (std::string_view(name).substr(0, prefix.size()) == prefix) ++n;
    return n;
  }
  size_t size() const { return files_.size(); }

 private:
  // Hashed: the names share a long "<model>@<ws>@<worker>@" prefix, which made every ordered
  // comparison a long memcmp; nothing depends on the order of names.
  std::unordered_map<std::string, File> files_;
};

}  // namespace kvtwin::model::lmcache
