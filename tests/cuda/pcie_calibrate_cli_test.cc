// kvtwin_pcie_calibrate's command line: a bad flag is a one-line error and exit 2, before any CUDA
// call; without a device the tool measures nothing, writes no file and exits 3. (With a device,
// cuda/gpu/check.sh's calibrate stage runs it for real.) The binary is the one this build made,
// or KVTWIN_PCIE_CALIBRATE when set (check.sh sets it: carried binaries live elsewhere).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cuda/cuda_handles.h"

namespace kvtwin::cuda {
namespace {

namespace fs = std::filesystem;

struct ToolRun {
  int exit_code = -1;
  std::string err;  // stderr
};

class PcieCalibrateCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("KVTWIN_PCIE_CALIBRATE");
    tool_ = env != nullptr && *env != '\0' ? env : KVTWIN_PCIE_CALIBRATE_PATH;
    ASSERT_TRUE(fs::exists(tool_)) << "kvtwin_pcie_calibrate not found at " << tool_;
    dir_ = fs::path(::testing::TempDir()) /
           ("pcie_cli_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ToolRun run(const std::string& args) {
    const fs::path err = dir_ / "stderr.txt";
    const std::string cmd = "'" + tool_ + "' " + args + " >/dev/null 2>'" + err.string() + "'";
    const int status = std::system(cmd.c_str());
    ToolRun r;
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    std::ifstream in(err);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
    return r;
  }
  static bool one_line(const std::string& s) {
    return !s.empty() && s.back() == '\n' && s.find('\n') == s.size() - 1;
  }

  std::string tool_;
  fs::path dir_;
};

TEST_F(PcieCalibrateCli, RefusesBadFlagsWithOneLineAndExitTwo) {
  const struct {
    const char* args;
    const char* says;
  } cases[] = {
      {"--repeats 0", "--repeats: expected 1 .. 1000"},
      {"--repeats 1001", "--repeats: expected 1 .. 1000"},
      {"--repeats 3x", "--repeats: expected 1 .. 1000"},
      {"--seed -", "--seed: expected an unsigned integer"},
      {"--seed 12ab", "--seed: expected an unsigned integer"},
      {"--out", "--out needs a value"},
      {"--frobnicate", "unknown flag --frobnicate"},
  };
  for (const auto& c : cases) {
    const ToolRun r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args;
    EXPECT_TRUE(one_line(r.err)) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("kvtwin_pcie_calibrate: ", 0), 0u) << r.err;
  }
}

TEST_F(PcieCalibrateCli, WithoutADeviceMeasuresNothingAndExitsThree) {
  if (probe_device().ok()) GTEST_SKIP() << "a device is present; check.sh runs the tool for real";
  const fs::path out = dir_ / "samples.csv";
  const ToolRun r = run("--repeats 1 --seed 7 --out '" + out.string() + "'");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace kvtwin::cuda
