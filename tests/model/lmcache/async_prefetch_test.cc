// Async lookup-and-prefetch (enable_async_loading): the tier prefix rule, the serializer, the
// events retrieve consumes, the cleanup paths, memory pressure, and each async quirk with its fix.
#include "model/lmcache/async_prefetch.h"

#include <gtest/gtest.h>

#include "model/lmcache/lookup_client.h"
#include "model/lmcache/vllm_scheduler_adapter.h"
#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using namespace testing;
using State = AsyncPrefetcher::State;

LMCacheEngineConfig async_config(uint64_t cpu, uint64_t disk, bool remote, bool quirks) {
  LMCacheEngineConfig c = toy_config(cpu, disk, remote);
  c.enable_async_loading = true;
  c.quirks = quirks ? Quirks::upstream() : Quirks::all_fixed();
  return c;
}

AsyncPrefetcher& pf(LMCacheEngine& e) {
  return *e.storage_manager().async_prefetcher();
}

void submit(LMCacheEngine& e, const std::vector<TokenId>& t, const std::string& id) {
  LookupRequest req;
  req.input = TokenInput::of_tokens(t);
  req.lookup_id = id;
  req.pin = true;
  e.async_lookup_and_prefetch(req);
  e.end_of_operation();
}

// Runs the serializer to the end, completing every timed job at once.
void run_all(LMCacheEngine& e) {
  for (;;) {
    State s = pf(e).advance();
    if (s != State::kRunning) {
      ASSERT_EQ(s, State::kIdle);
      return;
    }
    pf(e).complete(pf(e).in_flight()->job_id);
    e.end_of_operation();
  }
}

int64_t response_of(LMCacheEngine& e, const std::string& id) {
  int64_t hit = -1;
  for (const LookupResponse& r : pf(e).take_responses())
    if (r.lookup_id == id) hit = r.hit_tokens;
  return hit;
}

// Stores `t` in every tier, then removes chunks [from, n) from the CPU tier.
void store_on_disk_from(LMCacheEngine& e, const std::vector<TokenId>& t, size_t from) {
  store(e, t);
  e.storage_manager().complete_all_writes();
  std::vector<std::string> cpu_only{"LocalCPUBackend"};
  auto infos = e.chunk_infos(t, nullptr);
  for (size_t i = from; i < infos.size(); ++i) e.storage_manager().remove(infos[i].key, &cpu_only);
}

// After everything is consumed: hot objects hold only their own reference, nothing is pinned,
// and no block outside the hot cache is allocated.
void expect_no_leaks(LMCacheEngine& e) {
  StorageManager& sm = e.storage_manager();
  uint64_t hot_bytes = 0;
  for (const auto& [k, id] : sm.local_cpu().entries()) {
    const MemoryObj& o = sm.allocator().obj(id);
    EXPECT_EQ(o.ref_count, 1) << k.kid();
    EXPECT_EQ(o.pin_count, 0) << k.kid();
    hot_bytes += o.phy_size;
  }
  EXPECT_EQ(sm.allocator().total_allocated_size(), hot_bytes);
  if (sm.local_disk() != nullptr) {
    for (const auto& [k, m] : sm.local_disk()->entries()) EXPECT_EQ(m.pin_count, 0) << k.kid();
  }
  EXPECT_EQ(pf(e).num_events(), 0u);
}

// A vLLM request with prompt `tokens` and nothing computed.
VllmRequest vllm_request(std::string id, std::vector<TokenId> tokens) {
  VllmRequest r;
  r.request_id = std::move(id);
  r.own_tokens(std::move(tokens));
  return r;
}

