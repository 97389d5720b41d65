// kvtwin validate --scenario as a user runs it: the real binary on a tiny slice of a scenario with
// LMCache's disk and remote tiers, real files and a real redis-server. Every disk / remote
// transfer of the run is executed and measured; with predicted timing the run directory is
// byte-identical to kvtwin run's; a scenario whose hardware.profile is missing stops with one
// line naming the file and the key.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

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

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream s(line);
  for (std::string field; std::getline(s, field, sep);) out.push_back(field);
  return out;
}

// A Llama-3.1-70B TP4 deployment cut down to 4 layers (8 MiB per 256-token chunk of all ranks),
// one instance, a GPU pool of two requests, a CPU pool of one chunk and a disk of a few, on 20
// requests that come back to five 8-chunk documents: chunks return from the disk and from the
// remote store. About 90 disk / remote transfers, a few seconds.
std::string write_scenario(const std::string& dir, const std::string& extra = "") {
  std::ofstream trace(dir + "/tiny.csv");
  trace << "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n";
  const std::string order = "ABCDEDCBAEACBDBEADCE";
  for (size_t i = 0; i < order.size(); ++i) {
    trace << 2 * i << "," << 9 * 256 << ",16,256,";
    for (int j = 0; j < 8; ++j) trace << 100 + 10 * (order[i] - 'A') + j << " ";
    trace << 1000 + i << "\n";  // one block of its own
  }
  const std::string path = dir + "/tiny_tiers.toml";
  std::ofstream(path) << "[run]\nname = \"tiny-tiers\"\n"
                      << "[model]\nnum_layers = 4\nhidden_size = 8192\nnum_heads = 64\n"
                         "num_kv_heads = 8\nhead_size = 128\nintermediate_size = 28672\n"
                         "vocab_size = 128256\n"
                      << "[gpu]\ntensor_parallel = 4\n"
                      << "[vllm]\nnum_gpu_blocks = 300\n"
                      << "[lmcache]\nenabled = true\nchunk_size = 256\n"
                         "max_local_cpu_size_gb = 0.002\nmax_local_disk_size_gb = 0.012\n"
                         "remote = true\n"
                      << "[workload]\ntrace = \"tiny.csv\"\n"
                      << "[output]\nplots = false\n"
                      << extra;
  return path;
}

TEST(ValidateScenario, EveryDiskAndRemoteTransferIsMeasuredAndPredictedRunsMatchKvtwinRun) {
  kvtwin::testing::RedisServer server;
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string scenario = write_scenario(dir);
  const CommandRun val = kvtwin("validate --scenario " + scenario + " --disk-path " + dir +
                                "/disk --remote-url " + server.url() + " -o " + dir + "/val");
  ASSERT_EQ(val.exit_code, 0) << val.err << val.out;
  const std::string report = slurp(dir + "/val/report.md");
  EXPECT_NE(report.find("wrong bytes: 0 object(s); objects not staged: 0"), std::string::npos)
      << report;
  EXPECT_NE(report.find("GPU <-> CPU transfers (modeled only"), std::string::npos) << report;
  // Every disk / remote transfer of the run is a sample, measured > 0, with the run's sizes.
  std::stringstream csv(slurp(dir + "/val/samples.csv"));
  std::string line;
  std::getline(csv, line);
  ASSERT_EQ(line, "start_us,class,kind,objects,bytes,failed,measured_ns,predicted_ns,error_pct");
  std::map<std::string, int> per_class;
  std::map<std::string, uint64_t> bytes_per_class;
  while (std::getline(csv, line)) {
    const std::vector<std::string> f = split(line, ',');
    ASSERT_EQ(f.size(), 9u) << line;
    ++per_class[f[1]];
    bytes_per_class[f[1]] += std::stoull(f[4]);
    EXPECT_EQ(f[5], "0") << line;            // nothing failed
    EXPECT_GT(std::stoll(f[6]), 0) << line;  // measured
    EXPECT_GT(std::stoll(f[7]), 0) << line;  // predicted
    EXPECT_GT(std::stoull(f[4]), 0u) << line;
  }
  for (const char* cls : {"disk_write", "remote_put", "disk_read", "remote_get"})
    EXPECT_GT(per_class[cls], 0) << cls << " never happened: the slice does not exercise it";
  EXPECT_EQ(per_class.size(), 4u);
  // The samples are all of the run's disk and remote transfers: their bytes are what the run's
  // links carried (summary.json "links": disk_read, disk_write, remote_tx, remote_rx).
  const std::string summary = slurp(dir + "/val/run/summary.json");
  auto link_bytes = [&](const std::string& link) -> uint64_t {
    const size_t at = summary.find("\"" + link + "\": {");
    const size_t field = summary.find("\"bytes\": ", at);
    if (at == std::string::npos || field == std::string::npos) return 0;
    return std::stoull(summary.substr(field + 9));
  };
  EXPECT_EQ(bytes_per_class["disk_read"], link_bytes("disk_read"));
  EXPECT_EQ(bytes_per_class["disk_write"], link_bytes("disk_write"));
  EXPECT_EQ(bytes_per_class["remote_get"], link_bytes("remote_tx"));
  EXPECT_EQ(bytes_per_class["remote_put"], link_bytes("remote_rx"));

  // The same scenario through kvtwin run: the run directory is byte-identical.
  const CommandRun run = kvtwin("run -q --scenario " + scenario + " --out " + dir + "/run");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  size_t compared = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/run")) {
    if (!e.is_regular_file()) continue;
    const std::string rel = std::filesystem::relative(e.path(), dir + "/run").string();
    EXPECT_EQ(slurp(e.path().string()), slurp(dir + "/val/run/" + rel)) << rel;
    ++compared;
  }
  EXPECT_GE(compared, 4u);
  size_t validated_files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/val/run"))
    validated_files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(validated_files, compared);
  // The tiers are left empty.
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/disk"));
  EXPECT_EQ(server.command({"DBSIZE"}), "0");
}

