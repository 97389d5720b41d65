#include "sim/cli/capacity_command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "sim/cli/common.h"
#include "sim/cli/run_command.h"
#include "sim/io/input_error.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::cli {
namespace {

using kvtwin::testing::read_csv;
using kvtwin::testing::slurp;
using Rows = std::vector<std::map<std::string, std::string>>;

// Runs a capacity search into a scratch directory; returns capacity.csv's rows and the screen.
Rows capacity(CapacityOptions o, std::string* screen = nullptr, std::string* dir_out = nullptr) {
  const std::string dir = kvtwin::testing::scratch_dir();
  o.out = dir;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_capacity(o), 0);
  const std::string text = ::testing::internal::GetCapturedStdout();
  if (screen) *screen = text;
  if (dir_out) *dir_out = dir;
  return read_csv(dir + "/capacity.csv");
}

double num(const std::map<std::string, std::string>& row, const char* key) {
  return std::stod(row.at(key));
}

// The search's answer, checked from capacity.csv alone: the rows are in rising scale, each
// row's verdict follows its own figures (attainment >= the target and no saturation), and the
// screen's answer is a holding scale lo and a failing one hi with hi / lo <= 1 + precision.
// Every probe is the same simulation as a plain run at its scale, and --jobs changes no byte.
TEST(Capacity, TheAnswerIsAHoldingScaleJustBelowAFailingOne) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=300"};
  o.precision = 0.1;
  o.jobs = 1;
  std::string screen, dir;
  const Rows rows = capacity(o, &screen, &dir);
  ASSERT_GE(rows.size(), 4u);
  std::map<std::string, size_t> at;  // scale text → row
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    if (i > 0) {
      EXPECT_LT(num(rows[i - 1], "workload.rate_scale"), num(r, "workload.rate_scale"));
    }
    const bool holds = num(r, "slo_attainment") >= 0.9 && r.at("saturated") == "0";
    EXPECT_EQ(r.at("holds"), holds ? "1" : "0") << r.at("workload.rate_scale");
    EXPECT_TRUE(std::filesystem::exists(dir + "/points/" + r.at("probe") + "/summary.json"));
    at[r.at("workload.rate_scale")] = i;
  }
  // "capacity    rate_scale LO holds: ..." then "            rate_scale HI fails: ...".
  const size_t a = screen.find("capacity    rate_scale ");
  ASSERT_NE(a, std::string::npos) << screen;
  const size_t lo_end = screen.find(' ', a + 23);
  const std::string lo = screen.substr(a + 23, lo_end - a - 23);
  EXPECT_EQ(screen.substr(lo_end, 7), " holds:") << screen;
  const size_t b = screen.find("            rate_scale ", lo_end);
  ASSERT_NE(b, std::string::npos) << screen;
  const size_t hi_end = screen.find(' ', b + 23);
  const std::string hi = screen.substr(b + 23, hi_end - b - 23);
  EXPECT_EQ(screen.substr(hi_end, 7), " fails:") << screen;
  ASSERT_TRUE(at.count(lo) && at.count(hi)) << lo << " " << hi;
  EXPECT_EQ(rows[at[lo]].at("holds"), "1");
  EXPECT_EQ(rows[at[hi]].at("holds"), "0");
  EXPECT_EQ(at[hi], at[lo] + 1);  // neighbours among the probes
  EXPECT_LE(num(rows[at[hi]], "workload.rate_scale") / num(rows[at[lo]], "workload.rate_scale"),
            1.1);
  // The start, the scenario's own scale 1, fails here: the answer lies below it.
  EXPECT_EQ(rows.back().at("workload.rate_scale"), "1");
  EXPECT_EQ(rows.back().at("probe"), "0");
  EXPECT_EQ(rows.back().at("holds"), "0");

  // The holding probe is a plain run at its scale.
  scenario::Scenario s = load_scenario("", {"workload.max_requests=300"});
  s.workload.rate_scale = std::stod(lo);
  const report::Summary plain = simulate(s, "", "", true, nullptr);
  EXPECT_NEAR(num(rows[at[lo]], "slo_attainment"), plain.slo_attainment, 5e-7);
  EXPECT_NEAR(num(rows[at[lo]], "offered_requests_per_s"), plain.load.offered_rate, 5e-7);
  EXPECT_NEAR(num(rows[at[lo]], "ttft_p99_ms"), plain.ttft.p99, 5e-4);

  o.jobs = 3;
  std::string dir3;
  capacity(o, nullptr, &dir3);
  EXPECT_EQ(slurp(dir + "/capacity.csv"), slurp(dir3 + "/capacity.csv"));
}