TEST(AsyncPrefetch, APrefixSplitAcrossCpuAndDiskIsPrefetchedThenRetrievedFromTheEvent) {
  LMCacheEngine e(async_config(8, 8, false, false), toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store_on_disk_from(e, a, 2);
  submit(e, a, "a");
  EXPECT_EQ(pf(e).event_status("a"), EventStatus::kOngoing);
  ASSERT_EQ(pf(e).advance(), State::kRunning);  // the CPU job finished at once
  std::optional<PrefetchTransfer> t = pf(e).in_flight();
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->tier, Tier::kDisk);
  EXPECT_EQ(t->num_chunks, 2);
  EXPECT_EQ(t->bytes, 2 * kChunkBytes);
  EXPECT_EQ(response_of(e, "a"), -1);  // no answer before the read
  pf(e).complete(t->job_id);
  EXPECT_EQ(pf(e).advance(), State::kIdle);
  EXPECT_EQ(response_of(e, "a"), 64);
  EXPECT_EQ(pf(e).event_status("a"), EventStatus::kDone);
  RetrieveResult r = retrieve(e, a, "a");
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.ret_tokens, 64);
  ASSERT_EQ(r.loaded.size(), 4u);
  EXPECT_EQ(r.loaded[1].location, "LocalCPUBackend");
  EXPECT_EQ(r.loaded[2].location, "LocalDiskBackend");
  for (const LoadedChunk& c : r.loaded) {
    EXPECT_TRUE(c.prefetched);
    EXPECT_FALSE(c.bad);
  }
  EXPECT_TRUE(r.gets.empty());  // nothing read from the tiers at retrieve time
  e.lookup_unpin("a");
  expect_no_leaks(e);
}

TEST(AsyncPrefetch, ZeroHitsAnswerAtOnceWithoutAnEvent) {
  LMCacheEngine e(async_config(8, 8, true, false), toy_metadata());
  submit(e, seq(48, 7), "x");
  EXPECT_EQ(response_of(e, "x"), 0);
  EXPECT_EQ(pf(e).event_status("x"), EventStatus::kNotFound);
  EXPECT_EQ(pf(e).advance(), State::kIdle);
}

TEST(AsyncPrefetch, ATierWithoutTheNextChunkIsSkippedAsInBatchedContains) {
  // Chunk 0 only on disk (removed from CPU), chunks 1.. on CPU: the CPU tier counts 0 leading
  // hits for chunk 0 and is skipped; the disk holds the whole prefix.
  LMCacheEngine e(async_config(8, 8, false, false), toy_metadata());
  std::vector<TokenId> a = seq(48, 1);
  store(e, a);
  e.storage_manager().complete_all_writes();
  std::vector<std::string> cpu_only{"LocalCPUBackend"};
  e.storage_manager().remove(e.chunk_infos(a, nullptr)[0].key, &cpu_only);
  submit(e, a, "a");
  ASSERT_EQ(pf(e).advance(), State::kRunning);
  EXPECT_EQ(pf(e).in_flight()->tier, Tier::kDisk);
  EXPECT_EQ(pf(e).in_flight()->num_chunks, 3);
}

TEST(AsyncPrefetch, TheSerializerRunsOneRequestsPrefetchAtATimeInArrivalOrder) {
  LMCacheEngine e(async_config(16, 16, false, false), toy_metadata());
  std::vector<TokenId> a = seq(32, 1), b = seq(32, 5000);
  store_on_disk_from(e, a, 0);
  store_on_disk_from(e, b, 0);
  submit(e, a, "a");
  submit(e, b, "b");
  ASSERT_EQ(pf(e).advance(), State::kRunning);
  EXPECT_EQ(pf(e).in_flight()->lookup_id, "a");
  EXPECT_EQ(pf(e).advance(), State::kRunning);  // still a's job: b waits for the lock
  EXPECT_EQ(pf(e).in_flight()->lookup_id, "a");
  pf(e).complete(pf(e).in_flight()->job_id);
  ASSERT_EQ(pf(e).advance(), State::kRunning);
  EXPECT_EQ(pf(e).in_flight()->lookup_id, "b");
  EXPECT_EQ(response_of(e, "a"), 32);
}

