#include "sim/cli/capacity_command.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <utility>
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

// Runs a capacity search (with --vary, a grid of them) into a directory of its own; returns
// capacity.csv's rows (frontier.csv's), the screen and the directory.
Rows capacity(CapacityOptions o, std::string* screen = nullptr, std::string* dir_out = nullptr) {
  const std::string dir = kvtwin::testing::scratch_subdir();
  o.out = dir;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_capacity(o), 0);
  const std::string text = ::testing::internal::GetCapturedStdout();
  if (screen) *screen = text;
  if (dir_out) *dir_out = dir;
  return read_csv(dir + (o.vary.empty() ? "/capacity.csv" : "/frontier.csv"));
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
  // 300 requests over minutes: a load, not one burst.
  EXPECT_EQ(screen.find("one burst"), std::string::npos) << screen;
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
  const Rows rows3 = capacity(o, nullptr, &dir3);
  ASSERT_NE(dir, dir3);
  EXPECT_EQ(rows3.size(), rows.size());
  EXPECT_EQ(slurp(dir + "/capacity.csv"), slurp(dir3 + "/capacity.csv"));
}

// A window so short that the answer's requests were nearly all in the system at once: with SLOs
// nothing misses, every rate holds up to the field's bound, where all 40 requests arrive within
// the first one's service. The verdict stands, and a note says that it measured one burst.
TEST(Capacity, SaysWhenTheWindowIsOneBurst) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=40", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  std::string screen;
  const Rows rows = capacity(o, &screen);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back().at("holds"), "1");
  EXPECT_NE(screen.find("note        at rate_scale 1e+06, 40 of the 40 finished requests were "
                        "still in the system at\n            the last arrival: the window is one "
                        "burst"),
            std::string::npos)
      << screen;
}

// A key whose 0 is not an amount (max_num_seqs 0 is vLLM's default, 1,024 seats here) bounds a
// downward search at 1: the least number of seats that holds, with SLOs nothing misses, is 1,
// "the scenario's limit", and a note says what 0 would have meant.
TEST(Capacity, DoesNotWalkIntoAKeysDefaultZero) {
  CapacityOptions o;
  o.key = "vllm.max_num_seqs";
  o.least = true;
  o.sets = {"vllm.max_num_seqs=4", "workload.max_requests=40", "slo.ttft_ms=1e9",
            "slo.tpot_ms=1e9"};
  std::string screen;
  const Rows rows = capacity(o, &screen);
  ASSERT_FALSE(rows.empty());
  for (const auto& r : rows) EXPECT_NE(r.at("vllm.max_num_seqs"), "0") << screen;
  EXPECT_EQ(rows.front().at("vllm.max_num_seqs"), "1") << screen;
  EXPECT_NE(screen.find("capacity    every value probed holds, down to max_num_seqs 1 (the "
                        "scenario's limit)"),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("vllm.max_num_seqs: 0 is not an amount here: it means vLLM's default"),
            std::string::npos)
      << screen;
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
// at the bounds [1e-6, 1e6], by doublings from the scenario's scale and then the bound itself.
TEST(Capacity, SaysWhenNoScaleOrEveryScaleHolds) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=40", "slo.ttft_ms=0"};
  std::string screen;
  Rows rows = capacity(o, &screen);
  EXPECT_NE(screen.find("capacity    no value probed holds, down to rate_scale 1e-06 (the "
                        "field's bound)\n"),
            std::string::npos)
      << screen;
  EXPECT_EQ(screen.find("every probe rejected"), std::string::npos) << screen;  // none was
  ASSERT_EQ(rows.size(), 21u);  // 1e-6 (the bound, past 2^-20), 2^-19, ..., 1/2, 1
  EXPECT_EQ(rows[0].at("workload.rate_scale"), "1e-06");
  EXPECT_EQ(rows[1].at("workload.rate_scale"), "1.9073e-06");
  for (const auto& r : rows) EXPECT_EQ(r.at("holds"), "0");

  o.sets = {"workload.max_requests=40", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  rows = capacity(o, &screen);
  EXPECT_NE(screen.find("capacity    every value probed holds, up to rate_scale 1e+06 (the "
                        "field's bound)\n"),
            std::string::npos)
      << screen;
  ASSERT_EQ(rows.size(), 21u);  // 1, 2, ..., 2^19, 1e6 (the bound, short of 2^20)
  EXPECT_EQ(rows[19].at("workload.rate_scale"), "5.2429e+05");
  EXPECT_EQ(rows[20].at("workload.rate_scale"), "1e+06");
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
  // From 32: 32 and 16 run alike (this trace keeps no more than 16 busy), but halving past a
  // same run still finds the answer: only doublings that change nothing end a search.
  o.sets.back() = "cluster.instances=32";
  o.probes = 1;  // one halving a round: 16 alone after 32
  const Rows from_32 = capacity(o, &screen);
  const auto same = [&](const char* count) {
    for (const auto& r : from_32)
      if (r.at("cluster.instances") == count) return r.at("slo_attainment");
    return std::string("missing");
  };
  EXPECT_EQ(same("32"), same("16")) << screen;
  EXPECT_NE(screen.find("capacity    instances " + std::to_string(n) + " holds: "),
            std::string::npos)
      << screen;
}

// A search that doubles a key which stopped changing the run ends there: past the trace's 1,750
// requests, workload.max_requests of 2,000 and 4,000 replay the same requests, and no value can
// meet a TTFT target of 0.
TEST(Capacity, StopsDoublingAKeyThatNoLongerChangesTheRun) {
  CapacityOptions o;
  o.key = "workload.max_requests";
  o.sets = {"workload.max_requests=1000", "slo.ttft_ms=0"};
  o.probes = 2;
  std::string screen;
  const Rows rows = capacity(o, &screen);
  ASSERT_EQ(rows.size(), 3u) << screen;
  EXPECT_EQ(rows[2].at("workload.max_requests"), "4000");
  EXPECT_EQ(rows[1].at("finished"), rows[2].at("finished"));
  EXPECT_NE(screen.find("capacity    no value probed holds, up to max_requests 4000 (where the key "
                        "stopped changing the run)\nnote        max_requests 2000 and 4000 gave "
                        "the same run: the search stopped there\n"),
            std::string::npos)
      << screen;
}

// A number key whose every value holds is halved 20 times, then probed at its bound: a disk tier
// of 1 GiB per rank and every size below it hold with SLOs no run misses, and the search ends at
// 0 (off) after 22 probes. Halving toward 0 alone took 1,025, down through the denormals.
TEST(Capacity, HalvesANumberKeyAMillionfoldThenProbesItsBound) {
  CapacityOptions o;
  o.key = "lmcache.max_local_disk_size_gb";
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9",
            "lmcache.max_local_disk_size_gb=1"};
  o.jobs = 2;
  std::string screen;
  const Rows rows = capacity(o, &screen);
  ASSERT_EQ(rows.size(), 22u) << screen;
  EXPECT_EQ(rows[0].at("lmcache.max_local_disk_size_gb"), "0");
  EXPECT_EQ(rows[1].at("lmcache.max_local_disk_size_gb"), "9.5367e-07");  // 2^-20
  EXPECT_EQ(rows[21].at("lmcache.max_local_disk_size_gb"), "1");
  for (const auto& row : rows) EXPECT_EQ(row.at("holds"), "1");
  EXPECT_NE(screen.find("capacity    every value probed holds, down to max_local_disk_size_gb 0 "
                        "(the field's bound)\n"),
            std::string::npos)
      << screen;
}