// The attainment of the default scenario's first 600 requests hovers near 90 % over a range of
// rates; with four probes a round, a scale above the answer holds again, and the screen says the
// verdict is not monotone there. A note names exactly the probes on the wrong side.
TEST(Capacity, SaysWhichProbesHeldAboveTheAnswerOrFailedBelowIt) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=600"};
  o.probes = 4;
  o.jobs = 2;
  std::string screen;
  const Rows rows = capacity(o, &screen);
  size_t lo = rows.size(), hi = rows.size();
  const size_t a = screen.find("capacity    rate_scale ");
  ASSERT_NE(a, std::string::npos) << screen;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string at =
        "capacity    rate_scale " + rows[i].at("workload.rate_scale") + " holds:";
    if (screen.compare(a, at.size(), at) == 0) lo = i;
  }
  ASSERT_LT(lo, rows.size()) << screen;
  hi = lo + 1;
  size_t notes = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const bool wrong =
        (i > hi && rows[i].at("holds") == "1") || (i < lo && rows[i].at("holds") == "0");
    const std::string note = "note        rate_scale " + rows[i].at("workload.rate_scale") + ", ";
    EXPECT_EQ(screen.find(note) != std::string::npos, wrong) << screen;
    notes += wrong;
  }
  EXPECT_GE(notes, 1u) << screen;
}

// A probe whose queue grew through the run fails even when enough of its requests met the SLOs:
// with a TTFT target of 5 s and half the requests to meet it, the default scenario's first 300
// requests meet it at rates where their queue grows by more than 5 s.
TEST(Capacity, AProbeWhoseQueueGrewFailsWhateverItsAttainment) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=300", "slo.ttft_ms=5000"};
  o.slo_attainment = 0.5;
  o.jobs = 2;
  std::string screen;
  const Rows rows = capacity(o, &screen);
  size_t saturated_within_slos = 0;
  for (const auto& r : rows) {
    if (r.at("saturated") == "1" && num(r, "slo_attainment") >= 0.5) {
      ++saturated_within_slos;
      EXPECT_EQ(r.at("holds"), "0") << r.at("workload.rate_scale");
    }
  }
  EXPECT_GE(saturated_within_slos, 1u);
  EXPECT_NE(screen.find(" fails: saturated ("), std::string::npos) << screen;
}

// SLOs no run can meet: no scale holds, down to the field's bound; SLOs every run meets (no
// saturation can exceed a TTFT target of 1e9 ms): every scale holds, up to it. The search stops
// at the bounds [1e-6, 1e6], by doublings from the scenario's scale.
TEST(Capacity, SaysWhenNoScaleOrEveryScaleHolds) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=40", "slo.ttft_ms=0"};
  std::string screen;
  Rows rows = capacity(o, &screen);
  EXPECT_NE(screen.find("capacity    no value probed holds, down to rate_scale 1.9073e-06 (the "
                        "field's bound)\n"),
            std::string::npos)
      << screen;
  ASSERT_EQ(rows.size(), 20u);  // 1, 1/2, ..., 2^-19
  for (const auto& r : rows) EXPECT_EQ(r.at("holds"), "0");

  o.sets = {"workload.max_requests=40", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  rows = capacity(o, &screen);
  EXPECT_NE(screen.find("capacity    every value probed holds, up to rate_scale 5.2429e+05 (the "
                        "field's bound)\n"),
            std::string::npos)
      << screen;
  ASSERT_EQ(rows.size(), 20u);  // 1, 2, ..., 2^19
  for (const auto& r : rows) EXPECT_EQ(r.at("holds"), "1");
}

