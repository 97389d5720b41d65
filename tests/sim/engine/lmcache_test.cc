// LMCache inside the simulated engine: hits, loads, stores and failed loads, computed by hand.
#include <gtest/gtest.h>

#include <map>

#include "sim/cli/common.h"
#include "sim/engine/cluster.h"
#include "sim/engine/kv_cache_layout.h"
#include "sim/hw/model_geometry.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/sim/engine/engine_harness.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::engine {
namespace {

using Result = harness::RunResult;

// Llama-3.1-8B geometry (128 KiB of KV per token: 32 MiB per 256-token chunk), a profile step
// model (1000 µs + 1 µs per token), LMCache with a CPU tier (harness::lmcache_cpu_scenario).
scenario::Scenario scenario_with(const std::vector<std::string>& sets) {
  return harness::lmcache_cpu_scenario("lm.toml", sets);
}

// Two instances (round robin) sharing Redis, whose reads fail at `failure_rate`; failed loads are
// recomputed; the health check fails at `threshold` failed reads and may recover 60 s later.
// A (0 s) and C (12 s) on instance 0, then B (10 s) and D (14 s) with their prompts on instance 1,
// whose copies find them in Redis only (its first two Redis reads), then E (40 s) on instance 0.
const char* kTwoFailedReads =
    "0,1024,2,512,1 2\n"
    "10,1024,2,512,1 2\n"
    "12,1024,2,512,3 4\n"
    "14,1024,2,512,3 4\n"
    "40,1024,2,512,5 6\n";

std::vector<std::string> failing_redis(const char* failure_rate, int threshold) {
  return {"cluster.instances=2",
          "cluster.router=round_robin",
          "lmcache.remote=true",
          std::string("links.remote_get_failure_rate=") + failure_rate,
          "vllm.kv_load_failure_policy=recompute",
          "lmcache.get_blocking_failed_threshold=" + std::to_string(threshold),
          "lmcache.waiting_time_for_recovery_s=60"};
}

// Trace rows (see run()). A and C share a 1024-token prompt (ids 1 2); B (ids 3 4) comes between
// them.
const char* kEvictedPrefix =
    "0,1024,1,512,1 2\n"
    "10,1024,1,512,3 4\n"
    "20,1024,1,512,1 2\n";
// Two requests with the same 1024-token prompt, 10 s apart (on two instances: round robin).
const char* kSharedPrompt =
    "0,1024,2,512,1 2\n"
    "10,1024,2,512,1 2\n";

// Runs `rows` of a native CSV trace (arrival_s, prompt_tokens, output_tokens, block_size,
// block_ids; no header), writing the run directory to `out_dir` when given.
Result run(const scenario::Scenario& s, const std::string& rows, const std::string& out_dir = "") {
  return harness::run_cluster(
      s, "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n" + rows, {}, {}, out_dir);
}

// One modelled PCIe copy of `bytes` in this file's scenario: the bytes at `gbps` (GB/s = bytes
// per ns), rounded up to the ns, plus the 10-µs latency.
SimTime pcie_copy_ns(int64_t bytes, int64_t gbps) {
  return (bytes * 1'000'000'000 + gbps * 1'000'000'000 - 1) / (gbps * 1'000'000'000) + 10'000;
}

// A bulk store's GPU → CPU copy of `chunks` chunks: LMCache's from_gpu synchronises its stream
// after each chunk, so the 10-µs latency is paid once per chunk.
SimTime store_copy_ns(int64_t bytes, int64_t chunks, int64_t gbps) {
  return pcie_copy_ns(bytes, gbps) + (chunks - 1) * 10'000;
}

// A disk read of `bytes` in this file's scenario: the bytes at the default 7 GB/s, rounded up to
// the ns, plus the default 80-µs disk latency.
SimTime disk_read_ns(int64_t bytes) {
  return (bytes + 6) / 7 + 80'000;
}

// A CPU tier of 4 chunks (0.125 GiB), a 1-GiB disk tier and 1-GB/s disk writes: B's 4 writes
// (134 ms) hold the whole CPU tier for a while (the memory-wait tests below).
const std::vector<std::string> kSmallCpuTierSlowDiskWrites = {"lmcache.max_local_cpu_size_gb=0.125",
                                                              "lmcache.max_local_disk_size_gb=1",
                                                              "links.disk_write_gbps=1"};
// A (0 s) and B (10 s) store 4 chunks each; C (10.01 s) has A's prompt.
const char* kLoadDuringWrites =
    "0,1024,1,512,1 2\n"
    "10,1024,1,512,3 4\n"
    "10.01,1024,1,512,1 2\n";

// A and C share a 1024-token prompt; B in between evicts A's last 29 GPU blocks (the pool has
// 99 usable blocks: B takes the 35 never-used ones, then A's blocks tail first).
//   C: GPU hit 35 blocks = 560 tokens; LMCache holds A's 4 chunks (1024 tokens): the whole prompt
//   hits, so vLLM takes 1024 − 560 − 1 = 463 external tokens; LMCache reloads whole chunks past
//   the first floor(560/256)·256 = 512 tokens: chunks 2 and 3, 512 tokens = 64 MiB over PCIe.
//   TTFT = load (64 MiB / 35 GB/s, rounded up, + 10 µs) + one step of 1 token (1001 µs).
TEST(LmcacheEngine, CpuTierServesWhatTheGpuEvicted) {
  Result r = run(scenario_with({}), kEvictedPrefix);
  const auto& c = r.records.at(2);
  EXPECT_EQ(c.gpu_hit_tokens, 560);
  EXPECT_EQ(c.lmcache_hit_tokens, 463);
  EXPECT_EQ(c.loaded_tokens[report::kTierCpu], 512);
  EXPECT_EQ(c.first_token - c.arrival, pcie_copy_ns(67'108'864, 35) + 1'001'000);
  EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("pcie_h2d"), 67'108'864.0);
  // A and B each stored their 4 full chunks (C's prompt was already saved: nothing to store).
  EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("pcie_d2h"), 8 * 33'554'432.0);
}

// A load whose disk get finds no evictable CPU memory sleeps 0.1 s at a time, as upstream's
// engine thread does, until in-flight writes free some. The CPU tier holds 4 chunks (0.125 GiB);
// A (0 s) and B (10 s) each store 4 chunks, and B's writes (4 × 32 MiB at 1 GB/s: 134 ms) hold
// every CPU buffer when C (10.01 s, A's prompt, like kEvictedPrefix's C) must read A's chunks 2
// and 3 back from disk. Its get sleeps at 10.01 s and 10.11 s; at 10.21 s B's writes are done, it
// evicts B's copies and reads. TTFT = 0.2 s + the disk read (64 MiB at 7 GB/s + 80 µs) + the copy
// to the GPU + one step of 1 token.
TEST(LmcacheEngine, ADiskLoadSleepsUntilInFlightWritesFreeCpuMemory) {
  Result r = run(scenario_with(kSmallCpuTierSlowDiskWrites), kLoadDuringWrites);
  const auto& c = r.records.at(2);
  ASSERT_LT(r.records.at(1).finish, c.arrival);  // B's writes started before C came
  EXPECT_EQ(c.gpu_hit_tokens, 560);
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 512);
  EXPECT_EQ(r.summary.stalled_loads, 0u);
  EXPECT_EQ(r.summary.memory_waits.loads, 1u);
  EXPECT_DOUBLE_EQ(r.summary.memory_waits.wait_s, 0.2);
  EXPECT_EQ(c.first_token - c.arrival,
            200'000'000 + disk_read_ns(67'108'864) + pcie_copy_ns(67'108'864, 35) + 1'001'000);
}

// The timeline shows the wait: C's retrieve sleeps at 10.01 s and 10.11 s and ends at 10.21 s, a
// 200,000-µs span of 2 sleeps on instance 0's memory-wait thread (17).
TEST(LmcacheEngine, AMemoryWaitIsASpanOfTheTimeline) {
  const std::string dir = kvtwin::testing::scratch_subdir();
  run(scenario_with(kSmallCpuTierSlowDiskWrites), kLoadDuringWrites, dir);
  const std::string json = kvtwin::testing::slurp(dir + "/trace.json");
  EXPECT_NE(json.find("{\"ph\": \"X\", \"pid\": 1, \"tid\": 17, \"name\": \"memory wait\", "
                      "\"ts\": 10010000, \"dur\": 200000, \"args\": {\"sleeps\": 2}}"),
            std::string::npos)
      << json.substr(0, 2000);
  EXPECT_NE(json.find("\"tid\": 17, \"args\": {\"name\": \"lmcache memory wait\"}"),
            std::string::npos);
}

