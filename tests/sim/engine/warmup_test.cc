// workload.warmup_s: requests before the window fill the caches and are replayed in full, but the
// summary reports the window alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cli/common.h"
#include "sim/report/run_recorder.h"
#include "tests/sim/engine/engine_harness.h"

namespace kvtwin::sim::engine {
namespace {

using Result = harness::RunResult;

// Llama-3.1-8B geometry, the exact profile step model, LMCache with a CPU tier (as lmcache_test).
scenario::Scenario scenario_with(const std::vector<std::string>& sets) {
  return harness::lmcache_cpu_scenario("warm.toml", sets);
}

// A and C share a 1024-token prompt (ids 1 2); B (ids 3 4) evicts A's last 29 GPU blocks. Each is
// done long before the next arrives.
const char* kTrace =
    "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
    "0,1024,1,512,1 2\n"
    "10,1024,1,512,3 4\n"
    "20,1024,1,512,1 2\n";

Result run(const std::vector<std::string>& sets) {
  scenario::Scenario s = scenario_with(sets);
  return harness::run_cluster(s, kTrace, cli::workload_options(s));
}

// The window [20 s, end) with a 20-s warm-up replays the whole trace on its own clock, so C runs
// exactly as in the whole replay: the same record, field by field. Only C is reported; every
// counter is the whole replay's less that of a replay of the warm-up alone (A and B, which end
// before C arrives): what happened from 20 s on. Without the warm-up, C meets empty caches.
TEST(Warmup, TheWindowRunsAsInTheWholeReplayAndReportsOnlyWhatFollowsItsStart) {
  const Result whole = run({});
  const Result warm = run({"workload.start_s=20", "workload.warmup_s=20"});
  const Result before = run({"workload.max_duration_s=20"});
  const Result cold = run({"workload.start_s=20"});

  ASSERT_EQ(warm.records.size(), 3u);  // the observer sees the warm-up requests end too
  EXPECT_TRUE(warm.records.at(0).warmup);
  EXPECT_TRUE(warm.records.at(1).warmup);
  const report::RequestRecord& c = warm.records.at(2);
  const report::RequestRecord& c_whole = whole.records.at(2);
  EXPECT_FALSE(c.warmup);
  EXPECT_EQ(c.arrival, c_whole.arrival);
  EXPECT_EQ(c.first_scheduled, c_whole.first_scheduled);
  EXPECT_EQ(c.first_token, c_whole.first_token);
  EXPECT_EQ(c.finish, c_whole.finish);
  EXPECT_EQ(c.gpu_hit_tokens, 560);
  EXPECT_EQ(c.lmcache_hit_tokens, 463);
  EXPECT_EQ(c.loaded_tokens, c_whole.loaded_tokens);
  EXPECT_EQ(c.loaded_tokens[report::kTierCpu], 512);

  const report::Summary& w = warm.summary;
  EXPECT_TRUE(w.has_warmup);
  EXPECT_EQ(w.requests, 1u);
  EXPECT_EQ(w.finished, 1u);
  EXPECT_EQ(w.warmup_requests, 2u);
  EXPECT_DOUBLE_EQ(w.measured_from_s, 20.0);
  EXPECT_EQ(w.prompt_tokens, 1024u);
  EXPECT_EQ(w.gpu_hit_tokens, 560u);
  EXPECT_EQ(w.lmcache_hit_tokens, 463u);
  EXPECT_EQ(w.loaded_tokens[report::kTierCpu], 512u);
  EXPECT_DOUBLE_EQ(w.ttft.max, static_cast<double>(c.first_token - c.arrival) / 1e6);
  EXPECT_DOUBLE_EQ(w.duration_s, static_cast<double>(c.finish - c.arrival) / 1e9);

  // Counters: the window's share of the whole replay's.
  EXPECT_EQ(w.steps, whole.summary.steps - before.summary.steps);
  EXPECT_EQ(w.gpu_evictions, whole.summary.gpu_evictions - before.summary.gpu_evictions);
  for (int t = 0; t < report::kNumTiers; ++t)
    EXPECT_EQ(w.tier_evictions[t],
              whole.summary.tier_evictions[t] - before.summary.tier_evictions[t]);
  ASSERT_EQ(w.link_bytes.size(), whole.summary.link_bytes.size());
  for (const auto& [kind, bytes] : whole.summary.link_bytes) {
    const double b = before.summary.link_bytes.count(kind) ? before.summary.link_bytes.at(kind) : 0;
    EXPECT_DOUBLE_EQ(w.link_bytes.at(kind), bytes - b) << kind;
  }
  EXPECT_DOUBLE_EQ(w.link_bytes.at("pcie_h2d"), 67'108'864.0);  // C's two chunks
  EXPECT_DOUBLE_EQ(w.link_bytes.at("pcie_d2h"), 0.0);           // C stores nothing new
  EXPECT_GT(whole.summary.link_bytes.at("pcie_d2h"), 0.0);

  // The same window, cold: nothing to hit.
  EXPECT_FALSE(cold.summary.has_warmup);
  EXPECT_EQ(cold.summary.requests, 1u);
  EXPECT_EQ(cold.summary.gpu_hit_tokens, 0u);
  EXPECT_EQ(cold.summary.lmcache_hit_tokens, 0u);
}

// A warm-up that holds no request changes nothing but the clock: the window's figures are those
// of the window without a warm-up, to the byte (the warm-up is a whole number of sample intervals,
// so the samples fall at the same offsets into the window).
TEST(Warmup, AWarmupWithoutRequestsOnlyMovesTheClock) {
  const Result cold = run({"workload.start_s=10"});
  Result warm = run({"workload.start_s=10", "workload.warmup_s=5"});
  EXPECT_EQ(warm.summary.warmup_requests, 0u);
  EXPECT_DOUBLE_EQ(warm.summary.measured_from_s, 5.0);
  ASSERT_EQ(warm.records.size(), 2u);
  for (const auto& [index, r] : cold.records) {
    const report::RequestRecord& w = warm.records.at(index);
    EXPECT_EQ(w.arrival, r.arrival + 5'000'000'000) << index;
    EXPECT_EQ(w.finish - w.arrival, r.finish - r.arrival) << index;
    EXPECT_EQ(w.gpu_hit_tokens, r.gpu_hit_tokens) << index;
  }
  warm.summary.has_warmup = false;
  warm.summary.measured_from_s = 0;
  EXPECT_EQ(report::RunRecorder::summary_json(warm.summary),
            report::RunRecorder::summary_json(cold.summary));
}

// Without a trace clock (cache-replay's spacing), the window starts with its first request.
TEST(Warmup, ASpacedReplayMeasuresFromTheWindowsFirstRequest) {
  scenario::Scenario s = scenario_with({"workload.start_s=20", "workload.warmup_s=20"});
  workload::WorkloadOptions o = cli::workload_options(s);
  o.spacing_s = 1000;
  const Result r = harness::run_cluster(s, kTrace, o);
  EXPECT_EQ(r.summary.requests, 1u);
  EXPECT_EQ(r.summary.warmup_requests, 2u);
  EXPECT_DOUBLE_EQ(r.summary.measured_from_s, 2000.0);  // C, the third, arrives at 2 · 1000 s
  EXPECT_EQ(r.summary.gpu_hit_tokens, 560u);
  EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("pcie_d2h"), 0.0);
}

}  // namespace
}  // namespace kvtwin::sim::engine