// A window of the trace is in scaled time: the rate search says that each probe replays another
// part of it; a search over the first N requests does not, nor one of another key.
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
  // Nor does a most search of another key: the window stays where it is.
  o.key = "gpu.step_overhead_us";
  o.most = true;
  o.sets = {"workload.start_s=300", "workload.max_duration_s=60"};
  capacity(o, &screen);
  EXPECT_NE(screen.find("(the most gpu.step_overhead_us that holds)"), std::string::npos) << screen;
  EXPECT_EQ(screen.find(note), std::string::npos) << screen;
}

// Values the scenario refuses are not probed. Narrowing skips them: tensor-parallel sizes must
// divide the 32 heads, so between a failing 4 and a holding 8 there is nothing to try, and the
// answer names 5, 6 and 7 as refused. Bracketing stops at the last value the scenario accepts:
// a CPU pool halved below one byte (every size holds with SLOs no run misses).
TEST(Capacity, SkipsTheValuesTheScenarioRefuses) {
  CapacityOptions o;
  o.key = "gpu.tensor_parallel";
  o.sets = {"workload.max_requests=30", "gpu.tensor_parallel=8", "slo.ttft_ms=1500"};
  o.slo_attainment = 1;
  std::string screen;
  Rows rows = capacity(o, &screen);
  // 8, then a round of halvings 4, 2, 1; nothing the scenario accepts lies between 4 and 8.
  ASSERT_EQ(rows.size(), 4u) << screen;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i].at("gpu.tensor_parallel"), std::to_string(1 << i));
    EXPECT_EQ(rows[i].at("holds"), i == 3 ? "1" : "0") << i;
  }
  EXPECT_NE(screen.find("capacity    tensor_parallel 8 holds: "), std::string::npos) << screen;
  EXPECT_NE(screen.find("note        tensor_parallel 5, 6, 7 skipped: the scenario refuses them, "
                        "as in\n            gpu.tensor_parallel: gpu.tensor_parallel must divide "
                        "model.num_heads\n            (gpu.tensor_parallel = 7, model.num_heads = "
                        "32)\n"),
            std::string::npos)
      << screen;

  o = {};
  o.key = "lmcache.max_local_cpu_size_gb";
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  o.precision = 1;
  o.probes = 2;
  rows = capacity(o, &screen);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.front().at("lmcache.max_local_cpu_size_gb"), "1.1642e-09");  // 80 / 2^36: 1.25 B
  EXPECT_NE(screen.find("capacity    every value probed holds, down to max_local_cpu_size_gb "
                        "1.1642e-09 (the scenario's limit)\nnote        the scenario refuses "
                        "max_local_cpu_size_gb beyond that value:\n            "
                        "lmcache.max_local_cpu_size_gb: LMCache needs a CPU pool of at least one "
                        "byte"),
            std::string::npos)
      << screen;
}

// Whether run_capacity refuses `o` with an InputError whose text holds `message` (quietly: a
// search it does not refuse runs to its end).
bool refused(CapacityOptions o, const std::string& message) {
  o.quiet = true;
  try {
    run_capacity(o);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    return true;
  }
  return false;
}

