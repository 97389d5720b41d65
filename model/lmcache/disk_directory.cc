#include "model/lmcache/disk_directory.h"

namespace kvtwin::model::lmcache {

void DiskDirectory::write(std::string name, uint64_t length, uint64_t content) {
  files_.upsert(std::move(name)) = File{length, content};
}

const DiskDirectory::File* DiskDirectory::find(std::string_view name) const {
  return files_.find(name);
}

bool DiskDirectory::remove(std::string_view name) {
  return files_.erase(name);
}

size_t DiskDirectory::count_with_prefix(std::string_view prefix) const {
  size_t n = 0;
  files_.for_each([&](std::string_view name, const File&) {
    if (name.substr(0, prefix.size()) == prefix) ++n;
  });
  return n;
}

}  // namespace kvtwin::model::lmcache