// The same load when the writes are done before C comes (C at 11 s): B's CPU copies are
// evictable, so nothing waits.
TEST(LmcacheEngine, ADiskLoadDoesNotSleepWhenCpuMemoryIsEvictable) {
  const char* trace =
      "0,1024,1,512,1 2\n"
      "10,1024,1,512,3 4\n"
      "11,1024,1,512,1 2\n";
  Result r = run(scenario_with(kSmallCpuTierSlowDiskWrites), trace);
  const auto& c = r.records.at(2);
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 512);
  EXPECT_EQ(r.summary.memory_waits.loads, 0u);
  EXPECT_EQ(c.first_token - c.arrival,
            disk_read_ns(67'108'864) + pcie_copy_ns(67'108'864, 35) + 1'001'000);
}

// Upstream's start_load_kv retrieves request after request, each after the one before has read
// and copied its chunks, so a later request's allocation sees the memory that writes freed in
// the meantime. GPU prefix caching is off, so every hit is LMCache's; 512-token prompts are 2
// chunks; the engine loop is synchronous. A (0 s) and P (5 s) fill the 4-chunk CPU tier; B
// (10 s) evicts A's copies, and its 2 writes (64 MiB at 1 GB/s) end at Tw = 10.070063042 s:
// 10.001512 (B's 1,512-µs step) + 1.362178 ms (its copy: 64 MiB at 50 GB/s, a 10-µs latency per
// chunk) + 80 µs + 67.108864 ms. F (10.0675 s, 200 tokens: no full chunk, nothing stored) keeps
// the engine busy until 10.0687 s, while R1 (P's prompt) and R2 (A's) arrive; they run in the
// next step, from 10.0687 s. R1's chunks are in the CPU tier (no allocation), and its copy to the
// GPU takes 1.927397 ms. Only then does R2's retrieve allocate, after Tw: it evicts B's copies and
// never sleeps. Had it allocated at 10.0687 s with R1's retrieve, it would have slept 0.1 s.
TEST(LmcacheEngine, ALaterRequestsRetrieveAllocatesAfterTheEarlierRequestsCopies) {
  const char* trace =
      "0,512,1,512,1\n"
      "5,512,1,512,2\n"
      "10,512,1,512,3\n"
      "10.0675,200,1,512,4\n"
      "10.068,512,1,512,2\n"
      "10.068,512,1,512,1\n";
  std::vector<std::string> sets = kSmallCpuTierSlowDiskWrites;
  sets.insert(sets.end(), {"vllm.enable_prefix_caching=false", "vllm.async_scheduling=false"});
  Result r = run(scenario_with(sets), trace);
  const auto& f = r.records.at(3);
  const auto& r1 = r.records.at(4);
  const auto& r2 = r.records.at(5);
  EXPECT_EQ(f.finish, 10'068'700'000);
  EXPECT_EQ(r1.loaded_tokens[report::kTierCpu], 512);
  EXPECT_EQ(r2.loaded_tokens[report::kTierDisk], 512);
  EXPECT_EQ(r.summary.memory_waits.loads, 0u);
  EXPECT_EQ(r.summary.stalled_loads, 0u);
  const SimTime h2d = pcie_copy_ns(67'108'864, 35);    // 1,927,397 ns
  const SimTime disk_read = disk_read_ns(67'108'864);  // 9,666,981 ns
  EXPECT_EQ(r1.first_token, f.finish + h2d + disk_read + h2d + 1'002'000);
  EXPECT_EQ(r2.first_token, r1.first_token);
}

// A load that needs more CPU memory than the tier has: nothing in flight can free it (upstream's
// get would sleep for ever), so it stalls and is recomputed. The CPU tier holds one chunk. A
// prefills 256 tokens a step, storing one chunk per step, whose write (fast disk) is done before
// the next store evicts it: A's 4 chunks reach the disk. C (A's prompt, after B evicted A's GPU
// blocks) must read chunks 2 and 3: the first takes the tier's one buffer, which C's retrieve
// holds, and the second finds nothing to evict and no write in flight.
TEST(LmcacheEngine, ADiskLoadLargerThanTheCpuTierStallsWithoutSleeping) {
  const char* trace =
      "0,1024,1,512,1 2\n"
      "10,1024,1,512,3 4\n"
      "20,1024,1,512,1 2\n";
  Result r = run(
      scenario_with({"lmcache.max_local_cpu_size_gb=0.03125", "lmcache.max_local_disk_size_gb=1",
                     "links.disk_write_gbps=100", "vllm.max_num_batched_tokens=256"}),
      trace);
  const auto& c = r.records.at(2);
  EXPECT_EQ(c.lmcache_hit_tokens, 463);  // the lookup found A's chunks on disk
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 0);
  EXPECT_EQ(r.summary.stalled_loads, 1u);
  EXPECT_EQ(r.summary.memory_waits.loads, 0u);
}

// The links' peak rates, by hand. Sampled every second, C's 64-MiB load lies within the interval
// (20 s, 21 s] and each of A's and B's 128-MiB stores within one interval too: the peaks are
// those bytes over 1 s. With a 50-MB/s host-to-device link the load takes 1.34 s, so 10-ms
// intervals fall wholly inside it and the peak is the link's bandwidth (to the byte per
// interval: the counts are whole bytes).
TEST(LmcacheEngine, APeakRateIsTheMostALinkMovedInOneSamplingInterval) {
  Result r = run(scenario_with({}), kEvictedPrefix);
  EXPECT_DOUBLE_EQ(r.summary.link_peak_rate.at("pcie_h2d"), 67'108'864.0);
  EXPECT_DOUBLE_EQ(r.summary.link_peak_rate.at("pcie_d2h"), 4 * 33'554'432.0);
  EXPECT_DOUBLE_EQ(r.summary.link_peak_rate.at("disk_write"), 0);
  EXPECT_DOUBLE_EQ(r.summary.peak_gbps("pcie_d2h"), 0.134217728);
  EXPECT_DOUBLE_EQ(r.summary.link_capacity.at("pcie_h2d"), 35e9);
  EXPECT_DOUBLE_EQ(r.summary.link_capacity.at("pcie_d2h"), 50e9);

  Result slow =
      run(scenario_with({"links.pcie_h2d_gbps=0.05", "output.timeseries_interval_s=0.01"}),
          kEvictedPrefix);
  EXPECT_EQ(slow.records.at(2).loaded_tokens[report::kTierCpu], 512);
  EXPECT_NEAR(slow.summary.link_peak_rate.at("pcie_h2d"), 50e6, 100.0);
  EXPECT_DOUBLE_EQ(slow.summary.link_capacity.at("pcie_h2d"), 50e6);
  EXPECT_DOUBLE_EQ(slow.summary.link_bytes.at("pcie_h2d"), 67'108'864.0);
}

// LMCache's priority_limit: A (priority 5) is stored only while the limit is unset or at least 5;
// above it A's tracker skips saving, so LMCache holds nothing for C, which recomputes the 464
// tokens the GPU lost and stores its own 4 chunks (B's 4 are stored either way). C is alone on
// the instance: its step (1000 + 464 µs) then copies its 4 chunks out before its token is out.
TEST(LmcacheEngine, ARequestAbovePriorityLimitIsNeverStored) {
  const std::string trace =
      "arrival_s,prompt_tokens,output_tokens,block_size,block_ids,priority\n"
      "0,1024,1,512,1 2,5\n"
      "10,1024,1,512,3 4,0\n"
      "20,1024,1,512,1 2,0\n";
  for (const char* limit : {"", "5", "4", "-1"}) {
    std::vector<std::string> sets;
    if (*limit != '\0') sets.push_back(std::string("lmcache.priority_limit=") + limit);
    Result r = harness::run_cluster(scenario_with(sets), trace);
    const bool a_stored = *limit == '\0' || std::string(limit) == "5";
    const auto& c = r.records.at(2);
    EXPECT_EQ(c.gpu_hit_tokens, 560) << limit;
    EXPECT_EQ(c.lmcache_hit_tokens, a_stored ? 463 : 0) << limit;
    EXPECT_EQ(c.loaded_tokens[report::kTierCpu], a_stored ? 512 : 0) << limit;
    // Limit -1: nobody is stored (every priority here is above it).
    const double stored_chunks = std::string(limit) == "-1" ? 0 : 8;
    EXPECT_DOUBLE_EQ(
        r.summary.link_bytes.count("pcie_d2h") ? r.summary.link_bytes.at("pcie_d2h") : 0.0,
        stored_chunks * 33'554'432.0)
        << limit;
    if (!a_stored && stored_chunks > 0) {
      EXPECT_EQ(c.finish - c.arrival, 1'464'000 + store_copy_ns(134'217'728, 4, 50)) << limit;
    }
  }
}

