// LMCache's async loading inside the simulated engine (lmcache.enable_async_loading): a request
// whose prefix is on disk only waits for the prefetch, then hits from CPU; computed by hand and
// compared with the synchronous load of the same request. Then the same disk reads served by the
// host's page cache (links.page_cache_gb).
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "sim/engine/cluster.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/sim/engine/engine_harness.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::engine {
namespace {

using Result = harness::RunResult;

// Llama-3.1-8B geometry (32 MiB per 256-token chunk), a profile step model (1000 µs + 1 µs per
// token), 100 GPU blocks, a CPU tier of 4 chunks (128 MiB) and a 1 GiB disk.
scenario::Scenario scenario_with(const std::vector<std::string>& sets) {
  return harness::profile_scenario(
      "[step]\nmodel = \"profile\"\nprofile = \"profile.csv\"\n"
      "[vllm]\nblock_size = 16\nnum_gpu_blocks = 100\n"
      "[lmcache]\nenabled = true\nchunk_size = 256\nmax_local_cpu_size_gb = 0.125\n"
      "max_local_disk_size_gb = 1\n"
      "[links]\npcie_h2d_gbps = 35\npcie_d2h_gbps = 50\npcie_latency_us = 10\n"
      "disk_read_gbps = 7\ndisk_write_gbps = 5\ndisk_latency_us = 80\n",
      "lm_async.toml", sets);
}

Result run(const scenario::Scenario& s, const std::string& trace) {
  return harness::run_cluster(s, trace);
}

// ceil(bytes / (gbps GB/s)) + latency, as the modeled links charge one transfer alone.
SimTime transfer_ns(int64_t bytes, int64_t gbps, int64_t latency_us) {
  const int64_t bw = gbps * 1'000'000'000;
  return (bytes * 1'000'000'000 + bw - 1) / bw + latency_us * 1000;
}

constexpr int64_t kChunkBytes = 33'554'432;

// A and C share a 1024-token prompt; B in between pushes A's 4 chunks out of the 4-chunk CPU tier
// (they stay on disk) and evicts A's last 29 GPU blocks, so C hits 560 tokens on the GPU and the
// whole prompt on disk only: vLLM takes 1024 − 560 − 1 = 463 external tokens, and LMCache loads
// whole chunks past floor(560/256)·256 = 512 tokens: chunks 2 and 3.
const char* kTrace =
    "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
    "0,1024,1,512,1 2\n"
    "10,1024,1,512,3 4\n"
    "20,1024,1,512,1 2\n";

// Synchronous: the scheduler's lookup answers at once; the step reads chunks 2-3 from disk
// (64 MiB), copies them to the GPU, then computes 1 token (1001 µs).
TEST(LmcacheAsyncLoading, WithAsyncOffADiskPrefixLoadsInsideTheStep) {
  Result r = run(scenario_with({}), kTrace);
  const auto& c = r.records.at(2);
  EXPECT_EQ(c.gpu_hit_tokens, 560);
  EXPECT_EQ(c.lmcache_hit_tokens, 463);
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 512);
  EXPECT_EQ(c.first_token - c.arrival,
            transfer_ns(2 * kChunkBytes, 7, 80) + transfer_ns(2 * kChunkBytes, 35, 10) + 1'001'000);
}

// Async: C's first schedule sends the lookup and skips C. Each lookup sent and each check of a
// pending one sleeps one backoff (10 ms) in the scheduler, and an engine iteration that ran
// nothing sleeps 1 ms before the next poll (vLLM's busy loop):
//   0 ms   C's lookup sent (blocks until 10 ms); nothing scheduled; sleep until 11 ms
//   11 ms  C still pending (blocks until 21 ms); the prefetch, which reads all 4 chunks from disk
//          (128 MiB at 7 GB/s + 80 µs: 19.25 ms; upstream ignores what vLLM already holds),
//          answers 1024 meanwhile; sleep until 22 ms
//   22 ms  C admitted: the step copies chunks 2-3 CPU → GPU and computes 1 token.
TEST(LmcacheAsyncLoading, ADiskOnlyPrefixWaitsForThePrefetchThenHitsFromCpu) {
  Result r = run(scenario_with({"lmcache.enable_async_loading=true"}), kTrace);
  const auto& c = r.records.at(2);
  EXPECT_EQ(c.gpu_hit_tokens, 560);
  EXPECT_EQ(c.lmcache_hit_tokens, 463);
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 512);  // attributed to the tier it came from
  EXPECT_EQ(c.failed_load_tokens, 0);
  const SimTime prefetch = transfer_ns(4 * kChunkBytes, 7, 80);
  ASSERT_GT(prefetch, 11'000'000);
  ASSERT_LT(prefetch, 21'000'000);
  EXPECT_EQ(c.first_scheduled - c.arrival, 22'000'000);
  EXPECT_EQ(c.first_token - c.arrival,
            22'000'000 + transfer_ns(2 * kChunkBytes, 35, 10) + 1'001'000);
  // The request held no GPU blocks and no token budget while it waited: A and B were unaffected
  // apart from their own zero-hit lookups (sent at arrival: 10 ms, then the 1-ms sleep).
  EXPECT_EQ(r.records.at(0).first_scheduled - r.records.at(0).arrival, 11'000'000);
}

