#include "tests/support/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace kvtwin::testing {

std::string scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  std::string dir =
      std::string(KVTWIN_BINARY_DIR) + "/test_scratch/" + name + "." + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kvtwin::testing