TEST(Capacity, RefusesOptionsOutOfRange) {
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
  o.key = "cost.gpu_per_hour";  // a price: every probe the same run
  o.sets = {"cost.gpu_per_hour=2"};
  EXPECT_TRUE(refused(o, "--for: cost.gpu_per_hour: a price changes no run; search a resource"));
  o = {};  // a start vLLM would not start with, as a plain run refuses it
  o.sets = {"vllm.max_model_len=524288"};
  EXPECT_TRUE(refused(o, "--set: vllm.max_model_len: one request of 524288 tokens needs"));
  o.key = "vllm.max_model_len";
  EXPECT_TRUE(refused(o, "--for: vllm.max_model_len: one request of 524288 tokens needs"));
  o = {};
  o.most = o.least = true;
  EXPECT_TRUE(refused(o, "--most: workload.rate_scale: give --most or --least, not both"));
}

// The answer a single search's screen gives: {holding value, failing value}, either empty at a
// bound ("no value probed holds, down to rate_scale X" gives {"", X}).
std::pair<std::string, std::string> answer_of(const std::string& screen, const std::string& name) {
  auto word_after = [&](const std::string& lead) -> std::string {
    const size_t at = screen.find(lead);
    if (at == std::string::npos) return "";
    const size_t from = at + lead.size();
    return screen.substr(from, screen.find(' ', from) - from);
  };
  const std::string ok = word_after("capacity    " + name + " ");
  if (!ok.empty()) return {ok, word_after("            " + name + " ")};
  const std::string bound = word_after(", down to " + name + " ");
  if (screen.find("capacity    every value probed holds") != std::string::npos)
    return {word_after(", up to " + name + " "), ""};
  return {"", bound.empty() ? word_after(", up to " + name + " ") : bound};
}

// --most: the most of a key more of which hurts. At 40 % of the trace's rate the default
// scenario's 3 ms of step overhead holds; the search doubles it to a failing value and narrows to
// neighbours. Plain runs at the two values give the verdicts the search gave. Without --most
// the same key is searched as a resource: every value holds down to 0, and a note points to
// --most; with --least given, no note. --most on the rate is the default search, byte for byte.
TEST(Capacity, MostFindsTheMostOfAKeyThatHurts) {
  CapacityOptions o;
  o.key = "gpu.step_overhead_us";
  o.most = true;
  o.sets = {"workload.max_requests=300", "workload.rate_scale=0.4"};
  o.jobs = 2;
  std::string screen;
  const Rows rows = capacity(o, &screen);
  EXPECT_NE(screen.find("(the most gpu.step_overhead_us that holds)"), std::string::npos) << screen;
  const auto [ok, bad] = answer_of(screen, "step_overhead_us");
  ASSERT_FALSE(ok.empty()) << screen;
  ASSERT_FALSE(bad.empty()) << screen;
  EXPECT_GT(std::stod(ok), 3000);  // the start held, so the answer lies above it
  EXPECT_GT(std::stod(bad), std::stod(ok));
  EXPECT_LE(std::stod(bad) / std::stod(ok), 1.05);
  for (const auto& r : rows) {
    const double v = num(r, "gpu.step_overhead_us");
    if (v <= std::stod(ok)) {
      EXPECT_EQ(r.at("holds"), "1") << v;
    }
    if (v >= std::stod(bad)) {
      EXPECT_EQ(r.at("holds"), "0") << v;
    }
  }
  for (const auto& [value, holds] : {std::pair{ok, true}, std::pair{bad, false}}) {
    const report::Summary plain =
        simulate(load_scenario("", {"workload.max_requests=300", "workload.rate_scale=0.4",
                                    "gpu.step_overhead_us=" + value}),
                 "", "", true, nullptr);
    EXPECT_EQ(plain.slo_attainment >= 0.9 && !plain.load.saturated, holds) << value;
  }
  const std::string hint =
      "note        if more step_overhead_us hurts (a latency, an overhead), --most finds the most "
      "that\n            holds\n";
  EXPECT_EQ(screen.find(hint), std::string::npos) << screen;

  o.most = false;
  o.sets[0] = "workload.max_requests=40";  // fewer requests: 22 probes to come
  capacity(o, &screen);
  EXPECT_NE(screen.find("(the least gpu.step_overhead_us that holds)"), std::string::npos)
      << screen;
  EXPECT_NE(screen.find("capacity    every value probed holds, down to step_overhead_us 0 (the "
                        "field's bound)\n" +
                        hint),
            std::string::npos)
      << screen;
  o.least = true;
  capacity(o, &screen);
  EXPECT_NE(screen.find("down to step_overhead_us 0 (the field's bound)\n"), std::string::npos)
      << screen;
  EXPECT_EQ(screen.find("--most"), std::string::npos) << screen;
  // From a value that fails, a least search climbs to the bound and gives the note too.
  o.least = false;
  o.sets = {"workload.max_requests=40", "slo.ttft_ms=0"};
  capacity(o, &screen);
  EXPECT_NE(screen.find("capacity    no value probed holds, up to step_overhead_us "),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find(hint), std::string::npos) << screen;

  // The rate's default is --most: the same bytes.
  CapacityOptions rate;
  rate.sets = {"workload.max_requests=100"};
  rate.precision = 0.2;
  std::string dir_default, dir_most;
  capacity(rate, nullptr, &dir_default);
  rate.most = true;
  capacity(rate, nullptr, &dir_most);
  EXPECT_EQ(slurp(dir_default + "/capacity.csv"), slurp(dir_most + "/capacity.csv"));
  EXPECT_FALSE(slurp(dir_most + "/capacity.csv").empty());
}