// A 1 MB/s disk makes the 128 MiB prefetch take ~134 s; the lookup answers 0 after 3 s. The
// scheduler checks C's pending lookup every 11 ms from its first one (above), and upstream reads
// the clock after each check's 10-ms backoff sleep: the poll at 272 × 11 = 2,992 ms reads
// 3,002 ms, past the timeout, and C is scheduled there with no hit.
TEST(LmcacheAsyncLoading, ALongPrefetchTimesOutAndTheRequestRecomputes) {
  Result r = run(scenario_with({"lmcache.enable_async_loading=true", "links.disk_read_gbps=0.001"}),
                 kTrace);
  const auto& c = r.records.at(2);
  EXPECT_EQ(c.lmcache_hit_tokens, 0);
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 0);
  EXPECT_EQ(c.first_scheduled - c.arrival, 2'992'000'000);
}

// Two lookups pending in one schedule: the second's clock has moved by the first's backoff
// sleep. A, E and B leave A's and E's chunks on disk only (B's fill the CPU tier); on a 0.05 GB/s
// disk a 4-chunk prefetch reads for 2,684.43 ms (128 MiB + 80 µs), one after the other.
// C (A's prompt) arrives at 0 ms (20 s) and C2 (E's) at 5 ms, while C's send sleeps:
//   0 ms      C's lookup sent (sleep until 10 ms); sleep until 11 ms
//   11 ms     C checked, pending (sleep); C2's lookup sent, its clock at 21 ms; polls 21 ms apart
//   2,684 ms  C's prefetch answers 1,023; C is admitted at the next poll, 11 + 128 × 21 = 2,699
//   then      C2, alone, is checked first in each poll, until its check reads more than
//             21 + 3,000 ms: at the first poll from 3,011 ms on, within one 11-ms poll.
// Sent with the poll's own clock (11 ms), C2 would have timed out from 3,001 ms on.
TEST(LmcacheAsyncLoading, AScheduleChecksEachPendingLookupAfterTheSleepsBeforeIt) {
  const char* trace =
      "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
      "0,1024,1,512,1 2\n"
      "5,1024,1,512,5 6\n"
      "10,1024,1,512,3 4\n"
      "20,1024,1,512,1 2\n"
      "20.005,1024,1,512,5 6\n";
  Result r =
      run(scenario_with({"lmcache.enable_async_loading=true", "links.disk_read_gbps=0.05"}), trace);
  const auto& c = r.records.at(3);
  EXPECT_EQ(c.lmcache_hit_tokens, 1023);
  EXPECT_EQ(c.first_scheduled - 20'000'000'000, 2'699'000'000);
  const auto& c2 = r.records.at(4);
  EXPECT_EQ(c2.lmcache_hit_tokens, 0);
  EXPECT_EQ(c2.loaded_tokens[report::kTierDisk], 0);
  EXPECT_GT(c2.first_scheduled - 20'000'000'000, 3'011'000'000);
  EXPECT_LE(c2.first_scheduled - 20'000'000'000, 3'022'000'000);
}

