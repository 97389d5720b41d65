// Every deployment in scenarios/ served on its own trace, as `kvtwin run --scenario` serves it:
// its first 600 requests as shipped, then again at a quarter of the rate. The list is read from
// the directory, so a new scenario is covered the day it lands. Each model kind takes its own
// paths here (MLA's rank-0 LMCache, sliding-window and Mamba groups, cross attention), which the
// engine tests built on the small profile scenarios do not reach.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/cli/common.h"
#include "sim/engine/kv_cache_layout.h"
#include "sim/hw/model_geometry.h"
#include "tests/sim/engine/engine_harness.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::engine {
namespace {

constexpr int kRequests = 600;

std::vector<std::string> shipped_scenarios() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(testing::source_path("scenarios")))
    if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

scenario::Scenario shipped(const std::string& name, std::vector<std::string> sets) {
  sets.insert(sets.begin(), "workload.max_requests=" + std::to_string(kRequests));
  return cli::load_scenario(testing::source_path("scenarios/" + name + ".toml"), sets);
}

class ShippedScenario : public ::testing::TestWithParam<std::string> {};

// As shipped: every request ends, and the way it ends is vLLM's. A prompt of max_model_len
// tokens or more is rejected at arrival (vLLM's input processor); any other fits the pool alone
// (the start-up check guarantees one max_model_len request does), so it finishes, with no KV
// load failing (no tier faults are configured). The summary's token counts are the requests'
// sums. vLLM's prefix cache hits exactly when the layout caches (Whisper's cross attention turns
// it off), and LMCache hits beyond it exactly when LMCache is on.
TEST_P(ShippedScenario, ItsFirstRequestsEndAsVllmEndsThem) {
  const scenario::Scenario s = shipped(GetParam(), {});
  const KvCacheLayout layout = derive_kv_cache_layout(s, hw::derive_geometry(s));
  harness::RunResult r = harness::run_on_scenario_trace(s);
  ASSERT_EQ(r.records.size(), static_cast<size_t>(kRequests));
  uint64_t finished = 0, rejected = 0, prompt = 0, gpu_hits = 0, lmcache_hits = 0;
  std::array<uint64_t, report::kNumTiers> loaded{};
  for (const auto& [index, rec] : r.records) {
    const bool too_long = rec.prompt_tokens >= s.vllm.max_model_len;
    EXPECT_EQ(rec.rejected, too_long) << index << ": prompt " << rec.prompt_tokens;
    EXPECT_FALSE(rec.load_error) << index;
    EXPECT_EQ(rec.failed_load_tokens, 0) << index;
    if (rec.rejected) {
      ++rejected;
    } else {
      ++finished;
      EXPECT_GE(rec.output_tokens, 1) << index;
      EXPECT_LE(rec.arrival, rec.first_scheduled) << index;
      EXPECT_LT(rec.first_scheduled, rec.first_token) << index;
      EXPECT_LE(rec.first_token, rec.finish) << index;
    }
    prompt += static_cast<uint64_t>(rec.prompt_tokens);
    gpu_hits += static_cast<uint64_t>(rec.gpu_hit_tokens);
    lmcache_hits += static_cast<uint64_t>(rec.lmcache_hit_tokens);
    for (int t = 0; t < report::kNumTiers; ++t)
      loaded[t] += static_cast<uint64_t>(rec.loaded_tokens[t]);
  }
  EXPECT_EQ(r.summary.finished, finished);
  EXPECT_EQ(r.summary.rejected, rejected);
  EXPECT_EQ(r.summary.failed, 0u);
  EXPECT_EQ(r.summary.prompt_tokens, prompt);
  EXPECT_EQ(r.summary.gpu_hit_tokens, gpu_hits);
  EXPECT_EQ(r.summary.lmcache_hit_tokens, lmcache_hits);
  EXPECT_EQ(r.summary.loaded_tokens, loaded);
  EXPECT_EQ(gpu_hits > 0, layout.enable_caching) << gpu_hits;
  EXPECT_EQ(lmcache_hits > 0, s.lmcache.enabled) << lmcache_hits;
  EXPECT_EQ(r.summary.prefix_caching, layout.enable_caching);
  EXPECT_EQ(r.summary.lmcache_enabled, s.lmcache.enabled);
}