// A rejected or a failed request is a miss: the verdict is the share of the window's requests
// that finished within the SLOs (window_attainment), not goodput.slo_attainment's share of the
// finished ones. From a GPU pool of 300 blocks, which rejects most of the default scenario's
// prompts at half its rate while the few it serves meet the SLOs, the search climbs to a pool
// that serves them; judged by the finished alone it had answered 58 blocks. A remote tier whose
// GETs fail ends requests (vLLM's kv_load_failure_policy "fail"): with SLOs every finished request
// meets, the most failure rate that holds is where the failed share passes 1 - A.
TEST(Capacity, RejectedAndFailedRequestsCountAsMisses) {
  CapacityOptions o;
  o.key = "vllm.num_gpu_blocks";
  o.sets = {"workload.max_requests=400", "workload.rate_scale=0.5", "vllm.num_gpu_blocks=300"};
  o.jobs = 2;
  std::string screen;
  Rows rows = capacity(o, &screen);
  auto check_rows = [&](const Rows& rs, double target) {
    for (const auto& r : rs) {
      const double all = num(r, "finished") + num(r, "rejected") + num(r, "failed");
      const double met = num(r, "slo_attainment") * num(r, "finished");
      EXPECT_NEAR(num(r, "window_attainment"), met / all, 1e-6);
      const bool holds = num(r, "window_attainment") >= target && r.at("saturated") == "0";
      EXPECT_EQ(r.at("holds"), holds ? "1" : "0") << r.at("probe");
    }
  };
  check_rows(rows, 0.9);
  ASSERT_EQ(rows.front().at("vllm.num_gpu_blocks"), "300");
  EXPECT_GT(num(rows.front(), "rejected"), 200);
  EXPECT_GE(num(rows.front(), "slo_attainment"), 0.9);  // the finished alone would hold
  EXPECT_EQ(rows.front().at("holds"), "0");
  // The screen's "meet SLOs" is the verdict's share: 300 blocks' row, and the answer's line.
  auto percent = [](const std::string& share) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * std::stod(share));
    return std::string(buf);
  };
  const size_t row300 = screen.find("\n           300 ");
  ASSERT_NE(row300, std::string::npos) << screen;
  const std::string line300 = screen.substr(row300, screen.find('\n', row300 + 1) - row300);
  EXPECT_NE(line300.find(" " + percent(rows.front().at("window_attainment")) + " "),
            std::string::npos)
      << line300;
  EXPECT_NE(line300.find("fails: rejected"), std::string::npos) << line300;
  const auto [ok, bad] = answer_of(screen, "num_gpu_blocks");
  ASSERT_FALSE(ok.empty()) << screen;
  ASSERT_FALSE(bad.empty()) << screen;
  EXPECT_GT(std::stoi(ok), 300);
  EXPECT_LT(std::stoi(bad), std::stoi(ok));
  for (const auto& r : rows) {
    if (r.at("vllm.num_gpu_blocks") != ok) continue;
    EXPECT_NE(
        screen.find(" req/s offered, " + percent(r.at("window_attainment")) + " meet the SLOs\n"),
        std::string::npos)
        << screen;
  }
  EXPECT_NE(screen.find("target      90.0% of requests finished with TTFT <= 2000 ms and TPOT <= "
                        "100 ms (a rejected\n            or failed one misses)"),
            std::string::npos)
      << screen;

  o = {};
  o.key = "links.remote_get_failure_rate";
  o.most = true;
  o.slo_attainment = 0.97;
  o.sets = {"workload.max_requests=300",
            "slo.ttft_ms=1e9",
            "slo.tpot_ms=1e9",
            "lmcache.remote=true",
            "cluster.router=round_robin",
            "links.remote_get_failure_rate=0.01"};
  o.jobs = 2;
  rows = capacity(o, &screen);
  check_rows(rows, 0.97);
  bool some_failed = false;
  for (const auto& r : rows) {
    EXPECT_EQ(r.at("slo_attainment"), "1.000000");
    EXPECT_EQ(r.at("rejected"), "0");
    some_failed = some_failed || (r.at("holds") == "0" && num(r, "failed") > 0);
  }
  EXPECT_TRUE(some_failed);
  const auto [most_ok, most_bad] = answer_of(screen, "remote_get_failure_rate");
  ASSERT_FALSE(most_ok.empty()) << screen;
  ASSERT_FALSE(most_bad.empty()) << screen;
  EXPECT_LT(std::stod(most_ok), std::stod(most_bad));
  EXPECT_NE(screen.find(most_bad + " fails: failed ("), std::string::npos) << screen;
  std::string most_window;  // the holding probe's, below 1: some of its requests failed
  for (const auto& r : rows)
    if (r.at("links.remote_get_failure_rate") == most_ok) most_window = r.at("window_attainment");
  ASSERT_FALSE(most_window.empty());
  EXPECT_LT(std::stod(most_window), 1);
  EXPECT_NE(screen.find(" req/s offered, " + percent(most_window) + " meet the SLOs\n"),
            std::string::npos)
      << screen;

  // A frontier's row gives the holding probe's window_attainment beside its slo_attainment.
  o.vary = {"cluster.instances=4"};
  std::string frontier_screen;
  const Rows frontier = capacity(o, &frontier_screen);
  ASSERT_EQ(frontier.size(), 1u);
  EXPECT_EQ(frontier[0].at("holds"), most_ok);
  EXPECT_EQ(frontier[0].at("slo_attainment"), "1.000000");
  EXPECT_EQ(frontier[0].at("window_attainment"), most_window);
  const size_t point0 = frontier_screen.find("\n    0  4 ");
  ASSERT_NE(point0, std::string::npos) << frontier_screen;
  const std::string row0 =
      frontier_screen.substr(point0, frontier_screen.find('\n', point0 + 1) - point0);
  EXPECT_NE(row0.find(" " + percent(most_window) + " "), std::string::npos) << row0;
}