TEST(ValidateScenario, MeasuredTimingRunsTheSliceOnTheMeasuredClock) {
  kvtwin::testing::RedisServer server;
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string scenario = write_scenario(dir);
  const CommandRun val =
      kvtwin("validate --scenario " + scenario + " --max-requests 15 --timing measured" +
             " --disk-path " + dir + "/disk --remote-url " + server.url() + " -q -o " + dir + "/m");
  ASSERT_EQ(val.exit_code, 0) << val.err;
  const std::string report = slurp(dir + "/m/report.md");
  EXPECT_NE(report.find("timing: measured"), std::string::npos) << report;
  EXPECT_NE(report.find("slice: 15 requests"), std::string::npos) << report;
  EXPECT_TRUE(std::filesystem::exists(dir + "/m/run/summary.json"));
}

// A Redis server with 1 MiB of memory and no eviction refuses every 8-MiB chunk, so every GET of
// the run misses. With measured timing each failed bulk read is a miss: the requests' blocks
// from the failed chunk on are load errors, recomputed under the recompute policy, and each
// failed fetch counts one failed blocking read for the health monitor. With predicted timing the
// same faults are only recorded. (Before, the measured run loaded the missing chunks, with no
// failed load.)
TEST(ValidateScenario, MeasuredTimingTurnsARealTiersFailedReadsIntoMisses) {
  kvtwin::testing::RedisServer server({"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"});
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string scenario = write_scenario(dir);
  auto validate = [&](const std::string& timing) {
    const std::string out = dir + "/" + timing;
    const CommandRun val = kvtwin(
        "validate --scenario " + scenario + " --timing " + timing +
        " --set vllm.kv_load_failure_policy=recompute --set lmcache.max_local_cpu_size_gb=0.02" +
        " --disk-path " + dir + "/disk_" + timing + " --remote-url " + server.url() + " -q -o " +
        out);
    EXPECT_EQ(val.exit_code, 0) << val.err;
    return slurp(out + "/run/summary.json");
  };
  auto after = [](const std::string& text, const std::string& key) {
    return kvtwin::testing::number_after(text, key);
  };
  const std::string measured = validate("measured");
  const std::string report = slurp(dir + "/measured/report.md");
  EXPECT_NE(report.find("remote tier: puts"), std::string::npos) << report;
  EXPECT_NE(report.find(" (ok 0, miss "), std::string::npos) << report;  // every GET missed
  const double remote_loaded =
      after(measured.substr(measured.find("\"remote\": {")), "\"loaded_tokens\": ");
  EXPECT_GT(remote_loaded, 0);
  EXPECT_GE(after(measured, "\"failed_load_tokens\": "), remote_loaded);
  EXPECT_GT(after(measured, "\"failed_remote_gets\": "), 0);
  EXPECT_EQ(after(measured, "\"failed\": "), 0);  // recomputed, not failed
  server.command({"FLUSHALL"});
  const std::string predicted = validate("predicted");
  EXPECT_EQ(after(predicted, "\"failed_load_tokens\": "), 0);
  EXPECT_EQ(predicted.find("\"failed_remote_gets\""), std::string::npos);  // no health section
}

TEST(ValidateScenario, AMissingHardwareProfileIsOneLineNamingFileAndKey) {
  const std::string dir = kvtwin::testing::scratch_dir();
  const std::string scenario = write_scenario(dir, "[hardware]\nprofile = \"no_such.toml\"\n");
  for (const std::string& cmd : {"run -q --scenario " + scenario + " --out " + dir + "/r",
                                 "validate --scenario " + scenario + " --disk-path " + dir +
                                     "/d --remote-url " + "redis://127.0.0.1:1 -o " + dir + "/v"}) {
    const CommandRun r = kvtwin(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(scenario + ":"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("hardware.profile: cannot read hardware profile"), std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace kvtwin::sim