// D (2,000 tokens) can never fit in the 99 usable GPU blocks (1,584 tokens). It arrives while C's
// slow prefetch (~134 s) occupies LMCache's prefetcher, so D's lookup queues behind it and times
// out: at the first check that reads (after its sleep) 3 s after D's first one the scheduler
// gets 0 (the lookup stays
// pending, upstream's quirk), D's allocation fails with nothing running and no request holding
// blocks, and D is rejected then: 3 s after arrival and within one poll (the pending checks'
// 10-ms backoff sleeps and the engine's 1-ms sleep). Its pending lookup cannot make room;
// waiting for its answer (after C's prefetch) would stall the instance, and, where the prefetch
// never ends, the run.
TEST(LmcacheAsyncLoading, ARequestLargerThanThePoolIsRejectedDespiteItsPendingLookup) {
  std::string trace = kTrace;
  trace += "21,2000,1,1000,90 91\n";
  Result r = run(scenario_with({"lmcache.enable_async_loading=true", "links.disk_read_gbps=0.001"}),
                 trace);
  const auto& d = r.records.at(3);
  EXPECT_TRUE(d.rejected);
  EXPECT_GT(d.finish - d.arrival, 3'000'000'000);
  EXPECT_LT(d.finish - d.arrival, 3'000'000'000 + 3 * 10'000'000 + 1'000'000);
  const auto& c = r.records.at(2);
  EXPECT_FALSE(c.rejected);
  EXPECT_GT(c.first_scheduled - c.arrival, 2'990'000'000);  // its lookup still timed out
  EXPECT_LT(c.first_scheduled - c.arrival, 3'100'000'000);
}

// A stores at 0 s, D at 5 s, B (2,048 tokens) at 10 s; C, A's prompt again, at 10.04 s.
const char* kWorkerQueueTrace =
    "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
    "0,1024,1,512,1 2\n"
    "5,1024,1,512,7 8\n"
    "10,2048,1,512,3 4 5 6\n"
    "10.04,1024,1,512,1 2\n";

// The prefetch runs on LMCache's disk worker pool, which the disk writes share: 4 workers, the
// prefetch (priority 0) ahead of queued writes but never preempting a running one. A stores its 4
// chunks at 0 s, D 4 others at 5 s; B (2,048 tokens) at 10 s stores 8 chunks, which pushes A's
// out of the 12-chunk CPU tier (they stay on disk), and queues 8 disk writes when its store copy
// ends (its first token). C shares A's prompt and arrives at 10.04 s while B's first 4 writes
// hold every worker; they share the write link and end together. C's prefetch (A's 4 chunks: the
// CPU pool evicts D's to hold them) starts then, before B's other 4 writes, and reads for
// 19.25 ms; the scheduler, polling every 11 ms (10-ms backoff, 1-ms idle sleep) since C's
// arrival, admits C at its first poll after the read.
TEST(LmcacheAsyncLoading, ThePrefetchWaitsForADiskWorkerAndGoesBeforeQueuedWrites) {
  constexpr SimDuration kPoll = 11'000'000;
  for (int64_t write_gbps : {1, 5}) {
    Result r = run(scenario_with({"lmcache.enable_async_loading=true", "vllm.num_gpu_blocks=150",
                                  "lmcache.max_local_cpu_size_gb=0.375",
                                  "links.disk_write_gbps=" + std::to_string(write_gbps)}),
                   kWorkerQueueTrace);
    const auto& b = r.records.at(2);
    const auto& c = r.records.at(3);
    EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 1024) << write_gbps;
    EXPECT_EQ(c.failed_load_tokens, 0) << write_gbps;
    const SimTime writes_end = b.first_token + transfer_ns(4 * kChunkBytes, write_gbps, 80);
    ASSERT_GT(writes_end, c.arrival) << write_gbps;
    const SimTime read_end = writes_end + transfer_ns(4 * kChunkBytes, 7, 80);
    const SimDuration polls = (read_end - c.arrival + kPoll - 1) / kPoll;
    EXPECT_EQ(c.first_scheduled - c.arrival, polls * kPoll) << write_gbps;
  }
}

// links.page_cache_gb: A's and B's chunk files stay in a 1-GiB page cache after their writes, so
// C's read of chunks 2-3 is a memory copy at 10 GB/s without the disk latency. A page cache of 2
// chunks holds only B's last two by then: C reads from the device, as without one.
TEST(LmcachePageCache, ADiskPrefixStillInThePageCacheLoadsAtMemorySpeed) {
  const SimTime to_gpu = transfer_ns(2 * kChunkBytes, 35, 10) + 1'001'000;
  Result big = run(scenario_with({"links.page_cache_gb=1", "links.page_cache_gbps=10"}), kTrace);
  const auto& c = big.records.at(2);
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 512);
  EXPECT_EQ(c.first_token - c.arrival, transfer_ns(2 * kChunkBytes, 10, 0) + to_gpu);
  EXPECT_EQ(big.summary.page_cache.hit_bytes, 2u * kChunkBytes);
  EXPECT_EQ(big.summary.page_cache.miss_bytes, 0u);
  EXPECT_DOUBLE_EQ(big.summary.page_cache.peak_bytes, 8.0 * kChunkBytes);
  EXPECT_DOUBLE_EQ(big.summary.link_bytes.at("disk_read"), 0);
  // A's and B's 8 chunk writes fit the dirty budget (20 % of 1 GiB): each returned once in
  // memory, and all 8 were still written back.
  EXPECT_EQ(big.summary.page_cache.buffered_write_bytes, 8u * kChunkBytes);
  EXPECT_DOUBLE_EQ(big.summary.link_bytes.at("page_cache"), 2.0 * kChunkBytes);
  EXPECT_DOUBLE_EQ(big.summary.link_bytes.at("page_cache_write"), 8.0 * kChunkBytes);
  EXPECT_DOUBLE_EQ(big.summary.link_bytes.at("disk_write"), 8.0 * kChunkBytes);

  Result small =
      run(scenario_with({"links.page_cache_gb=0.0625", "links.page_cache_gbps=10"}), kTrace);
  const auto& c2 = small.records.at(2);
  EXPECT_EQ(c2.first_token - c2.arrival, transfer_ns(2 * kChunkBytes, 7, 80) + to_gpu);
  EXPECT_EQ(small.summary.page_cache.hit_bytes, 0u);
  EXPECT_EQ(small.summary.page_cache.miss_bytes, 2u * kChunkBytes);
  EXPECT_DOUBLE_EQ(small.summary.page_cache.capacity_bytes, 2.0 * kChunkBytes);
}

// LMCache's disk eviction deletes the file, and the page cache lets its pages go. With a 4-chunk
// disk, each of B's writes first evicts one of A's chunks, so the 1-GiB page cache never holds
// more than 4 chunks; C then finds nothing of A's prompt on disk.
TEST(LmcachePageCache, FilesLMCacheDeletesLeaveThePageCache) {
  Result r =
      run(scenario_with({"links.page_cache_gb=1", "lmcache.max_local_disk_size_gb=0.125"}), kTrace);
  EXPECT_EQ(r.records.at(2).loaded_tokens[report::kTierDisk], 0);
  EXPECT_DOUBLE_EQ(r.summary.page_cache.peak_bytes, 4.0 * kChunkBytes);
}

// Async loading's prefetch reads A's 4 chunks from the page cache too: 128 MiB at 10 GB/s
// (13.4 ms), done before the scheduler's second poll at 11 ms + 11 ms, which admits C.
TEST(LmcachePageCache, APrefetchReadsFromThePageCache) {
  Result r = run(scenario_with({"lmcache.enable_async_loading=true", "links.page_cache_gb=1",
                                "links.page_cache_gbps=10"}),
                 kTrace);
  const auto& c = r.records.at(2);
  EXPECT_EQ(c.loaded_tokens[report::kTierDisk], 512);
  EXPECT_EQ(r.summary.page_cache.hit_bytes, 4u * kChunkBytes);
  EXPECT_DOUBLE_EQ(r.summary.link_bytes.at("disk_read"), 0);
  EXPECT_EQ(c.first_scheduled - c.arrival, 22'000'000);
}

// The same queue as ThePrefetchWaitsForADiskWorkerAndGoesBeforeQueuedWrites (1-GB/s disk
// writes), with a 1-GiB page cache whose dirty budget (half of it) takes B's 256 MiB of writes:
// each returns once copied into memory (4 at a time: 13.4 ms), so C's prefetch finds a worker
// within milliseconds instead of after the 134-ms device writes, and reads A's chunks from
// memory; C is admitted within three polls (22 ms here; 132 ms with the dirty budget at 0,
// when the writes wait for the device). Every byte still reaches the device.
TEST(LmcachePageCache, BufferedWritesFreeTheDiskWorkersForAPrefetch) {
  std::vector<std::string> sets = {"lmcache.enable_async_loading=true",
                                   "vllm.num_gpu_blocks=150",
                                   "lmcache.max_local_cpu_size_gb=0.375",
                                   "links.disk_write_gbps=1",
                                   "links.page_cache_gb=1",
                                   "links.page_cache_gbps=10",
                                   "links.page_cache_write_gbps=10"};
  sets.push_back("links.page_cache_dirty_ratio=0");
  Result through = run(scenario_with(sets), kWorkerQueueTrace);
  sets.back() = "links.page_cache_dirty_ratio=0.5";
  Result buffered = run(scenario_with(sets), kWorkerQueueTrace);
  auto wait = [](const Result& r) {
    return r.records.at(3).first_scheduled - r.records.at(3).arrival;
  };
  EXPECT_GT(wait(through), 11 * 11'000'000);
  EXPECT_LE(wait(buffered), 3 * 11'000'000);
  EXPECT_EQ(buffered.records.at(3).loaded_tokens[report::kTierDisk], 1024);
  EXPECT_EQ(buffered.summary.page_cache.buffered_write_bytes, 16u * kChunkBytes);  // A, D, B
  EXPECT_EQ(through.summary.page_cache.buffered_write_bytes, 0u);
  EXPECT_DOUBLE_EQ(buffered.summary.link_bytes.at("disk_write"),
                   through.summary.link_bytes.at("disk_write"));
}

// Layerwise mode writes one file per layer of a chunk (32 layers of 1 MiB here) and reads C's
// chunks 2-3 layer by layer: with the page cache every one of those 64 files is still in memory.
TEST(LmcachePageCache, LayerwiseReadsFindEachLayersFile) {
  Result off = run(scenario_with({"lmcache.use_layerwise=true"}), kTrace);
  Result on = run(scenario_with({"lmcache.use_layerwise=true", "links.page_cache_gb=1",
                                 "links.page_cache_gbps=10"}),
                  kTrace);
  EXPECT_EQ(off.records.at(2).loaded_tokens[report::kTierDisk], 512);
  EXPECT_EQ(on.records.at(2).loaded_tokens[report::kTierDisk], 512);
  EXPECT_DOUBLE_EQ(off.summary.link_bytes.at("disk_read"), 2.0 * kChunkBytes);
  EXPECT_DOUBLE_EQ(on.summary.link_bytes.at("disk_read"), 0);
  EXPECT_EQ(on.summary.page_cache.hit_bytes, 2u * kChunkBytes);
  EXPECT_DOUBLE_EQ(on.summary.page_cache.peak_bytes, 8.0 * kChunkBytes);
  EXPECT_LT(on.records.at(2).first_token, off.records.at(2).first_token);
}

// A Redis prefetch is one job at PREFETCH priority on the connector's workers; its GETs ask for
// each chunk's metadata first (concurrently: one round trip), then move the bytes (a transfer
// with its own round trip). A stores its prompt on instance 0; C, routed to instance 1, finds it
// in Redis only. Raising links.network_latency_us from 0 to 20 ms delays C's prefetch by 40 ms;
// the scheduler notices at its next 11-ms poll, so C is admitted 33 or 44 ms later.
TEST(LmcacheAsyncLoading, ARedisPrefetchAsksForTheMetadataBeforeTheBytes) {
  const char* trace =
      "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n"
      "0,1024,1,512,1 2\n"
      "10,1024,1,512,1 2\n";
  auto wait_of_c = [&](const char* latency_us) {
    Result r = run(scenario_with({"lmcache.enable_async_loading=true", "lmcache.remote=true",
                                  "cluster.instances=2", "cluster.router=round_robin",
                                  std::string("links.network_latency_us=") + latency_us}),
                   trace);
    const auto& c = r.records.at(1);
    EXPECT_EQ(c.instance, 1);
    EXPECT_EQ(c.loaded_tokens[report::kTierRemote], 1024) << latency_us;
    return c.first_scheduled - c.arrival;
  };
  const SimDuration shift = wait_of_c("20000") - wait_of_c("0");
  EXPECT_GE(shift, 33'000'000);
  EXPECT_LE(shift, 44'000'000);
}

TEST(LmcacheAsyncLoading, RunsAreDeterministic) {
  scenario::Scenario s =
      scenario_with({"lmcache.enable_async_loading=true", "cluster.instances=2",
                     "lmcache.remote=true", "links.remote_get_failure_rate=0.3"});
  std::string trace = "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n";
  for (int i = 0; i < 24; ++i)
    trace += std::to_string(i) + ".5,1024,3,512," + std::to_string(1 + i % 3) + " " +
             std::to_string(10 + i % 5) + "\n";
  Result a = run(s, trace);
  Result b = run(s, trace);
  ASSERT_EQ(a.records.size(), 24u);
  for (const auto& [i, x] : a.records) {
    const auto& y = b.records.at(i);
    EXPECT_EQ(x.first_token, y.first_token) << i;
    EXPECT_EQ(x.finish, y.finish) << i;
    EXPECT_EQ(x.lmcache_hit_tokens, y.lmcache_hit_tokens) << i;
    EXPECT_EQ(x.loaded_tokens, y.loaded_tokens) << i;
  }
  EXPECT_EQ(a.summary.link_bytes, b.summary.link_bytes);
}

}  // namespace
}  // namespace kvtwin::sim::engine