// --for cluster.instances: the fewest instances that hold at the scenario's rate. At twice the
// trace's rate the default scenario's 4 instances fail; doublings find a holding count, then the
// integers between narrow it to neighbours. A plain run with one instance fewer fails.
TEST(Capacity, ForAResourceFindsTheLeastThatHolds) {
  CapacityOptions o;
  o.key = "cluster.instances";
  o.sets = {"workload.max_requests=300", "workload.rate_scale=2"};
  o.jobs = 2;
  std::string screen;
  const Rows rows = capacity(o, &screen);
  ASSERT_GE(rows.size(), 3u);
  size_t least = rows.size();
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& v = rows[i].at("cluster.instances");
    EXPECT_EQ(v.find_first_not_of("0123456789"), std::string::npos) << v;  // whole instances
    if (rows[i].at("holds") == "1" && least == rows.size()) least = i;
  }
  ASSERT_LT(least, rows.size()) << screen;
  ASSERT_GT(least, 0u) << screen;
  const int n = std::stoi(rows[least].at("cluster.instances"));
  EXPECT_EQ(rows[least - 1].at("cluster.instances"), std::to_string(n - 1)) << screen;
  EXPECT_EQ(rows[least - 1].at("holds"), "0");
  EXPECT_GT(n, 4);  // the scenario's own 4 fail
  EXPECT_NE(screen.find("capacity    instances " + std::to_string(n) + " holds: "),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("            instances " + std::to_string(n - 1) + " fails: "),
            std::string::npos)
      << screen;
  scenario::Scenario s = load_scenario("", {"workload.max_requests=300", "workload.rate_scale=2",
                                            "cluster.instances=" + std::to_string(n - 1)});
  const report::Summary plain = simulate(s, "", "", true, nullptr);
  EXPECT_TRUE(plain.slo_attainment < 0.9 || plain.load.saturated);
  EXPECT_NEAR(num(rows[least - 1], "slo_attainment"), plain.slo_attainment, 5e-7);

  // From 16 instances, which hold, the search halves down to a failing count and narrows to the
  // same answer.
  o.sets.push_back("cluster.instances=16");
  const Rows from_above = capacity(o, &screen);
  EXPECT_EQ(from_above.back().at("cluster.instances"), "16");
  EXPECT_EQ(from_above.back().at("probe"), "0");
  EXPECT_NE(screen.find("capacity    instances " + std::to_string(n) + " holds: "),
            std::string::npos)
      << screen;
}

// A window of the trace is in scaled time: the rate search says that each probe replays another
// part of it; a search over the first N requests does not.
TEST(Capacity, SaysWhenEachRateReplaysAnotherWindow) {
  CapacityOptions o;
  o.sets = {"workload.start_s=300", "workload.max_duration_s=60"};
  o.precision = 0.5;
  o.jobs = 2;
  std::string screen;
  capacity(o, &screen);
  const std::string note =
      "note        workload.start_s and max_duration_s are in scaled time: each rate probed\n";
  EXPECT_NE(screen.find(note), std::string::npos) << screen;
  o.sets = {"workload.max_requests=40"};
  capacity(o, &screen);
  EXPECT_EQ(screen.find(note), std::string::npos) << screen;
}

TEST(Capacity, RefusesOptionsOutOfRange) {
  auto refused = [](CapacityOptions o, const std::string& flag) {
    try {
      run_capacity(o);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
      return true;
    }
    return false;
  };
  CapacityOptions o;
  o.slo_attainment = 0;
  EXPECT_TRUE(refused(o, "--slo-attainment"));
  o.slo_attainment = 1.5;
  EXPECT_TRUE(refused(o, "--slo-attainment"));
  o = {};
  o.precision = 0;
  EXPECT_TRUE(refused(o, "--precision"));
  o = {};
  o.probes = 0;
  EXPECT_TRUE(refused(o, "--probes"));
  o = {};
  o.sets = {"workload.rate_scale=0"};
  EXPECT_TRUE(refused(o, "workload.rate_scale"));
  o = {};
  o.key = "cluster.router";
  EXPECT_TRUE(refused(o, "--for: cluster.router: expected a numeric key"));
  o.key = "cluster.instance";
  EXPECT_TRUE(refused(o, "--for: cluster.instance: unknown key; did you mean cluster.instances?"));
  o.key = "lmcache.max_local_disk_size_gb";  // 0 in the default scenario: nothing to double
  EXPECT_TRUE(refused(o, "the scenario's value is 0"));
}

}  // namespace
}  // namespace kvtwin::sim::cli