// Prompts over vllm.max_model_len are rejected at any rate and any step overhead: with a 2,048-
// token limit, 34 of the first 40 requests are. No value holds, and a note says that the rejected
// requests alone kept the target out of reach, in place of the burst note (rate) or the --most
// hint (another key).
TEST(Capacity, SaysWhenTheRejectedRequestsAloneMissTheTarget) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=40", "vllm.max_model_len=2048"};
  std::string screen;
  Rows rows = capacity(o, &screen);
  const std::string note =
      "note        every probe rejected more than 10.0% of the requests (prompts over\n"
      "            vllm.max_model_len or the GPU pool): the target was out of reach there\n";
  for (const auto& r : rows) {
    EXPECT_GT(num(r, "rejected"), 4) << r.at("probe");
    EXPECT_EQ(r.at("holds"), "0");
  }
  EXPECT_NE(screen.find(note), std::string::npos) << screen;
  EXPECT_EQ(screen.find("arrive at one instant"), std::string::npos) << screen;

  // The step overhead, doubled from a failing 3 ms to its bound, changes every run: a least
  // search of it that never held would end with the --most hint, but not here.
  o.key = "gpu.step_overhead_us";
  rows = capacity(o, &screen);
  EXPECT_NE(screen.find("capacity    no value probed holds, up to step_overhead_us 1e+07 (the "
                        "field's bound)\n"),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find(note), std::string::npos) << screen;
  EXPECT_EQ(screen.find("--most"), std::string::npos) << screen;

  // A limit that rejects 2 of the 40 (5 %): no note, though no value holds.
  o.key = "workload.rate_scale";
  o.sets = {"workload.max_requests=40", "vllm.max_model_len=32000", "slo.ttft_ms=0"};
  rows = capacity(o, &screen);
  for (const auto& r : rows) EXPECT_EQ(r.at("rejected"), "2") << r.at("probe");
  EXPECT_EQ(screen.find("every probe rejected"), std::string::npos) << screen;
  // Nor when only some probes reject too many: a longer limit rejects fewer.
  o.key = "vllm.max_model_len";
  o.sets = {"workload.max_requests=40", "vllm.max_model_len=2048", "slo.ttft_ms=0"};
  rows = capacity(o, &screen);
  EXPECT_GT(num(rows.front(), "rejected"), 4);
  EXPECT_LE(num(rows.back(), "rejected"), 4);
  EXPECT_EQ(screen.find("every probe rejected"), std::string::npos) << screen;
}