// Upstream's start_load_kv retrieves request after request, each retrieve waiting for its own
// copy to the GPU. C and D (A's prompt again) arrive while B's step runs, so the next step, which
// starts when B is done, admits both. C hits 35 GPU blocks and loads chunks 2 and 3 (64 MiB) from
// the CPU tier. vLLM caches C's blocks when it allocates them, loads included, so D, admitted
// next in the same step, hits 63 blocks (1008 tokens) and loads chunk 3 alone (32 MiB). The two
// copies run one after the other (one PCIe latency each), then the forward pass of their 2
// tokens (1002 µs).
TEST(LmcacheEngine, LoadsOfOneStepRunRequestAfterRequest) {
  const char* trace =
      "0,1024,1,512,1 2\n"
      "10,1024,1,512,3 4\n"
      "10.001,1024,1,512,1 2\n"
      "10.001,1024,1,512,1 2\n";
  Result r = run(scenario_with({}), trace);
  const SimTime b_done = r.records.at(1).finish;
  ASSERT_GT(b_done, r.records.at(2).arrival);
  const auto& c = r.records.at(2);
  const auto& d = r.records.at(3);
  EXPECT_EQ(c.gpu_hit_tokens, 560);
  EXPECT_EQ(c.loaded_tokens[report::kTierCpu], 512);
  EXPECT_EQ(d.gpu_hit_tokens, 1008);
  EXPECT_EQ(d.loaded_tokens[report::kTierCpu], 256);
  EXPECT_EQ(c.first_token,
            b_done + pcie_copy_ns(67'108'864, 35) + pcie_copy_ns(33'554'432, 35) + 1'002'000);
  EXPECT_EQ(d.first_token, c.first_token);
  EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("pcie_h2d"), 3 * 33'554'432.0);
}

// With a KV connector vLLM turns its hybrid manager off: sliding-window layers keep blocks for
// every token, as full-attention ones do, in one KV cache group. So alternating 64-token windows
// (layer_pattern SF) store and load exactly what the all-full model does here (the profile step
// model does not see the window): C misses the GPU for blocks B evicted and loads 512 tokens
// from the CPU tier, byte for byte as with pattern F.
TEST(LmcacheEngine, SlidingWindowLayersAreFullAttentionUnderLmcache) {
  const std::vector<std::string> swa = {"model.layer_pattern=SF", "model.sliding_window=64"};
  const scenario::Scenario s = scenario_with(swa);
  const KvCacheLayout l = derive_kv_cache_layout(s, hw::derive_geometry(s));
  ASSERT_EQ(l.config.kv_cache_groups.size(), 1u);
  EXPECT_EQ(l.config.kv_cache_groups[0].kv_cache_spec.kind,
            model::vllm::KVCacheSpecKind::kFullAttention);
  EXPECT_EQ(l.config.kv_cache_groups[0].layer_names.size(), 32u);
  Result f = run(scenario_with({}), kEvictedPrefix);
  Result sf = run(s, kEvictedPrefix);
  ASSERT_EQ(sf.records.size(), 3u);
  EXPECT_EQ(sf.records.at(2).loaded_tokens[report::kTierCpu], 512);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sf.records.at(i).gpu_hit_tokens, f.records.at(i).gpu_hit_tokens) << i;
    EXPECT_EQ(sf.records.at(i).first_token, f.records.at(i).first_token) << i;
  }
  EXPECT_EQ(sf.summary.link_bytes, f.summary.link_bytes);
}

// wait_for_save stores request after request, each store copying its chunks GPU → CPU before the
// next (and only then queueing their disk / remote writes). W runs alone; A and B arrive during
// W's step and prefill together in the next one (2048 tokens: 3048 µs), then each copies its 4
// chunks (128 MiB at 50 GB/s plus the 10-µs latency per chunk) in turn before the step ends.
TEST(LmcacheEngine, StoresOfOneStepCopyRequestAfterRequest) {
  const char* trace =
      "0,1024,1,512,1 2\n"
      "0.001,1024,1,512,3 4\n"
      "0.001,1024,1,512,5 6\n";
  Result r = run(scenario_with({"vllm.num_gpu_blocks=300"}), trace);
  const SimTime copy = store_copy_ns(134'217'728, 4, 50);
  const SimTime w_done = r.records.at(0).finish;
  ASSERT_GT(w_done, r.records.at(1).arrival);
  for (uint64_t i : {1, 2}) {
    EXPECT_EQ(r.records.at(i).first_scheduled, w_done) << i;
    EXPECT_EQ(r.records.at(i).finish, w_done + 3'048'000 + 2 * copy) << i;
  }
  EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("pcie_d2h"), 3 * 134'217'728.0);
}

// The same with MLA at TP 2 (36 KiB per token: chunks 2 and 3 are 512 × 36,864 = 18,874,368
// bytes). Under save_only_first_rank rank 0 loads them and broadcasts them to rank 1 before the
// forward pass: 18,874,368 B / 300 GB/s = 62,914.56 → 62,915 ns, plus the 8 µs latency.
// With every rank loading its own copy there is no broadcast.
TEST(LmcacheEngine, MlaLoadsWaitForRankZerosBroadcast) {
  // Compute capability 8.0: vLLM's Triton MLA keeps the 16-token blocks (Hopper's FlashMLA
  // would force 64).
  const std::vector<std::string> mla = {"gpu.tensor_parallel=2",     "model.attention=mla",
                                        "model.kv_lora_rank=512",    "model.qk_rope_head_dim=64",
                                        "gpu.allreduce_gbps=300",    "gpu.allreduce_latency_us=8",
                                        "gpu.compute_capability=8.0"};
  const SimTime load = pcie_copy_ns(18'874'368, 35);
  for (bool first_rank_only : {true, false}) {
    std::vector<std::string> sets = mla;
    sets.push_back(std::string("lmcache.save_only_first_rank=") +
                   (first_rank_only ? "true" : "false"));
    Result r = run(scenario_with(sets), kEvictedPrefix);
    const auto& c = r.records.at(2);
    EXPECT_EQ(c.gpu_hit_tokens, 560);
    EXPECT_EQ(c.loaded_tokens[report::kTierCpu], 512);
    EXPECT_EQ(c.first_token - c.arrival, load + (first_rank_only ? 62'915 + 8'000 : 0) + 1'001'000)
        << first_rank_only;
  }
}

