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

// A fresh, empty directory under the build tree, unique to the calling test. Each call empties
// it again and returns the same path: a test that keeps several outputs at once takes them from
// scratch_subdir().
std::string scratch_dir();

// A fresh, empty directory of its own (a new one on every call) under the calling test's scratch
// directory, which it does not empty.
std::string scratch_subdir();

}  // namespace kvtwin::testing