TEST(AsyncPrefetch, RetrieveSkipsMaskedChunksAndReleasesTheirObjects) {
  for (bool quirks : {true, false}) {
    LMCacheEngine e(async_config(8, 8, false, quirks), toy_metadata());
    std::vector<TokenId> a = seq(48, 1);
    store_on_disk_from(e, a, 0);
    submit(e, a, "a");
    run_all(e);
    ASSERT_EQ(response_of(e, "a"), 48);
    // vLLM already holds the first chunk: the prefetched copy of it is released unused (#3490).
    RetrieveResult r = retrieve(e, a, "a", kChunk);
    EXPECT_EQ(r.ret_tokens, 32);
    EXPECT_EQ(r.loaded.size(), 2u);
    EXPECT_EQ(e.storage_manager().allocator().num_active_allocations(),
              e.storage_manager().local_cpu().size());
  }
}

TEST(AsyncPrefetch, PinsAndReferencesAreBalancedAfterRetrieveOnlyWithTheFix) {
  for (bool quirks : {true, false}) {
    LMCacheEngine e(async_config(8, 8, false, quirks), toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store_on_disk_from(e, a, 2);
    submit(e, a, "a");
    run_all(e);
    retrieve(e, a, "a");
    e.lookup_unpin("a");
    if (!quirks) {
      expect_no_leaks(e);
      continue;
    }
    // f4261ef6: the CPU chunks keep the lookup's pin, the disk chunks the contains-check's pin.
    StorageManager& sm = e.storage_manager();
    auto infos = e.chunk_infos(a, nullptr);
    EXPECT_EQ(sm.local_cpu().peek(infos[0].key)->pin_count, 1);
    EXPECT_EQ(sm.local_cpu().peek(infos[0].key)->ref_count, 1);
    for (const auto& [k, m] : sm.local_disk()->entries()) {
      bool prefetched = k == infos[2].key || k == infos[3].key;
      EXPECT_EQ(m.pin_count, prefetched ? 1 : 0) << k.kid();
    }
  }
}

TEST(AsyncPrefetch, APrefetchNobodyRetrievesLeaksUntilTheFixReleasesItOnUnpin) {
  for (bool quirks : {true, false}) {
    LMCacheEngine e(async_config(8, 8, false, quirks), toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store_on_disk_from(e, a, 2);
    submit(e, a, "a");
    run_all(e);
    // vLLM's own prefix cache covered the hit: no LoadSpec, no retrieve; wait_for_save unpins.
    e.lookup_unpin("a");
    StorageManager& sm = e.storage_manager();
    if (!quirks) {
      expect_no_leaks(e);
      continue;
    }
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kDone);
    EXPECT_EQ(sm.allocator().num_active_allocations(), sm.local_cpu().size() + 2);
    auto infos = e.chunk_infos(a, nullptr);
    EXPECT_EQ(sm.local_cpu().peek(infos[0].key)->ref_count, 2);
  }
}

TEST(AsyncPrefetch, CleanupOfAnAbortedLookupReleasesOnlyWithTheFix) {
  for (bool quirks : {true, false}) {
    LMCacheEngine e(async_config(8, 8, false, quirks), toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store_on_disk_from(e, a, 2);
    submit(e, a, "a");
    e.cleanup_memory_objs("a");  // not finished: nothing to do yet
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kOngoing);
    run_all(e);
    e.cleanup_memory_objs("a");
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kNotFound);
    StorageManager& sm = e.storage_manager();
    if (!quirks) {
      expect_no_leaks(e);
      continue;
    }
    // The (key, obj) tuples defeat ref_count_down: the disk buffers go with their last Python
    // reference, the CPU objects keep the prefetch's reference and the lookup's pin.
    EXPECT_EQ(sm.allocator().num_active_allocations(), sm.local_cpu().size());
    auto infos = e.chunk_infos(a, nullptr);
    EXPECT_EQ(sm.local_cpu().peek(infos[0].key)->ref_count, 2);
    EXPECT_EQ(sm.local_cpu().peek(infos[0].key)->pin_count, 1);
  }
}