// A's chunks reach the shared remote store from instance 0; C (same prompt) lands on instance 1,
// where only the remote tier has them, and every remote GET fails. (Failures are injected by
// deleting the remote copy of each pinned chunk before the GET, so LMCache's own partial-retrieve
// path reports the missing blocks.) B (another prompt) then runs on instance 0 and D (A's prompt
// again) on instance 1, after C.
//   recompute: C's 1023 external tokens are recomputed and C completes; its blocks stay cached,
//              so D hits 63 blocks (1008 tokens) on the GPU.
//   fail (vLLM's default): C ends with an error after the failed step (no token), and C's blocks
//              leave the prefix cache: D finds nothing on the GPU (nor in Redis: the injected
//              faults deleted C's keys) and computes its prompt.
TEST(LmcacheEngine, FailedRemoteLoadsEndTheRequestOrAreRecomputedByPolicy) {
  const char* trace =
      "0,1024,2,512,1 2\n"
      "10,1024,2,512,1 2\n"
      "20,1024,2,512,3 4\n"
      "30,1024,2,512,1 2\n";
  std::vector<std::string> base = {"cluster.instances=2", "cluster.router=round_robin",
                                   "lmcache.remote=true"};
  Result ok = run(scenario_with(base), kSharedPrompt);
  EXPECT_EQ(ok.records.at(1).lmcache_hit_tokens, 1023);
  EXPECT_EQ(ok.records.at(1).loaded_tokens[report::kTierRemote], 1024);
  EXPECT_EQ(ok.records.at(1).failed_load_tokens, 0);
  EXPECT_GT(ok.summary.link_bytes.at("remote_tx"), 0.0);
  base.push_back("links.remote_get_failure_rate=1");

  std::vector<std::string> recompute = base;
  recompute.push_back("vllm.kv_load_failure_policy=recompute");
  // Under async scheduling (the default) C's second step S2, a decode scheduled while the failed
  // step S1 ran, still runs and samples C's first token (from the KV that failed to load:
  // upstream skips only the failed step's output); S1 also keeps its placeholder, so the
  // recompute step S3 schedules C's 1024 tokens plus 2 placeholders (1000 + 1026 µs) and samples
  // C's last token; the placeholder test holds C back meanwhile (1026 + 2 − 2 ≥ 1024 + 2). S1
  // starts after the lookup's 4 Redis EXISTS round trips (4 × 50 µs).
  // S3 stores nothing. With the tracker cut back to the recomputed tokens (upstream_fixes) it
  // holds 1026 tokens, short of the chunk boundary after the 1024 it counts as saved (1280).
  // Under f4261ef6's quirk it appends S3's 1026 tokens to S1's 1024: 2048 tokens to save over
  // 65 blocks (1040 slots), and the worker's slot-mapping assertion raises, one failed store.
  //   TP 2 (vLLM's mp executor): S2's token arrives when S2 ends.
  //   TP 1 (uni executor: execute_model on the engine core's thread): the engine sits in
  //   execute_model until the step ends only when it may store; S3 may under the quirk, so S2's
  //   token and S3's arrive together.
  for (bool fixed : {true, false}) {
    for (int tp : {2, 1}) {
      std::vector<std::string> sets = recompute;
      sets.push_back("gpu.tensor_parallel=" + std::to_string(tp));
      if (fixed) sets.push_back("lmcache.upstream_fixes=true");
      Result rec_async = run(scenario_with(sets), trace);
      const auto& ca = rec_async.records.at(1);
      EXPECT_EQ(ca.failed_load_tokens, 1023) << tp << fixed;
      EXPECT_EQ(ca.output_tokens, 2) << tp << fixed;
      EXPECT_FALSE(ca.load_error) << tp << fixed;
      EXPECT_EQ(ca.finish - ca.arrival, 4 * 50'000 + 2 * 1'001'000 + 2'026'000) << tp << fixed;
      EXPECT_EQ(ca.first_token - ca.arrival,
                tp == 2 || fixed ? 4 * 50'000 + 2 * 1'001'000 : ca.finish - ca.arrival)
          << tp << fixed;
      EXPECT_EQ(rec_async.summary.failed_stores, fixed ? 0u : 1u) << tp << fixed;
      EXPECT_EQ(rec_async.summary.finished, 4u) << tp << fixed;
      EXPECT_EQ(rec_async.summary.failed, 0u) << tp << fixed;
    }
  }

  recompute.push_back("vllm.async_scheduling=false");
  Result rec = run(scenario_with(recompute), trace);
  const auto& c = rec.records.at(1);
  EXPECT_EQ(c.lmcache_hit_tokens, 1023);
  EXPECT_EQ(c.loaded_tokens[report::kTierRemote], 0);
  EXPECT_EQ(c.failed_load_tokens, 1023);
  EXPECT_EQ(c.output_tokens, 2);
  EXPECT_FALSE(c.load_error);
  // The failed step still runs its one scheduled token (1001 µs); the recompute of all 1024
  // tokens follows (2024 µs) before the first token.
  EXPECT_GE(c.first_token - c.arrival, 1'001'000 + 2'024'000);
  EXPECT_DOUBLE_EQ(rec.summary.link_bytes.at("remote_tx"), 0.0);  // no GET moved bytes
  EXPECT_EQ(rec.records.at(3).gpu_hit_tokens, 1008);
  EXPECT_EQ(rec.records.at(3).output_tokens, 2);
  EXPECT_EQ(rec.summary.finished, 4u);
  EXPECT_EQ(rec.summary.failed, 0u);

  Result fail = run(scenario_with(base), trace);  // the default policy
  const auto& cf = fail.records.at(1);
  EXPECT_TRUE(cf.load_error);
  EXPECT_EQ(cf.failed_load_tokens, 1023);
  EXPECT_EQ(cf.output_tokens, 0);
  EXPECT_LT(cf.first_token, 0);
  EXPECT_GE(cf.finish - cf.arrival, 1'001'000);
  EXPECT_LT(cf.finish - cf.arrival, 1'001'000 + 2'024'000);
  const auto& d = fail.records.at(3);
  EXPECT_EQ(d.gpu_hit_tokens, 0);
  EXPECT_EQ(d.lmcache_hit_tokens, 0);
  EXPECT_FALSE(d.load_error);
  EXPECT_EQ(d.output_tokens, 2);
  EXPECT_EQ(fail.summary.finished, 3u);
  EXPECT_EQ(fail.summary.failed, 1u);
  EXPECT_EQ(fail.summary.failed_load_tokens, 1023u);
}

// A Redis put is two SETs, "<key>kv_bytes" (the bytes) and then "<key>metadata" (one round
// trip), and a key is visible only after the second. With 1 s per round trip, A's put from
// instance 0 ends its first SET about 2.02 s after A arrives (its lookup's EXISTS, the prefill and
// the store copy, then the SET's round trip and its 128 MiB) and its second 1 s later. C (A's
// prompt) reaches instance 1 in between, at 2.5 s, and finds nothing in Redis; at 3.5 s it finds
// the whole prompt.
TEST(LmcacheEngine, ARedisKeyIsVisibleAfterItsMetadataSetAsWell) {
  for (const char* at : {"2.5", "3.5"}) {
    Result r = run(scenario_with({"cluster.instances=2", "cluster.router=round_robin",
                                  "lmcache.remote=true", "links.network_latency_us=1000000"}),
                   std::string("0,1024,2,512,1 2\n") + at + ",1024,2,512,1 2\n");
    const auto& c = r.records.at(1);
    EXPECT_EQ(c.instance, 1) << at;
    EXPECT_EQ(c.lmcache_hit_tokens, std::string(at) == "2.5" ? 0 : 1023) << at;
  }
}

// The failure rate deletes Redis values before LMCache reads them; what the read then finds moves
// in full over the links. Ten prompts, each sent to one instance and 10 s later to the other (round
// robin), whose second copy reads Redis: the bytes received from it are the tokens loaded from it
// at 128 KiB each, with half of the reads failing (the links once failed them a second time).
TEST(LmcacheEngine, RemoteReadsThatSucceedMoveAllTheirBytesWhateverTheFailureRate) {
  std::string trace;
  for (int i = 0; i < 10; ++i) {
    const std::string ids = std::to_string(2 * i + 1) + " " + std::to_string(2 * i + 2);
    trace += std::to_string(20 * i) + ",1024,2,512," + ids + "\n";
    trace += std::to_string(20 * i + 10) + ",1024,2,512," + ids + "\n";
  }
  Result r = run(
      scenario_with({"cluster.instances=2", "cluster.router=round_robin", "lmcache.remote=true",
                     "links.remote_get_failure_rate=0.5", "vllm.kv_load_failure_policy=recompute"}),
      trace);
  int64_t loaded = 0, failed = 0;
  for (const auto& [index, rec] : r.records) {
    loaded += rec.loaded_tokens[report::kTierRemote];
    failed += rec.failed_load_tokens;
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(failed, 0);
  EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("remote_tx"), static_cast<double>(loaded) * 131'072);
}

// LMCache's health monitor turns an instance's LMCache off after failed Redis reads. Each prompt
// is served on instance 0 (round robin), then on instance 1, whose copy finds it in Redis only;
// every Redis read fails (failure rate 1). Instance 1's retrieves of B (10 s) and D (14 s) each
// fail once (one batched_get_blocking each), so its check at 30 s meets the threshold of 2: from
// 30 s its LMCache is off, and F (50 s) gets no LMCache hit at all — no lookup, no failed load —
// where without the monitor it hits, fails its load and recomputes. The recovery's first attempt
// (30 + 60 s) comes after the run. Instance 0 never reads Redis and stays healthy.
TEST(LmcacheEngine, FailedRedisReadsTurnAnInstancesLmcacheOffAtTheNextHealthCheck) {
  const std::string trace = std::string(kTwoFailedReads) + "50,1024,2,512,5 6\n";
  std::vector<std::string> sets = failing_redis("1", 2);
  Result on = run(scenario_with(sets), trace);
  sets.push_back("lmcache.health_monitor=false");
  Result off = run(scenario_with(sets), trace);
  for (const Result* r : {&on, &off}) {
    EXPECT_EQ(r->records.at(1).failed_load_tokens, 1023);
    EXPECT_EQ(r->records.at(3).failed_load_tokens, 1023);
  }
  EXPECT_EQ(off.records.at(5).lmcache_hit_tokens, 1023);
  EXPECT_EQ(off.records.at(5).failed_load_tokens, 1023);
  EXPECT_EQ(on.records.at(5).lmcache_hit_tokens, 0);
  EXPECT_EQ(on.records.at(5).failed_load_tokens, 0);
  EXPECT_EQ(on.summary.health.failed_remote_gets, 2u);
  EXPECT_EQ(on.summary.health.unhealthy_periods, 1u);
  // Off from 30 s to the run's end: F's finish, or the sample just after it (1-s period).
  const double f_end = static_cast<double>(on.records.at(5).finish) / 1e9;
  EXPECT_GE(on.summary.health.unhealthy_s, f_end - 30);
  EXPECT_LE(on.summary.health.unhealthy_s, f_end - 30 + 1);
  EXPECT_EQ(off.summary.health.failed_remote_gets, 3u);
  EXPECT_EQ(off.summary.health.unhealthy_periods, 0u);
}

// The same two failures under the "local_cpu" fallback: from 30 s instance 1 bypasses Redis but
// keeps its CPU tier. It serves G (45 s, a new prompt), then I (55 s), which takes G's last GPU
// blocks, then G's prompt again (60 s): 544 tokens from the GPU, the 479 beyond them from the CPU
// chunks G stored meanwhile (512 tokens loaded). Under "recompute" LMCache stored nothing for G,
// so the same request gets the GPU's 544 alone. K (65 s) repeats E's prompt, which only Redis
// holds for instance 1: bypassed (or off), no hit and no failed read either way.
TEST(LmcacheEngine, TheLocalCpuFallbackBypassesRedisAndKeepsTheCpuTier) {
  const std::string trace = std::string(kTwoFailedReads) +
                            "45,1024,2,512,9 10\n"
                            "50,1024,2,512,11 12\n"
                            "55,1024,2,512,13 14\n"
                            "58,1024,2,512,15 16\n"
                            "60,1024,2,512,9 10\n"
                            "62,1024,2,512,17 18\n"
                            "65,1024,2,512,5 6\n";
  std::vector<std::string> sets = failing_redis("1", 2);
  Result recompute = run(scenario_with(sets), trace);
  sets.push_back("lmcache.health_fallback_policy=local_cpu");
  Result local = run(scenario_with(sets), trace);
  for (const Result* r : {&recompute, &local}) {
    EXPECT_EQ(r->summary.health.failed_remote_gets, 2u);
    EXPECT_EQ(r->summary.health.unhealthy_periods, 1u);
    EXPECT_EQ(r->records.at(9).gpu_hit_tokens, 544);
    EXPECT_EQ(r->records.at(11).lmcache_hit_tokens, 0);
    EXPECT_EQ(r->records.at(11).failed_load_tokens, 0);
  }
  const report::RequestRecord& h = local.records.at(9);
  EXPECT_EQ(h.lmcache_hit_tokens, 479);
  EXPECT_EQ(h.loaded_tokens[report::kTierCpu], 512);
  EXPECT_EQ(h.loaded_tokens[report::kTierRemote], 0);
  EXPECT_EQ(h.failed_load_tokens, 0);
  EXPECT_EQ(recompute.records.at(9).lmcache_hit_tokens, 0);
}

// Recovering from the "local_cpu" fallback with lmcache.local_cpu off: upstream restores use_hot
// first and then clears the hot cache, a clear that does nothing with use_hot off (quirk
// health_recovery_clear_is_noop). G's chunks, stored on instance 1 while Redis was bypassed, stay
// in its CPU pool, and its prompt at 1,000 s (after two requests took its GPU blocks) is served
// from there; with the fix the pool was cleared and nothing hits (Redis never got G's chunks).
// Half of the Redis reads fail; the run checks that the fallback came and went before 1,000 s.
TEST(LmcacheEngine, RecoveringFromTheLocalCpuFallbackLeavesTheHotCacheFullUpstream) {
  const char* trace =
      "0,1024,2,512,1 2\n"
      "10,1024,2,512,1 2\n"
      "12,1024,2,512,3 4\n"
      "14,1024,2,512,3 4\n"
      "40,1024,2,512,30 31\n"
      "45,1024,2,512,9 10\n"
      "980,1024,2,512,32 33\n"
      "985,1024,2,512,20 21\n"
      "988,1024,2,512,34 35\n"
      "990,1024,2,512,22 23\n"
      "992,1024,2,512,36 37\n"
      "1000,1024,2,512,9 10\n";
  std::vector<std::string> sets = failing_redis("0.5", 1);
  sets.push_back("lmcache.local_cpu=false");
  sets.push_back("lmcache.health_fallback_policy=local_cpu");
  Result upstream = run(scenario_with(sets), trace);
  sets.push_back("lmcache.upstream_fixes=true");
  Result fixed = run(scenario_with(sets), trace);
  for (const Result* r : {&upstream, &fixed}) {
    ASSERT_EQ(r->summary.health.unhealthy_periods, 1u);
    ASSERT_LT(r->summary.health.unhealthy_s, 1000.0 - 30 - 30);  // back before 1,000 s
    EXPECT_EQ(r->records.at(11).gpu_hit_tokens, 0);
  }
  EXPECT_EQ(upstream.records.at(11).lmcache_hit_tokens, 1023);
  EXPECT_EQ(upstream.records.at(11).loaded_tokens[report::kTierCpu], 1024);
  EXPECT_EQ(fixed.records.at(11).lmcache_hit_tokens, 0);
}

// A synchronous lookup blocks vLLM's scheduler while LMCache asks Redis, one EXISTS round trip per
// chunk until the first miss, after the CPU and disk tiers: A (nothing stored yet) asks once;
// C, on the other instance, finds its 4 chunks in Redis only and asks 4 times. C's retrieve then
// runs one GET job per chunk on the connector's 4 workers, in parallel: the metadata's round trip,
// then the bytes (a transfer with its own round trip). With links.network_latency_us 50 instead
// of 0, A's TTFT grows by 50 µs and C's by (4 + 1 + 1) × 50 µs.
TEST(LmcacheEngine, SynchronousLookupsWaitForEachRedisExists) {
  std::vector<std::string> base = {"cluster.instances=2", "cluster.router=round_robin",
                                   "lmcache.remote=true"};
  auto with_latency = [&](const char* us) {
    std::vector<std::string> sets = base;
    sets.push_back(std::string("links.network_latency_us=") + us);
    return run(scenario_with(sets), kSharedPrompt);
  };
  Result zero = with_latency("0");
  Result fifty = with_latency("50");
  auto ttft = [](const Result& r, uint64_t i) {
    return r.records.at(i).first_token - r.records.at(i).arrival;
  };
  EXPECT_EQ(fifty.records.at(1).loaded_tokens[report::kTierRemote], 1024);
  EXPECT_EQ(ttft(fifty, 0) - ttft(zero, 0), 50'000);
  EXPECT_EQ(ttft(fifty, 1) - ttft(zero, 1), 6 * 50'000);
}

// Under async scheduling the scheduler looks up while the previous step runs. R0 stores prompt P
// (4 chunks) on instance 0; R1 decodes 200 tokens on instance 1 (1-token steps); R3 (prompt P)
// arrives on instance 1 in the middle of one of R1's steps, finds P in Redis only (4 EXISTS
// round trips, then 2 per GET job) and loads it. Raising links.network_latency_us from 0 to 50
// shifts R1's steps by its own lookup's round trip (50 µs) and adds the GETs' 2 × 50 µs to R3's
// load; R3's 4 EXISTS calls (200 µs) block the engine core while R1's 1001-µs step runs, so they
// cost R3 nothing. The synchronous loop waits for them before the step: 50 + 200 + 100 µs.
TEST(LmcacheEngine, AsyncSchedulingOverlapsALookupsRedisRoundTripsWithTheRunningStep) {
  const char* trace =
      "0,1024,1,512,1 2\n"
      "0.5,512,200,512,7\n"
      "0.505,16,1,512,8\n"
      "0.5105,1024,1,512,1 2\n";
  for (bool async : {true, false}) {
    auto ttft = [&](const char* us) {
      Result r = run(
          scenario_with({"cluster.instances=2", "cluster.router=round_robin", "lmcache.remote=true",
                         std::string("vllm.async_scheduling=") + (async ? "true" : "false"),
                         std::string("links.network_latency_us=") + us}),
          trace);
      const auto& r3 = r.records.at(3);
      EXPECT_EQ(r3.instance, 1);
      EXPECT_EQ(r3.loaded_tokens[report::kTierRemote], 1024);
      EXPECT_EQ(r.records.at(1).output_tokens, 200);
      EXPECT_GT(r.records.at(1).finish, r3.first_token);  // R1 still decodes
      return r3.first_token - r3.arrival;
    };
    EXPECT_EQ(ttft("50") - ttft("0"), async ? 150'000 : 350'000) << async;
  }
}

// With one GPU vLLM's uni executor runs execute_model on the engine core's thread, and LMCache's
// wait_for_save waits there for the step's forward pass and its store copy. A (1024 tokens, 3
// outputs) prefills and stores its 4 chunks in S1; R (1024 tokens) arrives 1 ms into S1.
//   TP 1: the engine sits in S1's execute_model until S1 ends (2024 µs + 128 MiB over 50 GB/s),
//         then processes S1 and schedules S2 = A's decode + R's prefill (2025 µs + R's store).
//   TP 2 (mp executor, 64 MiB per GPU): the engine schedules S2 = A's decode at once, so R
//         goes into S3, after S2's 1001 µs.
TEST(LmcacheEngine, OneGpuWaitsInExecuteModelForAStepThatStores) {
  const char* trace =
      "0,1024,3,512,1 2\n"
      "0.001,1024,1,512,3 4\n";
  for (int tp : {1, 2}) {
    Result r =
        run(scenario_with({"vllm.num_gpu_blocks=200", "gpu.tensor_parallel=" + std::to_string(tp)}),
            trace);
    const SimDuration store = store_copy_ns(134'217'728 / tp, 4, 50);
    const auto& a = r.records.at(0);
    const auto& rr = r.records.at(1);
    EXPECT_EQ(a.first_token, 2'024'000 + store) << tp;
    EXPECT_EQ(rr.first_scheduled, 2'024'000 + store) << tp;
    EXPECT_EQ(rr.finish - rr.first_scheduled, (tp == 1 ? 0 : 1'001'000) + 2'025'000 + store) << tp;
    EXPECT_EQ(r.summary.preemptions, 0u);
  }
}

// The Redis connector runs EXISTS and PUT jobs on the same 4 workers. W stores alone; A, B, C
// and D arrive during W's step and store together in the next one: W's, A's, B's and C's puts
// hold the 4 workers (D's waits). E (a new prompt) arrives 1 s later; its lookup misses the CPU
// tier and asks Redis once. With 100-GB/s links every put is long done: E's TTFT is that round
// trip (50 µs), its step (2024 µs) and its own store copy (4 chunks, 128 MiB over the 50-GB/s
// PCIe link).
// With 0.1-GB/s links the puts (128 MiB each) still run, and E's EXISTS waits for the first to
// end: seconds, not microseconds.
TEST(LmcacheEngine, ALookupWaitsForARedisWorkerWhilePutsHoldThemAll) {
  const char* trace =
      "0,1024,1,512,1 2\n"
      "0.001,1024,1,512,3 4\n"
      "0.001,1024,1,512,5 6\n"
      "0.001,1024,1,512,7 8\n"
      "0.001,1024,1,512,9 10\n"
      "1,1024,1,512,11 12\n";
  auto run_with = [&](const char* gbps) {
    return run(
        scenario_with({"lmcache.remote=true", "vllm.num_gpu_blocks=400",
                       "lmcache.max_local_cpu_size_gb=2", std::string("links.network_gbps=") + gbps,
                       std::string("links.remote_server_gbps=") + gbps}),
        trace);
  };
  Result fast = run_with("100");
  const auto& e = fast.records.at(5);
  EXPECT_EQ(e.first_token - e.arrival, 50'000 + 2'024'000 + store_copy_ns(134'217'728, 4, 50));
  Result slow = run_with("0.1");
  const auto& es = slow.records.at(5);
  EXPECT_GT(es.first_token - es.arrival, 1'000'000'000);
}

// Upstream's bulk retrieve waits for each Redis GET at most lmcache.blocking_timeout_secs from
// the previous key's result (sim/engine/blocking_get.h); kvtwin counts the fetches it would cut
// short and still loads them. B (100 s, instance 1) fetches A's 8 chunks (32 MiB each) from
// Redis over 0.1-GB/s links: the 4 Redis workers take 4 GETs at a time, sharing the links, so
// each group takes 4 × 32 MiB / 0.1 GB/s = 1.34 s. Key 0 waits 1.34 s, keys 1-3 nothing, key 4
// (started when key 0's worker came free) 1.34 s more: the fetch takes 2.7 s, and only a
// timeout under 1.34 s cuts it, at key 0 (all 8 chunks).
TEST(LmcacheEngine, CountsTheRemoteFetchesThatUpstreamsBlockingGetWouldCutShort) {
  const char* trace =
      "0,2048,2,512,1 2 3 4\n"
      "100,2048,2,512,1 2 3 4\n";
  auto run_with = [&](int timeout_s) {
    return run(scenario_with({"cluster.instances=2", "cluster.router=round_robin",
                              "lmcache.remote=true", "vllm.num_gpu_blocks=400",
                              "links.network_gbps=0.1", "links.remote_server_gbps=0.1",
                              "lmcache.blocking_timeout_secs=" + std::to_string(timeout_s)}),
               trace);
  };
  Result cut = run_with(1);
  EXPECT_EQ(cut.summary.blocking_get_timeouts.timeout_s, 1);
  EXPECT_EQ(cut.summary.blocking_get_timeouts.fetches, 1u);
  EXPECT_EQ(cut.summary.blocking_get_timeouts.chunks, 8u);
  EXPECT_EQ(cut.records.at(1).loaded_tokens[report::kTierRemote], 2048);  // not modelled
  const SimDuration fetch = SimDuration{2} * 4 * 33'554'432 * 10;         // ns at 0.1 GB/s
  EXPECT_GE(cut.records.at(1).first_token - cut.records.at(1).arrival, fetch);
  for (int timeout_s : {2, 10}) {
    Result within = run_with(timeout_s);
    EXPECT_EQ(within.summary.blocking_get_timeouts.fetches, 0u) << timeout_s;
    EXPECT_EQ(within.summary.blocking_get_timeouts.chunks, 0u) << timeout_s;
    EXPECT_EQ(within.records.at(1).loaded_tokens[report::kTierRemote], 2048) << timeout_s;
    EXPECT_EQ(within.records.at(1).first_token, cut.records.at(1).first_token) << timeout_s;
  }
}

// LMCache models rank 0 of an instance; every rank fetches its own slice of each chunk, so the
// bytes moved from the remote tier are the whole model's KV whatever the tensor parallelism:
// C's 4 chunks of 256 tokens × 128 KiB = 4 × 32 MiB over the shared remote link, at TP 1 and 2.
TEST(LmcacheEngine, FetchesMoveEveryRanksShareOfTheChunks) {
  for (int tp : {1, 2}) {
    Result r =
        run(scenario_with({"cluster.instances=2", "cluster.router=round_robin",
                           "lmcache.remote=true", "gpu.tensor_parallel=" + std::to_string(tp)}),
            kSharedPrompt);
    EXPECT_EQ(r.records.at(1).loaded_tokens[report::kTierRemote], 1024) << tp;
    EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("remote_tx"), 4 * 33'554'432.0) << "TP " << tp;
  }
}

// MLA replicates one latent per token and layer on every rank (here 32 layers × 576 × 2 bytes =
// 36 KiB per token, 9 MiB per 256-token chunk). LMCache's default for MLA (save_only_first_rank)
// keeps the tiers on rank 0 only: at TP 2 each instance holds one CPU pool, and A's write to Redis
// and C's fetch from it move each chunk once. With it off every rank keeps a copy (two pools per
// instance) and reads Redis itself (2 × 4 chunks), but only rank 0 writes there (MLA's
// remote_enable_mla_worker_id_as0: the other ranks read rank 0's keys).
TEST(LmcacheEngine, MlaTiersAndTrafficCountTheRanksThatHoldThem) {
  constexpr double kChunk = 256.0 * 32 * 576 * 2;
  using scenario::kGiB;
  std::vector<std::string> base = {"cluster.instances=2",      "cluster.router=round_robin",
                                   "lmcache.remote=true",      "gpu.tensor_parallel=2",
                                   "model.attention=mla",      "model.kv_lora_rank=512",
                                   "model.qk_rope_head_dim=64"};
  Result first = run(scenario_with(base), kSharedPrompt);
  EXPECT_EQ(first.records.at(1).loaded_tokens[report::kTierRemote], 1024);
  EXPECT_DOUBLE_EQ(first.summary.tier_capacity_bytes[report::kTierCpu], 2 * kGiB);
  EXPECT_DOUBLE_EQ(first.summary.link_bytes.at("remote_rx"), 4 * kChunk);
  EXPECT_DOUBLE_EQ(first.summary.link_bytes.at("remote_tx"), 4 * kChunk);
  EXPECT_DOUBLE_EQ(first.summary.tier_bytes_peak[report::kTierRemote], 4 * kChunk);
  base.push_back("lmcache.save_only_first_rank=false");
  Result every = run(scenario_with(base), kSharedPrompt);
  EXPECT_EQ(every.records.at(1).loaded_tokens[report::kTierRemote], 1024);
  EXPECT_DOUBLE_EQ(every.summary.tier_capacity_bytes[report::kTierCpu], 4 * kGiB);
  EXPECT_DOUBLE_EQ(every.summary.link_bytes.at("remote_rx"), 4 * kChunk);
  EXPECT_DOUBLE_EQ(every.summary.link_bytes.at("remote_tx"), 2 * 4 * kChunk);
  EXPECT_DOUBLE_EQ(every.summary.tier_bytes_peak[report::kTierRemote], 4 * kChunk);
}

// Layerwise mode stores one object per layer per chunk ([256, 2, 1024], 1 MiB each). LMCache
// f4261ef6 cannot serialize their 3-D shapes for Redis
// (Quirks::remote_metadata_requires_4d_shapes): each instance's 4 chunks × 32 layers fail in the
// writer, nothing crosses the network, and C on instance 1 finds nothing. With
// lmcache.upstream_fixes the layers land (the remote tier holds exactly A's 4 chunks, 128 MiB), C
// loads its 1023 external tokens from there, and the fetch moves the 4 chunks over the remote link
// (layerwise loads charge their remote fetch too).
TEST(LmcacheEngine, LayerwiseStoresReachTheRemoteTierOnlyWithTheUpstreamFix) {
  std::vector<std::string> base = {"cluster.instances=2", "cluster.router=round_robin",
                                   "lmcache.remote=true", "lmcache.use_layerwise=true"};
  Result quirk = run(scenario_with(base), kSharedPrompt);
  EXPECT_EQ(quirk.summary.failed_remote_writes, 2u * 4 * 32);
  EXPECT_EQ(quirk.records.at(1).lmcache_hit_tokens, 0);
  EXPECT_EQ(quirk.summary.tier_bytes_peak[report::kTierRemote], 0.0);
  EXPECT_DOUBLE_EQ(quirk.summary.link_bytes.at("remote_rx"), 0.0);  // no write was sent
  EXPECT_DOUBLE_EQ(quirk.summary.link_bytes.at("remote_tx"), 0.0);
  base.push_back("lmcache.upstream_fixes=true");
  Result fixed = run(scenario_with(base), kSharedPrompt);
  EXPECT_EQ(fixed.summary.failed_remote_writes, 0u);
  EXPECT_EQ(fixed.records.at(1).lmcache_hit_tokens, 1023);
  EXPECT_EQ(fixed.summary.loaded_tokens[report::kTierRemote], 1024u);
  EXPECT_DOUBLE_EQ(fixed.summary.tier_bytes_peak[report::kTierRemote], 4 * 33'554'432.0);
  EXPECT_DOUBLE_EQ(fixed.summary.link_bytes.at("remote_rx"), 4 * 33'554'432.0);  // A's writes
  EXPECT_DOUBLE_EQ(fixed.summary.link_bytes.at("remote_tx"), 4 * 33'554'432.0);  // C's fetch
}

// The 70B TP4 scenario in layerwise mode with small CPU tiers (0.25 or 0.5 GiB per rank),
// 64-token chunks and a 20-GiB disk tier per rank, on `instances` instances and the first
// `requests` requests of the example trace at a fifth of its rate.
Result layerwise_70b(const char* cpu_gb, int instances, int requests) {
  const scenario::Scenario s = cli::load_scenario(
      kvtwin::testing::source_path("scenarios/llama31_70b_tp4_cpu_disk_redis.toml"),
      {std::string("lmcache.max_local_cpu_size_gb=") + cpu_gb,
       "cluster.instances=" + std::to_string(instances),
       "workload.max_requests=" + std::to_string(requests), "workload.rate_scale=0.2",
       "lmcache.use_layerwise=true", "lmcache.remote=false", "lmcache.max_local_disk_size_gb=20",
       "lmcache.chunk_size=64", "vllm.num_gpu_blocks=3000"});
  return harness::run_on_example_trace(s);
}

// Every layer written to disk was first copied from the GPU: disk_write is one GPU's pcie_d2h
// bytes times the 4 ranks (the disk tiers are large enough to take every stored chunk).
void expect_every_disk_write_copied(const Result& r) {
  const double copied = r.summary.link_bytes.at("pcie_d2h");
  EXPECT_GT(copied, 0);
  EXPECT_EQ(r.summary.link_bytes.at("disk_write"), 4 * copied);
}

// Layerwise mode runs each step's loads and stores layer by layer; where a generator raises
// (upstream's engine would stop), the simulator goes on, loads and stores apart. A load that
// raised is recomputed and leaves the step's stores alone: they finish, so no chunk is left with
// only some of its layers in the CPU tier. Before, it dropped the step's stores half-way: their
// put layers still went to disk, uncharged, and the half-stored chunks made later evictions raise
// (21 failed stores here).
TEST(LmcacheEngine, ALayerwiseLoadThatRaisesLeavesTheStepsStoresWhole) {
  Result r = layerwise_70b("0.25", 1, 150);
  EXPECT_GE(r.summary.stalled_loads, 1u);
  EXPECT_EQ(r.summary.failed_stores, 0u);
  expect_every_disk_write_copied(r);
}

// A layerwise store that raised (an eviction meeting a chunk without all its layers, an upstream
// defect reproduced by default) drops the step's stores, not its loads: no stalled load, and no
// layer reaches the disk without its copy. Before, it counted a stalled load and recomputed the
// step's loads, and end_step put another layer of the other stores, to disk, uncharged. (Here
// every store raises in its first step, before any layer is put; what abandon_stores reports of
// layers already put is VllmAdapter.AbandonedLayerwiseStoresReportTheLayersTheyPut's.)
TEST(LmcacheEngine, ALayerwiseStoreThatRaisesDropsTheStepsStoresNotItsLoads) {
  Result r = layerwise_70b("0.5", 2, 150);
  EXPECT_GE(r.summary.failed_stores, 1u);
  EXPECT_EQ(r.summary.stalled_loads, 0u);
  expect_every_disk_write_copied(r);
}

// A layerwise put that raises (LFU's stale-entry KeyError again, with a slow disk keeping writes
// pending) comes after that layer's GPU -> CPU copy, and may have put some of its objects in the
// tiers: the dropped store charges the layers it copied, that one included. Every byte written to
// disk was copied first (disk_write <= the 4 ranks' copies). Before, only the layers fully put
// were charged, and disk_write exceeded the copies by 280 MiB here.
TEST(LmcacheEngine, ALayerwisePutThatRaisesChargesTheLayerItCopied) {
  const scenario::Scenario s = cli::load_scenario(
      kvtwin::testing::source_path("scenarios/llama31_70b_tp4_cpu_disk_redis.toml"),
      {"lmcache.use_layerwise=true", "lmcache.remote=false", "lmcache.cache_policy=LFU",
       "lmcache.max_local_disk_size_gb=2", "lmcache.chunk_size=512", "vllm.num_gpu_blocks=1500",
       "cluster.instances=2", "cluster.router=round_robin", "workload.max_requests=50",
       "workload.rate_scale=5", "links.disk_write_gbps=0.5"});
  Result r = harness::run_on_example_trace(s);
  EXPECT_GE(r.summary.failed_stores, 1u);
  const double copied = r.summary.link_bytes.at("pcie_d2h");
  EXPECT_GT(copied, 0);
  EXPECT_LE(r.summary.link_bytes.at("disk_write"), 4 * copied);
}

// LMCache f4261ef6's disk accounting quirks keep reservations that no chunk holds (e.g. a re-put
// of a resident key reserves twice). On a small disk under churn the leak reaches most of the
// disk: the summary gives it at the end of the run, and with lmcache.upstream_fixes there is
// none.
TEST(LmcacheEngine, TheDisksLeakedReservationIsReportedAndGoneWithTheFixes) {
  const std::vector<std::string> sets = {"lmcache.max_local_cpu_size_gb=0.5",
                                         "lmcache.max_local_disk_size_gb=2",
                                         "workload.rate_scale=1", "workload.max_requests=150"};
  const std::string file = kvtwin::testing::source_path("scenarios/llama31_8b_h100_cpu.toml");
  const Result quirks = harness::run_on_example_trace(cli::load_scenario(file, sets));
  EXPECT_GT(quirks.summary.disk_leaked_bytes, 0.5 * scenario::kGiB);
  EXPECT_LE(quirks.summary.disk_leaked_bytes, 2 * scenario::kGiB);
  std::vector<std::string> fixed_sets = sets;
  fixed_sets.push_back("lmcache.upstream_fixes=true");
  const Result fixed = harness::run_on_example_trace(cli::load_scenario(file, fixed_sets));
  EXPECT_GT(fixed.summary.tier_evictions[report::kTierDisk], 0u);  // the same churn
  EXPECT_EQ(fixed.summary.disk_leaked_bytes, 0.0);
}

// A Mover that reports every disk -> CPU read failed (as a real tier with a corrupt or missing
// file would under kvtwin validate --timing=measured), after the modelled one's time; it counts
// them in *failed (which outlives the cluster that owns the mover).
class FailingDiskReads final : public Mover {
 public:
  FailingDiskReads(Mover& modeled, int* failed) : modeled_(modeled), failed_(failed) {}
  void start(Transfer t, Done done) override {
    const bool fail = t.src == Location::kDisk && t.dst == Location::kCpu;
    if (fail) ++*failed_;
    modeled_.start(std::move(t), [fail, done = std::move(done)](const TransferResult& r) {
      TransferResult out = r;
      if (fail) out.ok.assign(out.ok.size(), 0);
      done(out);
    });
  }
  std::string_view name() const override { return "failing disk reads"; }

 private:
  Mover& modeled_;
  int* failed_;
};

// A bulk load whose disk read failed is a miss: the request's blocks from the chunk the read was
// for become load errors, recomputed under the recompute policy. With the modelled mover alone
// the same run loads them.
TEST(LmcacheEngine, AFailedDiskReadIsAMissFromItsChunkOn) {
  // A CPU tier of three chunks: B's prompt pushes A's chunks out of it; C finds them on disk.
  const scenario::Scenario s =
      scenario_with({"lmcache.max_local_cpu_size_gb=0.1", "lmcache.max_local_disk_size_gb=1",
                     "vllm.kv_load_failure_policy=recompute"});
  const std::string trace =
      "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n" + std::string(kEvictedPrefix);
  const Result healthy = harness::run_cluster(s, trace);
  const report::RequestRecord& c = healthy.records.at(2);
  ASSERT_GT(c.lmcache_hit_tokens, 0);
  ASSERT_EQ(c.loaded_tokens[report::kTierCpu], 0);  // LMCache's whole hit is in one disk chunk
  ASSERT_EQ(c.loaded_tokens[report::kTierDisk], 256);
  EXPECT_EQ(healthy.summary.failed_load_tokens, 0u);
  int reads = 0;
  const Result failed = harness::run_cluster(s, trace, {}, [&](Simulator&, Mover& modeled) {
    return std::make_unique<FailingDiskReads>(modeled, &reads);
  });
  EXPECT_EQ(reads, 1);  // C's
  const report::RequestRecord& c2 = failed.records.at(2);
  EXPECT_EQ(c2.lmcache_hit_tokens, c.lmcache_hit_tokens);
  // The chunk starts below vLLM's own hit: every token LMCache was to add is lost.
  EXPECT_EQ(c2.failed_load_tokens, c.lmcache_hit_tokens);
  EXPECT_EQ(failed.summary.failed_load_tokens, static_cast<uint64_t>(c.lmcache_hit_tokens));
  EXPECT_FALSE(c2.load_error);  // recomputed
  EXPECT_EQ(failed.summary.finished, 3u);
}

// The same in layerwise mode: the step's disk read (one for all its requests) failed, so every
// request that read the disk loses its load from its first disk chunk on.
TEST(LmcacheEngine, AFailedLayerwiseDiskReadIsAMissFromItsChunkOn) {
  const scenario::Scenario s =
      scenario_with({"lmcache.max_local_cpu_size_gb=0.1", "lmcache.max_local_disk_size_gb=1",
                     "vllm.kv_load_failure_policy=recompute", "lmcache.use_layerwise=true"});
  const std::string trace =
      "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n" + std::string(kEvictedPrefix);
  const Result healthy = harness::run_cluster(s, trace);
  const report::RequestRecord& c = healthy.records.at(2);
  ASSERT_GT(c.lmcache_hit_tokens, 0);
  ASSERT_EQ(c.loaded_tokens[report::kTierCpu], 0);
  ASSERT_GT(c.loaded_tokens[report::kTierDisk], 0);
  EXPECT_EQ(healthy.summary.failed_load_tokens, 0u);
  int reads = 0;
  const Result failed = harness::run_cluster(s, trace, {}, [&](Simulator&, Mover& modeled) {
    return std::make_unique<FailingDiskReads>(modeled, &reads);
  });
  EXPECT_EQ(reads, 1);
  const report::RequestRecord& c2 = failed.records.at(2);
  EXPECT_EQ(c2.failed_load_tokens, c.lmcache_hit_tokens);
  EXPECT_EQ(failed.summary.failed_load_tokens, static_cast<uint64_t>(c.lmcache_hit_tokens));
  EXPECT_FALSE(c2.load_error);
  EXPECT_EQ(failed.summary.finished, 3u);
}

// A bulk store that raises in its puts (LFU's stale-entry KeyError: the disk tier's eviction scan
// meets a key whose write is still pending, an upstream defect reproduced by default) has already
// copied its chunks off the GPU, and some of them are in the tiers. The copy is charged: every byte
// written to disk was copied first, and the failed store's chunks that never reached the disk make
// pcie_d2h the larger. Before, the failed store's copy was not charged, and disk_write exceeded
// pcie_d2h by eight chunks here.
TEST(LmcacheEngine, ABulkStoreThatRaisesInItsPutsChargesItsCopy) {
  const scenario::Scenario s = cli::load_scenario(
      kvtwin::testing::source_path("scenarios/llama31_8b_h100_cpu.toml"),
      {"lmcache.cache_policy=LFU", "lmcache.max_local_cpu_size_gb=0.5",
       "lmcache.max_local_disk_size_gb=2", "workload.rate_scale=1", "workload.max_requests=150"});
  Result r = harness::run_on_example_trace(s);
  EXPECT_EQ(r.summary.failed_stores, 1u);
  const double copied = r.summary.link_bytes.at("pcie_d2h");
  const double written = r.summary.link_bytes.at("disk_write");
  EXPECT_GT(written, 0);
  EXPECT_LT(written, copied);
}

}  // namespace
}  // namespace kvtwin::sim::engine
