// kvtwin calibrate and kvtwin validate as a user runs them: the real binary, real files and a
// real redis-server. Bad configuration gives one clear line and a non-zero exit; a small
// calibrate-then-validate cycle writes a readable profile and a report with no wrong bytes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/calibrate/hardware_profile.h"
#include "tests/cuda/tiers/redis_server.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim {
namespace {

using kvtwin::testing::CommandRun;
using kvtwin::testing::slurp;

CommandRun kvtwin(const std::string& args) {
  return kvtwin::testing::run_kvtwin(args);
}

size_t count_lines(const std::string& s) {
  return std::count(s.begin(), s.end(), '\n');
}

TEST(CalibrateCommand, UnwritableDiskDirectoryIsOneLineAndExitTwo) {
  const std::string dir = kvtwin::testing::scratch_dir();
  std::ofstream(dir + "/file") << "x";
  const CommandRun r = kvtwin("calibrate --disk-path " + dir + "/file/tier -o " + dir + "/p.toml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("cannot create disk tier directory"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/p.toml"));
}

TEST(CalibrateCommand, UnreachableRedisIsOneLineAndExitTwo) {
  std::string url;
  {
    kvtwin::testing::RedisServer server;  // a port nobody listens on once it is gone
    url = server.url();
  }
  const CommandRun r = kvtwin("calibrate --remote-url " + url + " --timeout-ms 500");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("cannot reach Redis at " + url), std::string::npos) << r.err;
}

TEST(ValidateCommand, BadUrlAndMissingProfileAreOneLineErrors) {
  const CommandRun bad_url = kvtwin("validate --profile x.toml --remote-url http://nowhere");
  EXPECT_NE(bad_url.exit_code, 0);
  EXPECT_EQ(count_lines(bad_url.err), 1u) << bad_url.err;
  const CommandRun no_profile = kvtwin("validate --profile /nonexistent/p.toml --disk-path /tmp");
  EXPECT_EQ(no_profile.exit_code, 2);
  EXPECT_EQ(count_lines(no_profile.err), 1u) << no_profile.err;
}

