#include "sim/cli/cache_replay_command.h"

#include <gtest/gtest.h>

#include <list>
#include <map>

#include "sim/engine/kv_cache_layout.h"
#include "sim/hw/model_geometry.h"
#include "sim/scenario/scenario_loader.h"
#include "sim/workload/trace_reader.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::cli {
namespace {

// An independent model of vLLM's prefix cache serving prompts one at a time, written from the
// documented semantics rather than from model/vllm: a pool of blocks 1..N-1 (0 is the null
// block) in a free queue; a request hits the longest run of leading full 16-token blocks whose
// content is cached (at most (P-1)/16 blocks: the last token is always recomputed), takes those
// blocks out of the queue, pops the rest from the queue's head (evicting what they cached),
// caches its full blocks, and frees all of them tail first onto the queue's tail (LRU).
//
// A block's content is identified by (trace block id, position in it): with chained Mooncake ids
// and 512-token trace blocks, 16-token block j of a prompt is equal to block j of another prompt
// exactly when their ids at j / 32 are equal.
uint64_t independent_lru_hits(const std::string& trace, int num_blocks, int64_t max_model_len,
                              int64_t max_requests) {
  constexpr int64_t kBs = 16;
  using Content = std::pair<uint64_t, int64_t>;
  std::list<int> free_queue;
  std::vector<std::list<int>::iterator> where(static_cast<size_t>(num_blocks));
  std::vector<std::optional<Content>> content(static_cast<size_t>(num_blocks));
  std::map<Content, std::vector<int>> cached;  // content -> blocks holding it
  for (int b = 1; b < num_blocks; ++b) where[b] = free_queue.insert(free_queue.end(), b);
  auto uncache = [&](int b) {
    if (!content[b]) return;
    auto& v = cached[*content[b]];
    v.erase(std::find(v.begin(), v.end(), b));
    if (v.empty()) cached.erase(*content[b]);
    content[b].reset();
  };
  auto reader = workload::open_trace(trace, workload::TraceFormat::kAuto);
  workload::TraceRequest r;
  uint64_t hits = 0;
  int64_t n = 0;
  while (reader->next(&r) && n++ < max_requests) {
    const int64_t p = r.prompt_tokens;
    if (p >= max_model_len) continue;  // rejected at admission
    auto id_of = [&](int64_t j) { return Content{r.block_ids[j * kBs / 512], j % (512 / kBs)}; };
    const int64_t full = p / kBs, needed = (p + kBs - 1) / kBs, max_hit = (p - 1) / kBs;
    std::vector<int> blocks;
    for (int64_t j = 0; j < max_hit; ++j) {
      auto it = cached.find(id_of(j));
      if (it == cached.end()) break;
      int b = it->second.front();
      free_queue.erase(where[b]);  // touch: ref 0 -> 1
      blocks.push_back(b);
    }
    hits += blocks.size() * kBs;
    EXPECT_GE(static_cast<int64_t>(free_queue.size()),
              needed - static_cast<int64_t>(blocks.size()));
    while (static_cast<int64_t>(blocks.size()) < needed) {
      int b = free_queue.front();
      free_queue.pop_front();
      uncache(b);
      blocks.push_back(b);
    }
    for (int64_t j = 0; j < full; ++j) {
      int b = blocks[j];
      if (content[b]) continue;  // a hit block keeps its content
      content[b] = id_of(j);
      cached[*content[b]].push_back(b);
    }
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
      where[*it] = free_queue.insert(free_queue.end(), *it);
  }
  return hits;
}

TEST(CacheReplay, GpuLruHitsOnMooncakeSyntheticMatchAnIndependentModel) {
  const std::string trace =
      kvtwin::testing::source_path("traces/mooncake_fast25/synthetic_trace.jsonl");
  CacheReplayOptions o;
  o.scenario = kvtwin::testing::source_path("scenarios/llama31_8b_h100_cpu.toml");
  o.trace = trace;
  o.sets = {"lmcache.enabled=false", "workload.max_requests=1500"};
  o.tier = "gpu";
  o.capacity_gb = {32, 128};  // 16,384 and 65,536 blocks of 2 MiB
  o.jobs = 2;
  auto points = cache_replay(o);
  ASSERT_EQ(points.size(), 2u);
  uint64_t small = independent_lru_hits(trace, 16384, 131072, 1500);
  uint64_t large = independent_lru_hits(trace, 65536, 131072, 1500);
  EXPECT_EQ(points[0].summary.gpu_hit_tokens, small);
  EXPECT_EQ(points[1].summary.gpu_hit_tokens, large);
  EXPECT_GT(large, small);  // more capacity, more hits
  EXPECT_EQ(points[0].capacity_tokens, 32LL * 1024 * 1024 * 1024 / 131072);
}

// A hybrid's GPU capacity in tokens is what vLLM logs as its "GPU KV cache size": Gemma-3 27B
// (TP 2) has 7 KV cache groups of 10 layers' 65,536-byte pages, 655,360 bytes per block id, so
// 1.25 GiB holds 2,048 block ids, 292 whole ones per group (vLLM floors before it multiplies):
// 292 · 16 = 4,672 tokens (not 2,048 · 16, nor 2,048 · 16 / 7 = 4,681). The run's summary
// carries the same pool.
TEST(CacheReplay, AHybridsGpuCapacityIsVllmsKvCacheSizeInTokens) {
  CacheReplayOptions o;
  o.scenario = kvtwin::testing::source_path("scenarios/gemma3_27b_sliding.toml");
  o.sets = {"workload.max_requests=1"};
  o.tier = "gpu";
  o.capacity_gb = {1.25};
  auto points = cache_replay(o);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].capacity_tokens, 4672);
  const report::Summary& s = points[0].summary;
  EXPECT_EQ(s.gpu_kv_blocks, 2048);
  EXPECT_EQ(s.gpu_kv_groups, 7);
  EXPECT_EQ(s.gpu_kv_tokens, 4672);
  // The memory left for KV does not depend on the block count the point sets: 80 GiB · the
  // scenario's utilization − weights − reserve, as the layout derives it.
  scenario::Scenario sc = scenario::load_scenario_file(o.scenario);
  EXPECT_DOUBLE_EQ(
      s.gpu_kv_memory_gib,
      engine::derive_kv_cache_layout(sc, hw::derive_geometry(sc)).available_bytes / scenario::kGiB);
}

}  // namespace
}  // namespace kvtwin::sim::cli