// The shrunk counterexample of
// LMCacheProperties.AsyncLoadingLeavesNothingPinnedWithEveryQuirkFixed: one serializer step first
// finishes two CPU jobs whose prefix broke (their first key was removed) and which release their
// pins, then a disk job evicts the object they had pinned. The eviction is legal: when it happens
// nothing pins or references the object any more.
TEST(AsyncPrefetch, AJobWhosePrefixBrokeReleasesItsPinsSoALaterJobMayEvictTheObject) {
  LMCacheEngine e(async_config(3, 3, false, false), toy_metadata());
  std::vector<TokenId> a = seq(32, 100000), b = a, tail_a = seq(16, 1000), tail_b = seq(8, 2000);
  a.insert(a.end(), tail_a.begin(), tail_a.end());  // 3 chunks: the CPU pool's size
  b.insert(b.end(), tail_b.begin(), tail_b.end());  // shares a's first 2 chunks
  std::vector<ChunkInfo> chunks = e.chunk_infos(a, nullptr);
  ASSERT_EQ(chunks.size(), 3u);
  StorageManager& sm = e.storage_manager();
  store(e, a);
  submit(e, a, "a");
  submit(e, a, "a");  // replaces the first lookup's event; both CPU jobs stay queued
  std::vector<std::string> cpu_only{"LocalCPUBackend"};
  e.clear(std::span<const TokenId>(b), &cpu_only, nullptr);  // a's first 2 chunks leave the CPU
  e.end_of_operation();
  sm.complete_all_writes();
  e.end_of_operation();
  ASSERT_EQ(sm.local_cpu().size(), 1u);
  ASSERT_EQ(sm.local_cpu().peek(chunks[2].key)->pin_count, 2);
  submit(e, a, "a");  // chunk 0 is only on disk now: one disk job for all 3 chunks

  ASSERT_EQ(pf(e).advance_one(), std::nullopt);  // first CPU job: returns nothing, unpins
  EXPECT_EQ(sm.local_cpu().peek(chunks[2].key)->pin_count, 1);
  ASSERT_EQ(pf(e).advance_one(), std::nullopt);  // second CPU job: the same
  const MemoryObj* last = sm.local_cpu().peek(chunks[2].key);
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->pin_count, 0);
  EXPECT_EQ(last->ref_count, 1);  // only the hot cache's reference: evictable
  EXPECT_EQ(sm.allocator().num_active_allocations(), 1u);  // the removed objects are freed now

  ASSERT_EQ(pf(e).advance_one(), State::kRunning);  // the disk job's buffers evict chunk 2
  EXPECT_EQ(sm.local_cpu().size(), 0u);
  EXPECT_EQ(pf(e).in_flight()->num_chunks, 3);
  pf(e).complete(pf(e).in_flight()->job_id);
  EXPECT_EQ(pf(e).advance(), State::kIdle);
  EXPECT_EQ(response_of(e, "a"), 48);
  RetrieveResult r = retrieve(e, a, "a");
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.ret_tokens, 48);
  e.lookup_unpin("a");
  expect_no_leaks(e);
}