// At a quarter of the shipped rate no request is preempted, and the engine computes exactly
// what its requests need (harness::tokens_the_requests_need). With LMCache, each request loads
// whole chunks from the one holding vLLM's last hit token on (harness::whole_chunk_load), and
// some request loads.
TEST_P(ShippedScenario, AtAQuarterOfItsRateTheStepsComputeExactlyWhatTheRequestsNeed) {
  const scenario::Scenario base = shipped(GetParam(), {});
  const scenario::Scenario s =
      shipped(GetParam(), {"workload.rate_scale=" + std::to_string(base.workload.rate_scale / 4)});
  harness::RunResult r = harness::run_on_scenario_trace(s);
  ASSERT_EQ(r.records.size(), static_cast<size_t>(kRequests));
  ASSERT_EQ(r.summary.preemptions, 0u);
  ASSERT_EQ(r.summary.failed_load_tokens, 0u);
  EXPECT_EQ(std::llround(static_cast<double>(r.summary.steps) * r.summary.mean_batch_tokens),
            harness::tokens_the_requests_need(r));
  int64_t loading = 0;
  for (const auto& [index, rec] : r.records) {
    if (rec.rejected) continue;
    int64_t loaded = 0;
    for (int t = 0; t < report::kNumTiers; ++t) loaded += rec.loaded_tokens[t];
    loading += loaded > 0;
    EXPECT_EQ(loaded, harness::whole_chunk_load(rec, s.lmcache.chunk_size))
        << index << ": g " << rec.gpu_hit_tokens << ", h " << rec.lmcache_hit_tokens << ", p "
        << rec.prompt_tokens;
  }
  EXPECT_EQ(loading > 0, s.lmcache.enabled) << loading;
}

// Whisper's cross attention in the pool: one request (a 4-token decoder prompt, 10 tokens out)
// holds its encoder's cdiv(1,500, 16) = 94 cross-attention blocks from admission to finish, and
// one self-attention block (at most 14 tokens). vLLM's usage counts the pool without its null
// block, so every sample taken while it runs reads 95 / 999 of a 1,000-block pool.
TEST(ShippedScenarios, AWhisperRequestHoldsNinetyFourCrossAttentionBlocks) {
  const scenario::Scenario s =
      cli::load_scenario(testing::source_path("scenarios/whisper_large_v3_encdec.toml"),
                         {"vllm.num_gpu_blocks=1000", "output.timeseries_interval_s=0.01"});
  harness::RunResult r = harness::run_cluster(s, "arrival_s,prompt_tokens,output_tokens\n0,4,10\n");
  ASSERT_EQ(r.summary.finished, 1u);
  EXPECT_DOUBLE_EQ(r.summary.gpu_kv_usage_peak, 95.0 / 999.0);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ShippedScenario, ::testing::ValuesIn(shipped_scenarios()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The suite cannot vanish by accident (a wrong source path would list nothing): the directory
// holds at least the deployments issue 4 asks for and the default.
TEST(ShippedScenarios, TheListHoldsEveryDeploymentIssueFourAsksFor) {
  const std::vector<std::string> names = shipped_scenarios();
  for (const char* want :
       {"default", "deepseek_v3_mla_h200", "gemma3_27b_sliding", "gpt_oss_120b_hybrid",
        "llama31_70b_tp4_cpu_disk_redis", "llama31_8b_h100_cpu", "nemotron_h_8b_mamba_hybrid",
        "whisper_large_v3_encdec"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

}  // namespace
}  // namespace kvtwin::sim::engine
