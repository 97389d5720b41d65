#include "sim/validate/report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/paths.h"

namespace kvtwin::sim::validate {
namespace {

TransferSample sample(Location src, Location dst, uint64_t n, uint64_t bytes, SimDuration pred,
                      SimDuration meas, uint64_t failed = 0) {
  TransferSample s;
  s.src = src;
  s.dst = dst;
  s.kind = "k";
  s.num_objects = n;
  s.bytes = bytes;
  s.predicted_ns = pred;
  s.measured_ns = meas;
  s.num_failed = failed;
  return s;
}

TEST(Report, RepeatedPointsAlsoCountOnceWithTheirMedians) {
  const auto D = Location::kDisk, C = Location::kCpu;
  // Point (disk_write, 1 x 2 MiB) three times: medians 100 measured, 90 predicted: -10 %.
  std::vector<TransferSample> s = {sample(C, D, 1, 2 << 20, 90, 100),
                                   sample(C, D, 1, 2 << 20, 90, 50),
                                   sample(C, D, 1, 2 << 20, 90, 400),
                                   sample(C, D, 2, 4 << 20, 70, 100),  // not repeated: left out
                                   sample(D, C, 1, 2 << 20, 100, 100)};
  const ValidationSummary v = summarize(s);
  ASSERT_EQ(v.large_medians.size(), 1u);
  EXPECT_EQ(v.large_medians[0].transfer_class, "disk_write");
  EXPECT_EQ(v.large_medians[0].count, 1u);
  EXPECT_DOUBLE_EQ(v.large_medians[0].bias_pct, -10);
  EXPECT_GT(v.large[1].mape_pct, 30);  // the single transfers scatter far more
  EXPECT_NE(format_summary(v).find("one row per repeated point"), std::string::npos);
}

TEST(Report, SizeBucketsArePowersOfFourFrom64KiB) {
  EXPECT_EQ(size_bucket(1000), "<64K");
  EXPECT_EQ(size_bucket(64 << 10), "64K-256K");
  EXPECT_EQ(size_bucket((1 << 20) - 1), "256K-1M");
  EXPECT_EQ(size_bucket(1 << 20), "1M-4M");
  EXPECT_EQ(size_bucket(32 << 20), "16M-64M");
  EXPECT_EQ(size_bucket(uint64_t{1} << 30), ">=64M");
}

TEST(Report, MapeBiasAndWorstCasesPerClassAndBucket) {
  const auto D = Location::kDisk, C = Location::kCpu;
  std::vector<TransferSample> s = {sample(C, D, 1, 2 << 20, 110, 100),  // +10 %
                                   sample(C, D, 2, 4 << 20, 70, 100),   // -30 %
                                   sample(C, D, 1, 4 << 10, 300, 100),  // +200 %, small object
                                   sample(D, C, 1, 2 << 20, 100, 100),  // 0 %
                                   sample(D, C, 1, 2 << 20, 999, 100, /*failed*/ 1)};
  const ValidationSummary v = summarize(s, 2);
  EXPECT_EQ(v.num_failed, 1u);
  ASSERT_EQ(v.large.size(), 2u);
  EXPECT_EQ(v.large[0].transfer_class, "disk_read");
  EXPECT_EQ(v.large[0].count, 1u);
  EXPECT_DOUBLE_EQ(v.large[0].mape_pct, 0);
  EXPECT_EQ(v.large[1].transfer_class, "disk_write");
  EXPECT_EQ(v.large[1].count, 2u);
  EXPECT_DOUBLE_EQ(v.large[1].mape_pct, 20);
  EXPECT_DOUBLE_EQ(v.large[1].bias_pct, -10);
  EXPECT_DOUBLE_EQ(v.large[1].max_abs_pct, 30);
  ASSERT_EQ(v.buckets.size(), 3u);  // disk_read 1M-4M, disk_write <64K, disk_write 1M-4M
  EXPECT_EQ(v.buckets[1].bucket, "<64K");
  EXPECT_DOUBLE_EQ(v.buckets[1].mape_pct, 200);
  ASSERT_EQ(v.worst.size(), 2u);
  EXPECT_EQ(v.worst[0].predicted_ns, 300);
  EXPECT_EQ(v.worst[1].predicted_ns, 70);
}

TEST(Report, WritesTablesSamplesAndPlotScript) {
  const std::string dir = kvtwin::testing::scratch_dir() + "/report";
  std::vector<TransferSample> s = {sample(Location::kCpu, Location::kRemote, 1, 2 << 20, 110, 100),
                                   sample(Location::kRemote, Location::kCpu, 1, 2 << 20, 90, 100)};
  const std::string note = write_report(dir, {"profile: p.toml"}, s, summarize(s));
  for (const char* f : {"samples.csv", "summary.tsv", "report.md", "predicted_vs_measured.gp"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  std::ifstream md(dir + "/report.md");
  std::stringstream text;
  text << md.rdbuf();
  EXPECT_NE(text.str().find("| remote_put | >=1M | 1 | 10.0 | 10.0 |"), std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("- profile: p.toml"), std::string::npos);
  // gnuplot is installed by .ci/install-deps: the plot must be drawn.
  EXPECT_EQ(note, "");
  EXPECT_TRUE(std::filesystem::exists(dir + "/predicted_vs_measured.svg"));
}

}  // namespace
}  // namespace kvtwin::sim::validate