TEST(CalibrateThenValidate, SmallCycleWritesAProfileAndAReport) {
  kvtwin::testing::RedisServer server;
  const std::string dir = kvtwin::testing::scratch_dir();
  const CommandRun cal =
      kvtwin("calibrate --disk-path " + dir + "/disk --remote-url " + server.url() +
             " --sizes 65536 262144 --counts 1 2 --repeats 1 --queue-depth 2"
             " --pipeline-depth 2 -o " +
             dir + "/profile.toml --samples " + dir + "/samples.csv");
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  const calibrate::HardwareProfile p = calibrate::read_hardware_profile(dir + "/profile.toml");
  for (const char* cls : {"disk_read", "disk_write", "remote_get", "remote_put"}) {
    ASSERT_TRUE(p.links.count(cls)) << cls;
    EXPECT_EQ(p.links.at(cls).model.queue_depth, 2) << cls;
    EXPECT_EQ(p.links.at(cls).samples, 12u) << cls;  // 2 sizes x 2 counts x depths {1, 2, 4}
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/disk"));  // calibration cleans up
  // The same samples fit again give the same models.
  const CommandRun refit = kvtwin("calibrate --refit " + dir + "/samples.csv --queue-depth 2 " +
                                  "--pipeline-depth 2 -o " + dir + "/refit.toml");
  ASSERT_EQ(refit.exit_code, 0) << refit.err;
  const calibrate::HardwareProfile again = calibrate::read_hardware_profile(dir + "/refit.toml");
  for (const auto& [cls, link] : p.links) EXPECT_EQ(again.links.at(cls).model, link.model) << cls;
  EXPECT_EQ(server.command({"DBSIZE"}), "0");

  std::ofstream(dir + "/transfers.csv")
      << "time_us,src,dst,objects,object_bytes,key_prefix,kind\n"
         "0,cpu,disk,3,65536,a,store\n100,cpu,remote,2,262144,b,store\n"
         "200,disk,cpu,3,65536,a,retrieve\n300,remote,cpu,2,262144,b,retrieve\n"
         "400,disk,cpu,1,65536,never,retrieve\n";
  const CommandRun val = kvtwin("validate --profile " + dir + "/profile.toml --disk-path " + dir +
                                "/disk --remote-url " + server.url() + " --transfers " + dir +
                                "/transfers.csv -o " + dir + "/report");
  ASSERT_EQ(val.exit_code, 0) << val.err;
  const std::string report = slurp(dir + "/report/report.md");
  EXPECT_NE(report.find("wrong bytes: 0 object(s)"), std::string::npos) << report;
  EXPECT_NE(report.find("1 transfer(s) with failed objects left out"), std::string::npos);
  EXPECT_EQ(count_lines(slurp(dir + "/report/samples.csv")), 6u);  // header + 5 transfers
  EXPECT_NE(report.find("timing: predicted"), std::string::npos);
  // Execution-driven timing: the same transfers, the simulation clock follows the measurements.
  const CommandRun measured =
      kvtwin("validate --timing measured --profile " + dir + "/profile.toml --disk-path " + dir +
             "/disk --remote-url " + server.url() + " --transfers " + dir + "/transfers.csv -o " +
             dir + "/report_measured -q");
  ASSERT_EQ(measured.exit_code, 0) << measured.err;
  EXPECT_NE(slurp(dir + "/report_measured/report.md").find("timing: measured"), std::string::npos);
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/disk"));
  EXPECT_EQ(server.command({"DBSIZE"}), "0");
}

// kvtwin_pcie_calibrate (cuda/tools/) measures PCIe on a GPU machine and writes the samples CSV
// with classes pcie_h2d / pcie_d2h; --refit fits them here and writes the scenario's pcie keys.
// Samples drawn from known links: the fit must give back their times and the profile their keys.
TEST(CalibrateCommand, RefitsPcieSamplesIntoThePcieKeys) {
  const std::string dir = kvtwin::testing::scratch_dir();
  // h2d: 12 us + B / 40 GB/s; d2h: 8 us + 3 us per object + B / 50 GB/s.
  auto h2d_ns = [](double n, double b) { return 12e3 + b / 40.0 + 0 * n; };
  auto d2h_ns = [](double n, double b) { return 8e3 + 3e3 * n + b / 50.0; };
  {
    std::ofstream csv(dir + "/pcie.csv");
    csv << "class,direct_io,depth,objects,object_bytes,measured_ns\n";
    for (uint64_t bytes :
         {uint64_t{1} << 18, uint64_t{1} << 20, uint64_t{8} << 20, uint64_t{32} << 20})
      for (uint64_t n : {1, 2, 4, 8, 16}) {
        const double b = static_cast<double>(bytes * n);
        csv << "pcie_d2h,0,1," << n << "," << bytes << ","
            << static_cast<int64_t>(d2h_ns(double(n), b)) << "\n";
        csv << "pcie_h2d,0,1," << n << "," << bytes << ","
            << static_cast<int64_t>(h2d_ns(double(n), b)) << "\n";
      }
  }
  const CommandRun r = kvtwin("calibrate --refit " + dir + "/pcie.csv -o " + dir + "/pcie.toml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("not measured"), std::string::npos) << r.out;
  const calibrate::HardwareProfile p = calibrate::read_hardware_profile(dir + "/pcie.toml");
  ASSERT_TRUE(p.links.count("pcie_h2d"));
  ASSERT_TRUE(p.links.count("pcie_d2h"));
  EXPECT_EQ(p.links.size(), 2u);
  for (uint64_t n : {1, 3, 16}) {
    const uint64_t b = n * (uint64_t{4} << 20);
    EXPECT_NEAR(double(p.links.at("pcie_h2d").model.predict(n, b)), h2d_ns(n, b),
                1e-3 * h2d_ns(n, b));
    EXPECT_NEAR(double(p.links.at("pcie_d2h").model.predict(n, b)), d2h_ns(n, b),
                1e-3 * d2h_ns(n, b));
  }
  // The scenario keys: bandwidth at a 32 MiB chunk, latency of one object (h2d's).
  const std::string toml = slurp(dir + "/pcie.toml");
  EXPECT_NE(toml.find("fitted from kvtwin_pcie_calibrate"), std::string::npos) << toml;
  auto value = [&](const std::string& key) {
    const size_t at = toml.find("\n" + key + " = ");
    return at == std::string::npos ? -1.0 : std::stod(toml.substr(at + key.size() + 4));
  };
  EXPECT_NEAR(value("pcie_h2d_gbps"), 40.0, 0.04) << toml;
  EXPECT_NEAR(value("pcie_latency_us"), 12.0, 0.012) << toml;
  // d2h at one 32 MiB object: (3 us + 32 MiB / 50 GB/s) per 32 MiB, a little under 50 GB/s.
  const double d2h_gbps = (32.0 * (1 << 20)) / (3e3 + 32.0 * (1 << 20) / 50.0);
  EXPECT_NEAR(value("pcie_d2h_gbps"), d2h_gbps, 1e-3 * d2h_gbps) << toml;

  // An unknown class is one line naming the file, line and field.
  std::ofstream(dir + "/bad.csv") << "class,direct_io,depth,objects,object_bytes,measured_ns\n"
                                     "pcie_h2d,0,1,1,1024,5000\npcie_x2y,0,1,1,1024,5000\n";
  const CommandRun bad = kvtwin("calibrate --refit " + dir + "/bad.csv -o " + dir + "/bad.toml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(count_lines(bad.err), 1u) << bad.err;
  EXPECT_NE(bad.err.find("bad.csv:3: class"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kvtwin::sim