TEST(AsyncPrefetch, RetrievingAFailedPrefetchReleasesTheTiersThatFinishedOnlyWithTheFix) {
  for (bool quirks : {true, false}) {
    LMCacheEngine e(async_config(8, 8, false, quirks), toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store_on_disk_from(e, a, 2);  // chunks 0-1 on CPU, 2-3 only on disk
    submit(e, a, "a");            // a CPU job and a disk job
    std::vector<std::string> disk_only{"LocalDiskBackend"};
    auto infos = e.chunk_infos(a, nullptr);
    for (size_t i = 2; i < 4; ++i) e.storage_manager().remove(infos[i].key, &disk_only);
    e.end_of_operation();
    run_all(e);  // the disk job raises: the event is DONE and failed, no answer is sent
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kDone);
    EXPECT_EQ(response_of(e, "a"), -1);
    RetrieveResult r = retrieve(e, a, "a");
    ASSERT_FALSE(r.error);
    EXPECT_EQ(r.ret_tokens, 0);
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kNotFound);
    e.lookup_unpin("a");
    if (!quirks) {
      expect_no_leaks(e);
      continue;
    }
    // f4261ef6: future.result() raises, the event goes with the CPU tier's reference and pin.
    const MemoryObj* first = e.storage_manager().local_cpu().peek(infos[0].key);
    EXPECT_EQ(first->ref_count, 2);
    EXPECT_EQ(first->pin_count, 1);
  }
}

// LMCache's EventManager keeps one dict per status. A second lookup of an id whose DONE event no
// retrieve took goes to ONGOING beside it: the first event and its objects stay until the second
// one's callback moves it to DONE in their place.
TEST(AsyncPrefetch, ALaterLookupOfAnIdLeavesItsDoneEventUntilTheLaterOneIsDone) {
  for (bool quirks : {true, false}) {
    SCOPED_TRACE(quirks ? "upstream" : "fixed");
    LMCacheEngine e(async_config(8, 8, false, quirks), toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store_on_disk_from(e, a, 2);  // chunks 0-1 on CPU, 2-3 only on disk
    StorageManager& sm = e.storage_manager();
    const size_t hot = sm.local_cpu().size();
    submit(e, a, "a");
    run_all(e);
    EXPECT_EQ(response_of(e, "a"), 64);
    EXPECT_EQ(sm.allocator().num_active_allocations(), hot + 2);  // the event's disk buffers
    submit(e, a, "a");
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kOngoing);
    EXPECT_EQ(pf(e).num_events(), 2u);
    e.cleanup_memory_objs("a");  // the status is ONGOING: nothing to clean up
    EXPECT_NE(pf(e).done_generation("a"), 0u);
    EXPECT_EQ(pf(e).num_events(), 2u);
    ASSERT_EQ(pf(e).advance(), State::kRunning);  // the second read: both events' buffers held
    EXPECT_EQ(sm.allocator().num_active_allocations(), hot + 4);
    pf(e).complete(pf(e).in_flight()->job_id);
    e.end_of_operation();
    EXPECT_EQ(pf(e).advance(), State::kIdle);
    EXPECT_EQ(response_of(e, "a"), 64);
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kDone);
    EXPECT_EQ(pf(e).num_events(), 1u);  // the first event is gone with its buffers
    EXPECT_EQ(sm.allocator().num_active_allocations(), hot + 2);
    RetrieveResult r = retrieve(e, a, "a");
    ASSERT_FALSE(r.error);
    EXPECT_EQ(r.ret_tokens, 64);
    e.lookup_unpin("a");
    if (!quirks) expect_no_leaks(e);
  }
}

