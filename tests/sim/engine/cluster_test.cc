#include "sim/engine/cluster.h"

#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <map>

#include "sim/cli/common.h"
#include "sim/cli/run_command.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/sim/engine/engine_harness.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::engine {
namespace {

// The exact 1000 µs + 1 µs per token profile.
using harness::write_profile;

using Result = harness::RunResult;

Result run(const scenario::Scenario& s, const std::string& trace) {
  return harness::run_cluster(s, trace);
}

scenario::Scenario tiny(const std::string& dir, const std::vector<std::string>& sets = {}) {
  write_profile(dir);
  scenario::Scenario s = scenario::load_scenario_text(
      "[step]\nmodel = \"profile\"\nprofile = \"profile.csv\"\n"
      "[vllm]\nblock_size = 16\nnum_gpu_blocks = 20\nmax_num_batched_tokens = 64\n"
      "max_num_seqs = 2\n",
      "tiny.toml", dir);
  for (const std::string& set : sets) scenario::apply_override(&s, set);
  scenario::validate(s);
  return s;
}

constexpr SimTime kUs = 1000;

// The synchronous loop (vllm.async_scheduling = false), hand-computed (step = 1000 µs + 1 µs per
// scheduled token):
//   step 1 [0, 1064]      r0 prefill 64                        → r0 token 1 at 1064 µs
//   step 2 [1064, 2081]   r0 decode 1 + r1 prefill 16 (48 hit) → r0 done, r1 token 1 at 2081 µs
//                         r2 waits: two requests already run (max_num_seqs = 2)
//   step 3 [2081, 3145]   r1 decode 1 + r2 chunk 63 (budget)   → r1 done at 3145 µs
//   step 4 [3145, 4146]   r2 last prompt token                 → r2 token 1, done at 4146 µs
const char* const kSmallTrace =
    "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
    "0,64,2,16,1 2 3 4\n"
    "0,64,2,16,1 2 3 5\n"
    "0,64,1,16,9 8 7 6\n";

// Each request's hand-computed times (µs) and output tokens, and the run's steps.
struct Timeline {
  int64_t first_scheduled_us, first_token_us, finish_us, output_tokens;
};
void expect_small_trace(const Result& r, const std::vector<Timeline>& want, uint64_t steps) {
  ASSERT_EQ(r.records.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const report::RequestRecord& got = r.records.at(i);
    EXPECT_EQ(got.first_scheduled, want[i].first_scheduled_us * kUs) << "r" << i;
    EXPECT_EQ(got.first_token, want[i].first_token_us * kUs) << "r" << i;
    EXPECT_EQ(got.finish, want[i].finish_us * kUs) << "r" << i;
    EXPECT_EQ(got.output_tokens, want[i].output_tokens) << "r" << i;
  }
  EXPECT_EQ(r.records.at(0).gpu_hit_tokens, 0);
  EXPECT_EQ(r.records.at(1).gpu_hit_tokens, 48);
  EXPECT_EQ(r.summary.steps, steps);
  EXPECT_EQ(r.summary.preemptions, 0u);
  EXPECT_DOUBLE_EQ(r.summary.gpu_hit_rate, 48.0 / 192.0);
}

TEST(Cluster, SmallTraceMatchesAHandComputedSchedule) {
  std::string dir = kvtwin::testing::scratch_dir();
  Result r = run(tiny(dir, {"vllm.async_scheduling=false"}), kSmallTrace);
  expect_small_trace(r, {{0, 1064, 2081, 2}, {1064, 2081, 3145, 2}, {2081, 4146, 4146, 1}}, 4);
}

// The same trace under asynchronous scheduling (vLLM v0.17's default: the next step is scheduled
// while one runs, with a placeholder for each token in flight; the oldest step's output is
// processed when it ends, before the next schedule). The three requests arrive one after the
// other at t = 0; the first wakes the engine, which schedules steps 1 and 2 at once.
//   t=0     schedule 1: r0 prefill 64 (r0 holds 1 placeholder)
//           schedule 2: r0 decode 1 (2 placeholders: 64 + 2 - 2 < 64 + 2 outputs);
//                       r1 and r2 arrive after it and wait for the engine
//   step 1 [0, 1064]    → r0 token 1 at 1064
//   t=1064  schedule 3: r0 skipped (its last token is in flight: 65 + 2 - 1 ≥ 66);
//                       r1 prefill 16 (48 hit); r2 waits (max_num_seqs = 2: r0 still runs)
//   step 2 [1064, 2065] r0 decode → r0 token 2, done at 2065 (its seat is free only now)
//   t=2065  schedule 4: r1 decode 1; r2 chunk 63 (budget) — a chunk samples nothing
//   step 3 [2065, 3081] r1 prefill → r1 token 1 at 3081
//   t=3081  schedule 5: r1 skipped (last token in flight); r2 its last prompt token
//   step 4 [3081, 4145] r1 decode + r2 chunk → r1 done at 4145
//   t=4145  schedule 6: r2 skipped (its only token is in flight): empty, the engine waits
//   step 5 [4145, 5146] r2 → token 1, done at 5146
TEST(Cluster, SmallTraceMatchesAHandComputedAsyncSchedule) {
  std::string dir = kvtwin::testing::scratch_dir();
  Result r = run(tiny(dir), kSmallTrace);  // async_scheduling defaults to true
  expect_small_trace(r, {{0, 1064, 2065, 2}, {1064, 3081, 4145, 2}, {2065, 5146, 5146, 1}}, 5);
}

// vLLM's busy loop sleeps 1 ms after an engine iteration that scheduled nothing while requests
// remain. One seat (max_num_seqs = 1): A (16 tokens, 3 outputs) runs, B (16 tokens, 1 output)
// waits for the seat.
//   async: S1 A prefill [0, 1016]; S2 A decode [1016, 2017]; S3 A decode [2017, 3018];
//          the schedule after S2's output finds A's last token in flight and B without a seat:
//          nothing. The engine waits for S3 (A done at 3018), then sleeps until 4018, when it
//          schedules B (done at 4018 + 1016 = 5034).
//   sync:  A's steps end at 1016, 2017, 3018; B is scheduled at 3018 (done at 4034).
TEST(Cluster, AnEngineIterationThatSchedulesNothingSleepsOneMillisecond) {
  const char* trace = "arrival_s,prompt_tokens,output_tokens\n0,16,3\n0,16,1\n";
  for (bool async : {true, false}) {
    std::string dir = kvtwin::testing::scratch_dir();
    Result r = run(tiny(dir, {"vllm.max_num_seqs=1",
                              std::string("vllm.async_scheduling=") + (async ? "true" : "false")}),
                   trace);
    EXPECT_EQ(r.records.at(0).finish, 3018 * kUs) << async;
    EXPECT_EQ(r.records.at(1).first_scheduled, (async ? 4018 : 3018) * kUs) << async;
    EXPECT_EQ(r.records.at(1).finish, (async ? 5034 : 4034) * kUs) << async;
  }
}

TEST(Cluster, PromptsTooLongForTheModelAreRejected) {
  std::string dir = kvtwin::testing::scratch_dir();
  Result r = run(tiny(dir, {"vllm.max_model_len=100"}),
                 "arrival_s,prompt_tokens,output_tokens\n0,100,2\n0,10,2\n");
  EXPECT_TRUE(r.records.at(0).rejected);
  EXPECT_FALSE(r.records.at(1).rejected);
  EXPECT_EQ(r.summary.rejected, 1u);
}

TEST(Cluster, RequestsLargerThanThePoolAreRejectedInsteadOfStalling) {
  std::string dir = kvtwin::testing::scratch_dir();
  // 19 usable blocks of 16 tokens hold 304 tokens; a 400-token prompt can never fit.
  Result r = run(tiny(dir), "arrival_s,prompt_tokens,output_tokens\n0,400,2\n1,10,2\n");
  EXPECT_TRUE(r.records.at(0).rejected);
  EXPECT_FALSE(r.records.at(1).rejected);
}

// A request rejected before any admission reports no cache hits: the hits its failed allocation
// attempts found were never used (no block allocated, nothing loaded). They once stayed in its
// record and in the summary's hit rate, so that `kvtwin cache-replay` with a GPU tier smaller than
// the prompts showed a higher hit rate than with a large one.
//   A: 288 tokens (ids 1-18), cached as 18 full blocks when it ends.
//   B: the same 18 blocks + 32 tokens: 18 hit blocks + 2 new = 20 > the 19 usable blocks, with
//      nothing else holding any: it can never be admitted, and is rejected with 0 hits.
TEST(Cluster, ARequestRejectedBeforeAdmissionReportsNoHits) {
  std::string dir = kvtwin::testing::scratch_dir();
  std::string ids;
  for (int i = 1; i <= 18; ++i) ids += std::to_string(i) + " ";
  Result r = run(tiny(dir),
                 "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
                 "0,288,1,16," +
                     ids + "\n1,320,2,16," + ids +
                     "19 20\n"
                     "2,32,1,16,1 2\n");
  const auto& b = r.records.at(1);
  EXPECT_TRUE(b.rejected);
  EXPECT_LT(b.first_scheduled, 0);
  EXPECT_EQ(b.gpu_hit_tokens, 0);
  EXPECT_EQ(b.lmcache_hit_tokens, 0);
  // C arrives after B's rejection and hits A's first two blocks (the last token is recomputed).
  EXPECT_FALSE(r.records.at(2).rejected);
  EXPECT_EQ(r.records.at(2).gpu_hit_tokens, 16);
  EXPECT_EQ(r.summary.gpu_hit_tokens, 16u);
  EXPECT_EQ(r.summary.rejected, 1u);
}

// Found by fuzzing valid scenarios: a prompt that fits but whose generated tokens outgrow the
// whole pool. vLLM preempts it (itself, the only running request) when its next block does not
// fit, recomputes it from scratch and fails at the same point again, forever; the simulator
// aborts it at that first self-preemption with every other block free.
TEST(Cluster, ARequestWhoseTokensOutgrowThePoolIsRejectedInsteadOfLoopingForever) {
  std::string dir = kvtwin::testing::scratch_dir();
  // 19 usable blocks of 16 tokens hold 304 tokens: 280 prompt tokens + 40 outputs need 20
  // blocks once 25 tokens are generated (304 tokens computed, the 305th needs block 20). Without
  // prefix caching the recompute is admitted again chunk by chunk (64 tokens a step), so the
  // queue head always fits and only the self-preemption shows the request can never finish.
  for (bool async : {false, true}) {
    Result r = run(tiny(dir, {"vllm.enable_prefix_caching=false",
                              std::string("vllm.async_scheduling=") + (async ? "true" : "false")}),
                   "arrival_s,prompt_tokens,output_tokens\n0,280,40\n1,10,2\n");
    const auto& big = r.records.at(0);
    EXPECT_TRUE(big.rejected) << async;
    EXPECT_EQ(big.preemptions, 1) << async;  // the self-preemption that showed it can never fit
    EXPECT_GE(big.first_token, 0) << async;  // it did run and generate before outgrowing the pool
    // Its record keeps the tokens it produced: 25; with async scheduling 24, the 25th being in
    // flight when the request is rejected (its output is then dropped).
    EXPECT_EQ(big.output_tokens, async ? 24 : 25) << async;
    EXPECT_FALSE(r.records.at(1).rejected) << async;
    EXPECT_EQ(r.records.at(1).output_tokens, 2) << async;
    EXPECT_EQ(r.summary.rejected, 1u) << async;
    // Its inter-token gaps are not in the ITL figures, which count finished requests only (as
    // vllm bench serve does): the one gap is the small request's.
    EXPECT_EQ(r.summary.itl.count, 1u) << async;
  }
}

TEST(Cluster, ShortPoolPreemptsTheLastRunningRequest) {
  std::string dir = kvtwin::testing::scratch_dir();
  // Two 128-token prompts (8 blocks each) decoding 60 tokens need 12 blocks each by the end:
  // 19 blocks cannot hold both, so the later one is preempted and recomputed.
  Result r = run(tiny(dir, {"vllm.max_num_batched_tokens=256"}),
                 "arrival_s,prompt_tokens,output_tokens\n0,128,60\n0,128,60\n");
  EXPECT_GE(r.summary.preemptions, 1u);
  EXPECT_EQ(r.records.at(0).preemptions, 0);
  EXPECT_GE(r.records.at(1).preemptions, 1);
  EXPECT_EQ(r.records.at(1).output_tokens, 60);
}

using kvtwin::testing::slurp;

// Same scenario, same seed → byte-identical run directories.
TEST(Cluster, TwoRunsWriteIdenticalBytes) {
  std::string dir = kvtwin::testing::scratch_dir();
  scenario::Scenario s = scenario::load_default_scenario();
  scenario::apply_override(&s, "workload.max_requests=150");
  scenario::apply_override(&s, "output.timeseries_interval_s=0.5");
  scenario::validate(s);
  cli::simulate(s, "", dir + "/a", true, nullptr);
  cli::simulate(s, "", dir + "/b", true, nullptr);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/a"))
    if (e.is_regular_file())
      files.push_back(std::filesystem::relative(e.path(), dir + "/a").string());
  EXPECT_GE(files.size(), 6u);
  for (const std::string& f : files) {
    std::string a = slurp(dir + "/a/" + f), b = slurp(dir + "/b/" + f);
    EXPECT_FALSE(a.empty()) << f;
    EXPECT_TRUE(a == b) << f << " differs between two runs";
  }
}

// With no preemption and no failed load, the engine computes exactly what its requests need:
// each prompt's tokens that neither vLLM's prefix cache nor LMCache held, then one decode token
// per output token after the first (the prefill's last position samples the first). Chunked
// prefill under a 2,048-token budget splits prompts over more steps without adding or losing a
// token. The default scenario (LMCache CPU tier, four instances), 300 requests at half rate.
TEST(Cluster, TheStepsComputeExactlyTheTokensTheRequestsNeed) {
  for (const char* budget : {"8192", "2048"}) {
    const scenario::Scenario s =
        cli::load_scenario("", {"workload.max_requests=300", "workload.rate_scale=0.5",
                                std::string("vllm.max_num_batched_tokens=") + budget});
    Result r = harness::run_on_example_trace(s);
    ASSERT_EQ(r.records.size(), 300u);
    ASSERT_EQ(r.summary.preemptions, 0u) << budget;
    ASSERT_EQ(r.summary.failed_load_tokens, 0u) << budget;
    EXPECT_GT(r.summary.gpu_hit_tokens, 0u) << budget;
    EXPECT_GT(r.summary.lmcache_hit_tokens, 0u) << budget;
    EXPECT_EQ(std::llround(static_cast<double>(r.summary.steps) * r.summary.mean_batch_tokens),
              harness::tokens_the_requests_need(r))
        << budget;
  }
}

// LMCache loads whole chunks, from the one holding vLLM's last hit token on
// (harness::whole_chunk_load). The 70B scenario (CPU, disk and Redis tiers) on the example trace's
// first 600 requests; a preempted request loads again when readmitted, so its rows are left out.
TEST(Cluster, EachRequestLoadsWholeChunksFromVllmsLastHitOn) {
  const scenario::Scenario s = cli::load_scenario(
      kvtwin::testing::source_path("scenarios/llama31_70b_tp4_cpu_disk_redis.toml"),
      {"workload.max_requests=600"});
  Result r = harness::run_on_example_trace(s);
  ASSERT_EQ(r.summary.failed_load_tokens, 0u);
  const int64_t chunk = s.lmcache.chunk_size;
  std::array<int, report::kNumTiers> loading{};
  for (const auto& [index, rec] : r.records) {
    if (rec.preemptions > 0 || rec.rejected) continue;
    int64_t loaded = 0;
    for (int t = 0; t < report::kNumTiers; ++t) {
      loaded += rec.loaded_tokens[t];
      loading[t] += rec.loaded_tokens[t] > 0;
    }
    EXPECT_EQ(loaded, harness::whole_chunk_load(rec, chunk))
        << index << ": g " << rec.gpu_hit_tokens << ", h " << rec.lmcache_hit_tokens << ", p "
        << rec.prompt_tokens;
  }
  // Loads from every tier took part.
  for (int t = 0; t < report::kNumTiers; ++t) EXPECT_GT(loading[t], 0) << t;
}

}  // namespace
}  // namespace kvtwin::sim::engine
