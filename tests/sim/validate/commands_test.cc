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

}  // namespace
}  // namespace kvtwin::sim