// A lookup of an id sent again while its first prefetch still runs: the first future's callback
// moves whatever ONGOING holds for the id (the second, unfinished future) to DONE and answers
// with its own result. A retrieve then pops the unfinished future, whose result() raises: nothing
// is loaded. The second future's callback finds the id in neither dict and raises KeyError
// before it answers.
TEST(AsyncPrefetch, AnEarlierFuturesCallbackMovesALaterOneToDoneAndAnswersForIt) {
  for (bool quirks : {true, false}) {
    SCOPED_TRACE(quirks ? "upstream" : "fixed");
    LMCacheEngine e(async_config(8, 8, false, quirks), toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store_on_disk_from(e, a, 2);
    submit(e, a, "a");
    submit(e, a, "a");
    EXPECT_EQ(pf(e).num_events(), 2u);
    ASSERT_EQ(pf(e).advance(), State::kRunning);  // the first future's disk read
    pf(e).complete(pf(e).in_flight()->job_id);
    e.end_of_operation();
    EXPECT_EQ(response_of(e, "a"), 64);  // the first future's answer
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kDone);
    EXPECT_EQ(pf(e).num_queued_jobs(), 2u);  // the second future's jobs have not run
    EXPECT_EQ(pf(e).num_events(), 1u);
    RetrieveResult r = retrieve(e, a, "a");
    ASSERT_FALSE(r.error);
    EXPECT_EQ(r.ret_tokens, 0);
    EXPECT_TRUE(r.loaded.empty());
    EXPECT_EQ(pf(e).event_status("a"), EventStatus::kNotFound);
    const uint64_t lost = pf(e).stats().lost_responses;
    run_all(e);
    EXPECT_EQ(response_of(e, "a"), -1);
    EXPECT_EQ(pf(e).stats().lost_responses, lost + 1);
    EXPECT_EQ(pf(e).num_events(), 0u);
    e.lookup_unpin("a");
    if (!quirks) expect_no_leaks(e);
  }
}

// asyncio.gather fails at a job's exception: the future's callback runs then (DONE, no answer)
// while the later tiers' jobs are still queued; they run on, and their objects stay with the
// future (its exception's traceback reaches them) until it goes. Chunks 0-1 are on CPU, 2 on
// disk, 3 in Redis; chunk 2 leaves the disk after the lookup, so the disk job raises. A retrieve
// before the Redis job ends pops the future, whose result() raises; one after it, the same with
// the CPU and Redis objects held until then.
TEST(AsyncPrefetch, AJobThatRaisesEndsItsFutureBeforeTheLaterJobsRun) {
  for (bool quirks : {true, false}) {
    for (bool retrieve_early : {true, false}) {
      SCOPED_TRACE(std::string(quirks ? "upstream" : "fixed") + (retrieve_early ? " early" : ""));
      LMCacheEngine e(async_config(8, 8, true, quirks), toy_metadata());
      std::vector<TokenId> a = seq(64, 1);
      store(e, a);
      StorageManager& sm = e.storage_manager();
      sm.complete_all_writes();
      auto infos = e.chunk_infos(a, nullptr);
      std::vector<std::string> cpu_only{"LocalCPUBackend"}, disk_only{"LocalDiskBackend"};
      for (size_t i = 2; i < 4; ++i) sm.remove(infos[i].key, &cpu_only);
      sm.remove(infos[3].key, &disk_only);
      e.end_of_operation();
      submit(e, a, "a");  // CPU job (0-1), disk job (2), Redis job (3)
      EXPECT_EQ(pf(e).num_queued_jobs(), 3u);
      sm.remove(infos[2].key, &disk_only);
      e.end_of_operation();
      ASSERT_EQ(pf(e).advance_one(), std::nullopt);  // the CPU job
      ASSERT_EQ(pf(e).advance_one(), std::nullopt);  // the disk job raises
      EXPECT_EQ(pf(e).event_status("a"), EventStatus::kDone);
      EXPECT_EQ(pf(e).num_queued_jobs(), 1u);
      EXPECT_EQ(response_of(e, "a"), -1);
      if (retrieve_early) {
        RetrieveResult r = retrieve(e, a, "a");
        ASSERT_FALSE(r.error);
        EXPECT_EQ(r.ret_tokens, 0);
        EXPECT_EQ(pf(e).num_events(), 1u);  // popped, but its Redis job still runs
        run_all(e);
      } else {
        run_all(e);
        std::vector<MemObjId> held;
        pf(e).append_held_objects(&held);
        EXPECT_EQ(held.size(), 3u);  // chunks 0-1 (CPU) and 3 (Redis)
        RetrieveResult r = retrieve(e, a, "a");
        ASSERT_FALSE(r.error);
        EXPECT_EQ(r.ret_tokens, 0);
      }
      EXPECT_EQ(response_of(e, "a"), -1);
      EXPECT_EQ(pf(e).num_events(), 0u);
      e.lookup_unpin("a");
      if (!quirks) expect_no_leaks(e);
    }
  }
}