// A value with which vLLM would not start is refused like one the scenario's validation refuses.
// With 25.1 GiB of GPU memory one request of 32,768 tokens does not fit the KV cache (29,760
// does: 25.1 · 0.9 − 14.957 GiB of weights − 4 GiB leave 3.633 GiB, 1,860 blocks of 2 MiB): the
// search for the least max_model_len doubles from a failing 8,192 to 16,384, meets the
// refusal, probes the accepted edge, 29,760, which holds, and narrows to the answer between. (It
// was an error that ended the search at dbbabce's parent, and "no value holds up to 16384, the
// scenario's limit" at dbbabce.) With SLOs no run meets, the search ends at that edge and says
// why the next value is refused.
TEST(Capacity, RefusesTheValuesVllmWouldNotStartWith) {
  CapacityOptions o;
  o.key = "vllm.max_model_len";
  o.sets = {"workload.max_requests=20", "gpu.memory_gb=25.1", "vllm.max_model_len=8192",
            "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  std::string screen;
  Rows rows = capacity(o, &screen);
  ASSERT_GE(rows.size(), 4u) << screen;
  EXPECT_EQ(rows[0].at("vllm.max_model_len"), "8192");
  EXPECT_EQ(rows[1].at("vllm.max_model_len"), "16384");
  EXPECT_EQ(rows.back().at("vllm.max_model_len"), "29760");
  EXPECT_EQ(rows.back().at("holds"), "1");
  const auto [ok, bad] = answer_of(screen, "max_model_len");
  ASSERT_FALSE(ok.empty()) << screen;
  ASSERT_FALSE(bad.empty()) << screen;
  EXPECT_GT(std::stoi(ok), 16384);
  EXPECT_LT(std::stoi(bad), std::stoi(ok));
  EXPECT_LE(std::stod(ok) / std::stod(bad), 1.05);
  EXPECT_EQ(screen.find("the scenario's limit"), std::string::npos) << screen;

  o.sets[3] = "slo.ttft_ms=0";
  rows = capacity(o, &screen);
  ASSERT_EQ(rows.size(), 3u) << screen;
  EXPECT_EQ(rows[2].at("vllm.max_model_len"), "29760");
  EXPECT_NE(screen.find("capacity    no value probed holds, up to max_model_len 29760 (the "
                        "scenario's limit)\n"),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("note        the scenario refuses max_model_len beyond that value:\n"
                        "            vllm.max_model_len: one request of 29761 tokens needs"),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("vLLM refuses to start"), std::string::npos) << screen;
}

// --vary runs one search per point of the grid (first axis outermost), each the very search that
// --set of the point's values runs alone: the point's capacity.csv is byte-equal, and its
// frontier.csv row is that search's answer, the holding probe's figures, its probe count and
// whether a probe fell on the wrong side. How the threads are split changes no byte.
TEST(CapacityVary, EachPointIsTheSearchItsSetsRunAlone) {
  CapacityOptions o;
  o.sets = {"workload.max_requests=200"};
  o.vary = {"cluster.instances=2,4", "workload.arrivals=trace,spread"};
  o.jobs = 2;
  const std::string dir = kvtwin::testing::scratch_subdir();
  o.out = dir;
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(run_capacity(o), 0);
  const std::string screen = ::testing::internal::GetCapturedStdout();
  const Rows rows = read_csv(dir + "/frontier.csv");
  ASSERT_EQ(rows.size(), 4u) << screen;
  {  // every line has the header's fields, a point without a holding value included
    std::istringstream lines(slurp(dir + "/frontier.csv"));
    std::string line, header;
    std::getline(lines, header);
    while (std::getline(lines, line))
      EXPECT_EQ(std::count(line.begin(), line.end(), ','),
                std::count(header.begin(), header.end(), ','))
          << line;
  }
  const char* instances[] = {"2", "2", "4", "4"};
  const char* arrivals[] = {"trace", "spread", "trace", "spread"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    EXPECT_EQ(r.at("point"), std::to_string(i));
    EXPECT_EQ(r.at("cluster.instances"), instances[i]);
    EXPECT_EQ(r.at("workload.arrivals"), arrivals[i]);
    CapacityOptions alone = o;
    alone.vary.clear();
    alone.sets.push_back(std::string("cluster.instances=") + instances[i]);
    alone.sets.push_back(std::string("workload.arrivals=") + arrivals[i]);
    alone.jobs = 1;
    std::string alone_screen, alone_dir;
    const Rows probes = capacity(alone, &alone_screen, &alone_dir);
    const std::string point = dir + "/points/" + std::to_string(i);
    ASSERT_NE(point, alone_dir);
    EXPECT_EQ(slurp(point + "/capacity.csv"), slurp(alone_dir + "/capacity.csv")) << i;
    const auto [ok, bad] = answer_of(alone_screen, "rate_scale");
    EXPECT_EQ(r.at("holds"), ok) << alone_screen;
    EXPECT_EQ(r.at("fails"), bad) << alone_screen;
    EXPECT_EQ(r.at("probes"), std::to_string(probes.size()));
    EXPECT_EQ(r.at("not_monotone") == "1",
              alone_screen.find("the verdict is not monotone") != std::string::npos)
        << alone_screen;
    // The holding probe's figures (all empty without one): what the answer needs.
    const std::map<std::string, std::string>* holding = nullptr;
    for (const auto& p : probes)
      if (p.at("workload.rate_scale") == ok) holding = &p;
    ASSERT_EQ(holding != nullptr, !ok.empty()) << i;
    for (const char* column :
         {"offered_requests_per_s", "slo_attainment", "ttft_p99_ms", "total_hit_rate",
          "kv_usage_peak", "cpu_peak_gib", "pcie_d2h_busy", "remote_tx_busy", "pcie_d2h_peak_gbps"})
      EXPECT_EQ(r.at(column), holding ? holding->at(column) : "") << i << " " << column;
    EXPECT_TRUE(std::filesystem::exists(point + "/points/0/summary.json")) << i;
    // The screen's row: "<point>  <values...>  <holds> <fails> ...", "-" for an empty answer.
    const std::string lead = "\n    " + std::to_string(i) + "  " + instances[i];
    const size_t at = screen.find(lead);
    ASSERT_NE(at, std::string::npos) << screen;
    std::istringstream row(screen.substr(at + 1, screen.find('\n', at + 1) - at - 1));
    std::string index, n, how, holds, fails;
    row >> index >> n >> how >> holds >> fails;
    EXPECT_EQ(how, arrivals[i]);
    EXPECT_EQ(holds, ok.empty() ? "-" : ok) << screen;
    EXPECT_EQ(fails, bad.empty() ? "-" : bad) << screen;
  }
  // Two instances with the recorded arrivals hold at no rate: the trace's bursts arrive together
  // at any rate_scale, and the screen says so for that point alone. Spread, they hold; four
  // instances hold more than two.
  EXPECT_EQ(rows[0].at("holds"), "");
  EXPECT_NE(screen.find("note        point 0: no value probed holds, down to rate_scale "),
            std::string::npos)
      << screen;
  EXPECT_NE(screen.find("note        point 0: up to "), std::string::npos) << screen;
  for (const char* other : {"point 1: up to", "point 2: up to", "point 3: up to"})
    EXPECT_EQ(screen.find(other), std::string::npos) << screen;
  for (size_t i = 1; i < 4; ++i) EXPECT_NE(rows[i].at("holds"), "") << i;
  EXPECT_GT(std::stod(rows[3].at("holds")), std::stod(rows[1].at("holds")));
  // The plot: the rate found and the offered rate there, against the first varied key.
  const std::string gp = slurp(dir + "/plots/frontier.gp");
  EXPECT_NE(gp.find("set ylabel 'most workload.rate_scale that holds'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set ylabel 'offered requests/s there'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("title 'workload.arrivals=spread'"), std::string::npos) << gp;

  // Eight threads: four points side by side, two probes of each at once.
  o.jobs = 8;
  o.quiet = true;
  o.out = kvtwin::testing::scratch_subdir();
  ASSERT_EQ(run_capacity(o), 0);
  EXPECT_EQ(slurp(dir + "/frontier.csv"), slurp(o.out + "/frontier.csv"));
  for (int i = 0; i < 4; ++i) {
    const std::string csv = "/points/" + std::to_string(i) + "/capacity.csv";
    EXPECT_EQ(slurp(dir + csv), slurp(o.out + csv)) << i;
  }
}

// A resource's frontier: SLOs every run meets hold down to one instance at each point, and the
// plot draws the least instances and the hit rate there (the offered rate is the scenario's).
TEST(CapacityVary, AResourceFrontierPlotsTheLeastValueAndTheHitRateThere) {
  CapacityOptions o;
  o.key = "cluster.instances";
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  o.vary = {"cluster.router=round_robin,prefix_aware"};
  o.quiet = true;
  o.out = kvtwin::testing::scratch_subdir();
  ASSERT_EQ(run_capacity(o), 0);
  const Rows rows = read_csv(o.out + "/frontier.csv");
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.at("holds"), "1");
    EXPECT_EQ(r.at("fails"), "");
    EXPECT_EQ(r.at("probes"), "3");  // 4, 2, 1
  }
  const std::string gp = slurp(o.out + "/plots/frontier.gp");
  EXPECT_NE(gp.find("set ylabel 'least cluster.instances that holds'"), std::string::npos) << gp;
  // A grid that varies an SLO says the target is each point's.
  o.vary = {"slo.ttft_ms=1e8,1e9"};
  o.quiet = false;
  o.out = kvtwin::testing::scratch_subdir();
  ::testing::internal::CaptureStdout();
  ASSERT_EQ(run_capacity(o), 0);
  const std::string screen = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(screen.find("target      90.0% of requests finished within each point's "
                        "slo.ttft_ms and slo.tpot_ms"),
            std::string::npos)
      << screen;
  EXPECT_NE(gp.find("set ylabel 'hit rate (GPU + LMCache) there'"), std::string::npos) << gp;
  EXPECT_NE(gp.find(":xtic(1)"), std::string::npos) << gp;  // routers are names, not numbers
}

// With prices, frontier.csv gives what each answer costs and the screen names the cheapest
// point. SLOs every run meets hold at one instance everywhere, so each answer costs (by hand) its
// GPUs at 2 an hour and its CPU pools, one per rank, at 0.01 a GiB-hour:
//   point 0: 40 GiB, TP 2: 2·2 + 80·0.01 = 4.80     point 1: 40 GiB, TP 1: 2 + 0.40 = 2.40
//   point 2: 10 GiB, TP 2: 4 + 0.20 = 4.20           point 3: 10 GiB, TP 1: 2 + 0.10 = 2.10
TEST(CapacityVary, NamesTheCheapestPointAndWhatEachAnswerCosts) {
  CapacityOptions o;
  o.key = "cluster.instances";
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9", "cost.gpu_per_hour=2",
            "cost.cpu_memory_gib_per_hour=0.01"};
  o.vary = {"lmcache.max_local_cpu_size_gb=40,10", "gpu.tensor_parallel=2,1"};
  std::string screen, dir;
  const Rows rows = capacity(o, &screen, &dir);
  ASSERT_EQ(rows.size(), 4u);
  const double want[] = {4.8, 2.4, 4.2, 2.1};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].at("holds"), "1") << i;
    EXPECT_EQ(rows[i].at("cost_per_hour"), std::to_string(want[i])) << i;  // "%.6f"
    EXPECT_GT(num(rows[i], "cost_per_k_good_requests"), 0);
  }
  EXPECT_NE(screen.find("cost/h   /1k good\n"), std::string::npos) << screen;
  EXPECT_NE(screen.find("cheapest    point 3, at 2.10 per hour: "
                        "lmcache.max_local_cpu_size_gb=10, gpu.tensor_parallel=1\n"),
            std::string::npos)
      << screen;
  const std::string gp = slurp(dir + "/plots/frontier.gp");
  EXPECT_NE(gp.find("set ylabel 'cost per hour there'"), std::string::npos) << gp;

  // The rate: the cheapest point is the one whose requests within the SLOs cost least, not the
  // one whose hour costs least. Instances of one GPU at 2 an hour and of two at 1 cost the same
  // hour; every rate holds up to the bound, where the two GPUs serve the requests sooner (a
  // larger goodput), so each of their requests costs less.
  CapacityOptions rate;
  rate.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  rate.vary = {"gpu.tensor_parallel/cost.gpu_per_hour=1/2,2/1"};
  std::string rate_screen;
  const Rows r = capacity(rate, &rate_screen);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].at("cost_per_hour"), "8.000000");  // the scenario's 4 instances
  EXPECT_EQ(r[1].at("cost_per_hour"), "8.000000");
  EXPECT_LT(num(r[1], "cost_per_k_good_requests"), num(r[0], "cost_per_k_good_requests"));
  EXPECT_NE(rate_screen.find("cheapest    point 1, at "), std::string::npos) << rate_screen;
  EXPECT_NE(rate_screen.find(" per 1k requests within the SLOs: gpu.tensor_parallel=2,\n"
                             "            cost.gpu_per_hour=1\n"),
            std::string::npos)
      << rate_screen;

  // Unpriced: no cost columns filled, no cheapest point.
  o.sets.resize(3);
  std::string plain, plain_dir;
  const Rows unpriced = capacity(o, &plain, &plain_dir);
  EXPECT_EQ(plain.find("cheapest"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("cost/h"), std::string::npos) << plain;
  ASSERT_EQ(unpriced.size(), 4u);
  for (const auto& row : unpriced) EXPECT_EQ(row.at("cost_per_hour"), "");
  const std::string plain_gp = slurp(plain_dir + "/plots/frontier.gp");
  ASSERT_FALSE(plain_gp.empty());
  EXPECT_EQ(plain_gp.find("cost"), std::string::npos);
}

