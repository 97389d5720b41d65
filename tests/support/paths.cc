#include "tests/support/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

namespace kvtwin::testing {

namespace {

std::string test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
  return std::string(KVTWIN_BINARY_DIR) + "/test_scratch/" + name + "." +
         std::to_string(::getpid());
}

}  // namespace

std::string scratch_dir() {
  const std::string dir = test_dir();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string scratch_subdir() {
  static std::atomic<uint64_t> next{0};
  const std::string dir = test_dir() + "/sub" + std::to_string(next++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kvtwin::testing