TEST(AsyncPrefetch, WithoutEvictableMemoryTheDiskPrefetchWaitsOrReturnsAShorterPrefix) {
  for (bool quirks : {true, false}) {
    // 3 CPU chunks: b's two chunks are pinned by a sync lookup, one slot stays free.
    LMCacheEngineConfig cfg = async_config(3, 8, false, quirks);
    LMCacheEngine e(cfg, toy_metadata());
    std::vector<TokenId> a = seq(48, 1), b = seq(32, 9000);
    store_on_disk_from(e, a, 0);
    store(e, b);
    e.storage_manager().complete_all_writes();
    lookup(e, b, "b", true);  // pins b's CPU chunks
    submit(e, a, "a");
    if (quirks) {
      EXPECT_EQ(pf(e).advance(), State::kBlocked);  // one buffer allocated, then nothing to evict
      EXPECT_EQ(pf(e).advance(), State::kBlocked);
      EXPECT_EQ(pf(e).stats().blocked, 2u);
      e.lookup_unpin("b");  // memory becomes evictable: the prefetch goes on
      ASSERT_EQ(pf(e).advance(), State::kRunning);
      EXPECT_EQ(pf(e).in_flight()->num_chunks, 3);
      run_all(e);
      EXPECT_EQ(response_of(e, "a"), 48);
    } else {
      ASSERT_EQ(pf(e).advance(), State::kRunning);
      EXPECT_EQ(pf(e).in_flight()->num_chunks, 1);
      run_all(e);
      EXPECT_EQ(response_of(e, "a"), 16);
      RetrieveResult r = retrieve(e, a, "a");
      EXPECT_EQ(r.ret_tokens, 16);
      e.lookup_unpin("b");
      expect_no_leaks(e);
    }
  }
}

TEST(AsyncPrefetch, RedisDropsAMissingChunkAndShiftsTheNextOneIntoItsPlaceUnlessFixed) {
  for (bool quirks : {true, false}) {
    LMCacheEngine e(async_config(8, 0, true, quirks), toy_metadata());
    std::vector<TokenId> a = seq(48, 1);
    store(e, a);
    e.storage_manager().complete_all_writes();
    e.clear(std::nullopt, nullptr, nullptr);
    auto infos = e.chunk_infos(a, nullptr);
    e.storage_manager().shared().remote->delete_kv_bytes(infos[1].key.to_string());
    submit(e, a, "a");
    run_all(e);
    RetrieveResult r = retrieve(e, a, "a");
    if (quirks) {
      // Chunks 0 and 2 came back and were zipped with keys 0 and 1.
      ASSERT_EQ(r.loaded.size(), 2u);
      EXPECT_FALSE(r.loaded[0].bad);
      EXPECT_TRUE(r.loaded[1].bad);
      EXPECT_EQ(r.ret_tokens, 32);
    } else {
      ASSERT_EQ(r.loaded.size(), 1u);
      EXPECT_EQ(r.ret_tokens, 16);
      expect_no_leaks(e);
    }
  }
}