// A most search of another key than the rate holds the rate, as a resource's does: its cheapest
// point is the least per hour, its plot the hit rate. Instances of one GPU at 2 an hour and of
// two at 1 cost the same hour (point 0 first on the tie), while the two GPUs serve the requests
// sooner and so cost less per request: ranking by request would pick point 1.
TEST(CapacityVary, AMostSearchOfAnotherKeyRanksPointsByTheHour) {
  CapacityOptions o;
  o.key = "gpu.step_overhead_us";
  o.most = true;
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9"};
  o.vary = {"gpu.tensor_parallel/cost.gpu_per_hour=1/2,2/1"};
  std::string screen, dir;
  const Rows r = capacity(o, &screen, &dir);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].at("cost_per_hour"), "8.000000");
  EXPECT_EQ(r[1].at("cost_per_hour"), "8.000000");
  EXPECT_LT(num(r[1], "cost_per_k_good_requests"), num(r[0], "cost_per_k_good_requests"));
  EXPECT_NE(screen.find("cheapest    point 0, at 8.00 per hour: "), std::string::npos) << screen;
  EXPECT_NE(screen.find("holds       the most step_overhead_us found to hold"), std::string::npos)
      << screen;
  const std::string gp = slurp(dir + "/plots/frontier.gp");
  EXPECT_NE(gp.find("set ylabel 'most gpu.step_overhead_us that holds'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set ylabel 'hit rate (GPU + LMCache) there'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set ylabel 'cost per hour there'"), std::string::npos) << gp;
}

