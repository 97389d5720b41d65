// Paths the tests read: the shared golden data beside the repository, the source tree, and a
// per-test scratch directory.
#pragma once

#include <string>

namespace kvtwin::testing {

inline std::string shared_path(const std::string& rel) {
  return std::string(KVTWIN_SHARED_DIR) + "/" + rel;
}
inline std::string source_path(const std::string& rel) {
  return std::string(KVTWIN_SOURCE_DIR) + "/" + rel;
}

// A fresh, empty directory under the build tree, unique to the calling test.
std::string scratch_dir();

}  // namespace kvtwin::testing
