// The router's policies on a two-instance cluster: every request arrives at t = 0 and is routed
// right after the previous one was scheduled on its instance (a 64-token budget, so a 96-token
// prompt leaves 32 tokens queued and its first 4 blocks in the instance's prefix cache).
#include "sim/engine/router.h"

#include <gtest/gtest.h>

#include "tests/sim/engine/engine_harness.h"

namespace kvtwin::sim::engine {
namespace {

scenario::Scenario two_instances(const std::string& router) {
  return harness::profile_scenario(
      "[step]\nmodel = \"profile\"\nprofile = \"profile.csv\"\n"
      "[vllm]\nblock_size = 16\nnum_gpu_blocks = 40\nmax_num_batched_tokens = 64\n"
      "[cluster]\ninstances = 2\n",
      // The synchronous loop: the queues below are those after one schedule per arrival (async
      // scheduling would schedule r0's second chunk at once as well).
      "router.toml", {"cluster.router=" + router, "vllm.async_scheduling=false"});
}

// r0: 96 tokens (blocks 1-6); r1: 16 tokens (block 7); r2: 96 tokens sharing r0's first 4 blocks.
const char* const kTrace =
    "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
    "0,96,1,16,1 2 3 4 5 6\n"
    "0,16,1,16,7\n"
    "0,96,1,16,1 2 3 4 8 9\n";

std::vector<int> instances_of(const harness::RunResult& r) {
  std::vector<int> v;
  for (const auto& [index, record] : r.records) v.push_back(record.instance);
  return v;
}

// The least-loaded instance; ties go to the lowest index.
//   r0: queued (0, 0), a tie → 0; it schedules 64 of 96 tokens: queued (32, 0).
//   r1: → 1; it schedules its 16 tokens: queued (32, 0).
//   r2: → 1.
TEST(Router, LeastLoadedPicksTheFewestQueuedTokensAndBreaksTiesToTheLowestIndex) {
  harness::RunResult r = harness::run_cluster(two_instances("least_loaded"), kTrace);
  EXPECT_EQ(instances_of(r), (std::vector<int>{0, 1, 1}));
}

// Score = cached prefix blocks × 16 − queued tokens (llm-d's precise prefix scorer minus the
// queue); ties go to the lowest index.
//   r0: scores (0, 0), a tie → 0; after its first chunk instance 0 caches blocks 1-4, queues 32.
//   r1: no cached prefix anywhere: scores (−32, 0) → 1; instance 1 queues 0.
//   r2: 4 cached blocks on instance 0: scores (64 − 32, 0) = (32, 0) → 0.
TEST(Router, PrefixAwareWeighsCachedPrefixAgainstQueuedTokensAndBreaksTiesToTheLowestIndex) {
  harness::RunResult r = harness::run_cluster(two_instances("prefix_aware"), kTrace);
  EXPECT_EQ(instances_of(r), (std::vector<int>{0, 1, 0}));
}

}  // namespace
}  // namespace kvtwin::sim::engine