// A single search with prices says what the holding value costs, per hour and per unit served.
TEST(Capacity, SaysWhatTheHoldingValueCosts) {
  CapacityOptions o;
  o.key = "cluster.instances";
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "slo.tpot_ms=1e9",
            "cost.gpu_per_hour=2.5"};
  std::string screen;
  const Rows rows = capacity(o, &screen);
  ASSERT_FALSE(rows.empty());
  // Every count holds: the answer is one instance, one GPU.
  EXPECT_NE(screen.find("cost        2.50 per hour there\n            "), std::string::npos)
      << screen;
  for (const auto& row : rows)
    EXPECT_EQ(num(row, "cost_per_hour"), 2.5 * num(row, "cluster.instances"));
}

TEST(CapacityVary, RefusesAGridItCannotSearch) {
  CapacityOptions o;
  o.vary = {"workload.rate_scale=1,2"};
  EXPECT_TRUE(refused(o, "--vary: workload.rate_scale: is the key searched (--for)"));
  o.vary = {"cluster.instances/workload.rate_scale=4/1,8/2"};  // inside a linked axis too
  EXPECT_TRUE(refused(o, "--vary: workload.rate_scale: is the key searched (--for)"));
  o.vary = {"cluster.instances"};
  EXPECT_TRUE(refused(o, "--vary: cluster.instances: expected key=v1,v2,..."));
  o.vary = {"cluster.instances=1", "cluster.instances=2"};
  EXPECT_TRUE(refused(o, "--vary: cluster.instances: varied twice"));
  o.vary = {"cluster.instances=2,0"};  // checked before any point runs
  EXPECT_TRUE(refused(o, "cluster.instances"));
  o.key = "vllm.num_gpu_blocks";  // 0 (from the GPU's memory) at every point: nothing to double
  o.vary = {"lmcache.max_local_cpu_size_gb=4,8"};
  EXPECT_TRUE(refused(o, "--for: vllm.num_gpu_blocks: the scenario's value is 0"));
  // A point vLLM would not start with (one request of 524,288 tokens does not fit 80 GB), before
  // anything runs: it crashed the search (a probe of a refused start) at dbbabce.
  o = {};
  o.vary = {"vllm.max_model_len=8192,524288"};
  EXPECT_TRUE(refused(o, "--vary: vllm.max_model_len: one request of 524288 tokens needs"));
  o.key = "vllm.max_model_len";
  o.vary = {"gpu.memory_gb=80,24"};
  o.sets = {"vllm.max_model_len=65536"};
  EXPECT_TRUE(refused(o, "vLLM refuses to start"));
}

}  // namespace
}  // namespace kvtwin::sim::cli