TEST(AsyncPrefetch, AShortTierBeforeAnotherLosesTheAnswerUnlessFixed) {
  for (bool tuple_quirk : {true, false}) {
    // Chunks 0-1 on disk only, 2-3 on Redis only; chunk 1's file is gone.
    LMCacheEngineConfig cfg = async_config(8, 8, true, false);
    cfg.quirks.async_done_callback_tuple_error = tuple_quirk;
    LMCacheEngine e(cfg, toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store(e, a);
    e.storage_manager().complete_all_writes();
    e.clear(std::nullopt, nullptr, nullptr);
    auto infos = e.chunk_infos(a, nullptr);
    std::vector<std::string> disk_only{"LocalDiskBackend"};
    e.storage_manager().remove(infos[2].key, &disk_only);
    e.storage_manager().remove(infos[3].key, &disk_only);
    for (int i = 0; i < 2; ++i)
      e.storage_manager().shared().remote->delete_metadata(infos[i].key.to_string());
    e.storage_manager().shared().disk->remove(infos[1].key.disk_file_name());
    submit(e, a, "a");
    run_all(e);
    if (tuple_quirk) {
      EXPECT_EQ(response_of(e, "a"), -1);
      EXPECT_EQ(pf(e).stats().lost_responses, 1u);
    } else {
      EXPECT_EQ(response_of(e, "a"), 16);
      RetrieveResult r = retrieve(e, a, "a");
      EXPECT_EQ(r.ret_tokens, 16);
      expect_no_leaks(e);
    }
  }
}

TEST(AsyncLookupClient, AnswersPendingUntilTheRankAnswersThenTheHit) {
  LMCacheEngineConfig cfg = async_config(8, 8, false, false);
  LMCacheEngine e(cfg, toy_metadata());
  std::vector<TokenId> a = seq(64, 1);
  store_on_disk_from(e, a, 2);
  LMCacheLookupClient client(cfg, toy_metadata(), {&e});
  LMCacheSchedulerAdapter adapter(cfg, AdapterConfig{}, &client);
  VllmRequest req = vllm_request("r", a);
  auto m = adapter.get_num_new_matched_tokens(req, 0, 0);
  EXPECT_FALSE(m.ret.has_value());  // the lookup was just sent
  EXPECT_TRUE(client.is_pending("r"));
  m = adapter.get_num_new_matched_tokens(req, 0, 1'000'000);
  EXPECT_FALSE(m.ret.has_value());
  run_all(e);
  client.process_responses();
  m = adapter.get_num_new_matched_tokens(req, 0, 2'000'000);
  ASSERT_TRUE(m.ret.has_value());
  EXPECT_EQ(*m.ret, 63);  // the whole prompt hit: vLLM recomputes the last token
  EXPECT_EQ(client.take_backoff_sleeps(), 2);  // after sending, and on the pending check
}

TEST(AsyncLookupClient, APendingLookupAnswersZeroAfterTheTimeout) {
  for (bool quirks : {true, false}) {
    LMCacheEngineConfig cfg = async_config(8, 8, false, quirks);
    LMCacheEngine e(cfg, toy_metadata());
    std::vector<TokenId> a = seq(64, 1);
    store_on_disk_from(e, a, 0);
    LMCacheLookupClient client(cfg, toy_metadata(), {&e});
    LMCacheSchedulerAdapter adapter(cfg, AdapterConfig{}, &client);
    VllmRequest req = vllm_request("r", a);
    adapter.get_num_new_matched_tokens(req, 0, 0);
    // The timeout (3 s) is checked after the pending check's backoff sleep (10 ms).
    EXPECT_FALSE(adapter.get_num_new_matched_tokens(req, 0, 2'990'000'000).ret.has_value());
    auto m = adapter.get_num_new_matched_tokens(req, 0, 2'990'000'001);
    ASSERT_TRUE(m.ret.has_value());
    EXPECT_EQ(*m.ret, 0);
    EXPECT_EQ(client.num_timeouts(), 1u);
    // The prefetch finishes later. Fixed: the timeout cancelled it, so the next check cleans up.
    run_all(e);
    client.process_responses();
    VllmRequest other = vllm_request("o", seq(8, 1));
    adapter.get_num_new_matched_tokens(other, 0, 4'000'000'000);
    EXPECT_EQ(pf(e).event_status("r"), quirks ? EventStatus::kDone : EventStatus::kNotFound);
  }
}

}  // namespace
}  // namespace kvtwin::model::lmcache
