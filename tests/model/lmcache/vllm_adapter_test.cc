// The vLLM adapter's decisions: LoadSpec (full-prompt hit, min_retrieve_tokens), save rules at
// chunk boundaries and in decode, slot mappings, and a worker step end to end.
#include <gtest/gtest.h>

#include "model/lmcache/request_tracker.h"
#include "model/lmcache/vllm_scheduler_adapter.h"
#include "model/lmcache/vllm_worker_adapter.h"
#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using namespace testing;

struct Fixture {
  LMCacheEngineConfig cfg;
  AdapterConfig adapter;
  std::unique_ptr<LMCacheEngine> engine;
  std::unique_ptr<LMCacheLookupClient> client;
  std::unique_ptr<LMCacheSchedulerAdapter> sched;
  std::unique_ptr<LMCacheWorkerAdapter> worker;

  explicit Fixture(int min_retrieve = 0, Quirks quirks = Quirks::upstream()) : cfg(toy_config(16)) {
    cfg.min_retrieve_tokens = min_retrieve;
    cfg.quirks = quirks;
    engine = std::make_unique<LMCacheEngine>(cfg, toy_metadata());
    client = std::make_unique<LMCacheLookupClient>(cfg, toy_metadata(),
                                                   std::vector<LMCacheEngine*>{engine.get()});
    sched = std::make_unique<LMCacheSchedulerAdapter>(cfg, adapter, client.get());
    worker = std::make_unique<LMCacheWorkerAdapter>(engine.get(), adapter);
  }
  // Quirks::upstream() with one switch set to `upstream` (false: fixed).
  static Quirks upstream_but(bool Quirks::*quirk, bool upstream) {
    Quirks q = Quirks::upstream();
    q.*quirk = upstream;
    return q;
  }
  // `r` has no usable LMCache hit and its first 32 tokens are scheduled in blocks 1-4.
  void schedule_first_chunk(VllmRequest& r) {
    EXPECT_EQ(*sched->get_num_new_matched_tokens(r, 0).ret, 0);
    schedule_new(r, 0, {1, 2, 3, 4}, 32);
  }
  VllmRequest request(const std::string& id, std::vector<TokenId> tokens) {
    VllmRequest r;
    r.request_id = id;
    r.own_tokens(std::move(tokens));
    return r;
  }
  // The scheduler's side of one step that schedules `r` for the first time: allocation after its
  // `computed` matched tokens, then `scheduled` new tokens in `blocks`.
  ConnectorMetadata schedule_new(VllmRequest& r, int64_t computed, std::vector<int64_t> blocks,
                                 int64_t scheduled) {
    sched->update_state_after_alloc(r, computed);
    SchedulerOutput out;
    out.scheduled_new_reqs.push_back({r.request_id, std::move(blocks), computed});
    out.num_scheduled_tokens[r.request_id] = scheduled;
    return sched->build_connector_meta(out, {{r.request_id, &r}});
  }
  // The same for a running request (no new block): `r` has `computed` tokens (a failed load may
  // have rolled them back), then `scheduled` new ones.
  ConnectorMetadata schedule_running(VllmRequest& r, int64_t computed, int64_t scheduled) {
    r.num_computed_tokens = computed;
    SchedulerOutput out;
    out.scheduled_cached_reqs.push_back(
        {r.request_id, std::vector<int64_t>{}, computed, false, scheduled});
    out.num_scheduled_tokens[r.request_id] = scheduled;
    return sched->build_connector_meta(out, {{r.request_id, &r}});
  }
};

TEST(VllmAdapter, AWholePromptHitLeavesTheLastTokenToRecompute) {
  Fixture f;
  std::vector<TokenId> a = seq(32, 1);
  store(*f.engine, a);
  VllmRequest r = f.request("r", a);
  auto m = f.sched->get_num_new_matched_tokens(r, 0);
  EXPECT_EQ(*m.ret, 31);
  ASSERT_EQ(m.rank_hits.size(), 1u);
  EXPECT_EQ(m.rank_hits[0].second, 32);
  // A second call reuses the cached lookup (no new pins).
  auto again = f.sched->get_num_new_matched_tokens(r, 16);
  EXPECT_EQ(*again.ret, 15);
  EXPECT_TRUE(again.rank_hits.empty());
  f.sched->update_state_after_alloc(r, 15);
  EXPECT_TRUE(f.sched->load_spec("r")->can_load);
  EXPECT_THROW(f.sched->update_state_after_alloc(r, 14), UpstreamError);
}

TEST(VllmAdapter, BelowMinRetrieveTokensLoadsNothingButRemembersTheHit) {
  Fixture f(/*min_retrieve=*/32);
  std::vector<TokenId> a = seq(64, 1);
  store(*f.engine, std::vector<TokenId>(a.begin(), a.begin() + 16));
  VllmRequest r = f.request("r", a);
  auto m = f.sched->get_num_new_matched_tokens(r, 0);
  EXPECT_EQ(*m.ret, 0);
  EXPECT_EQ(f.sched->load_spec("r")->lmcache_cached_tokens, 16);
}

// A request whose LMCache hit (16 tokens) is below min_retrieve_tokens (32) loads nothing; when it
// is preempted and resumed, vLLM computes it from 0 again. f4261ef6's build_connector_meta expects
// num_computed_tokens == max(lmcache_cached 16, vllm_cached 0) = 16 and raises AssertionError
// (which stops upstream's engine); the fix expects vLLM's own hit, 0, when nothing is loaded.
TEST(VllmAdapter, AResumedRequestWhoseHitWasBelowMinRetrieveFailsTheCheckUnlessFixed) {
  for (bool fixed : {false, true}) {
    Fixture f(/*min_retrieve=*/32,
              Fixture::upstream_but(&Quirks::resumed_request_check_ignores_skipped_loads, !fixed));
    std::vector<TokenId> a = seq(64, 1);
    store(*f.engine, std::vector<TokenId>(a.begin(), a.begin() + 16));
    VllmRequest r = f.request("r", a);
    f.schedule_first_chunk(r);
    // Preempted after its first chunk, then scheduled again from scratch.
    r.num_computed_tokens = 0;
    EXPECT_EQ(*f.sched->get_num_new_matched_tokens(r, 0).ret, 0);
    f.sched->update_state_after_alloc(r, 0);
    EXPECT_FALSE(f.sched->load_spec("r")->can_load);
    SchedulerOutput out;
    out.scheduled_cached_reqs.push_back({"r", std::vector<int64_t>{5, 6, 7, 8}, 0, true, 32});
    out.num_scheduled_tokens["r"] = 32;
    if (!fixed) {
      try {
        f.sched->build_connector_meta(out, {{"r", &r}});
        ADD_FAILURE() << "expected AssertionError";
      } catch (const UpstreamError& e) {
        EXPECT_EQ(e.kind(), PyError::kAssertionError);
        EXPECT_STREQ(e.what(), "AssertionError: preempted request r num_computed_tokens");
      }
      continue;
    }
    ConnectorMetadata meta = f.sched->build_connector_meta(out, {{"r", &r}});
    // The resumed tracker starts over: its first chunk (tokens 0..31) is saved again, minus the
    // 16 tokens LMCache already holds.
    ASSERT_EQ(meta.requests.size(), 1u);
    ASSERT_TRUE(meta.requests[0].save_spec);
    EXPECT_EQ(meta.requests[0].save_spec->skip_leading_tokens, 16);
    EXPECT_EQ(meta.requests[0].token_ids.size(), 32u);
  }
}

// Under async scheduling a step's metadata is consumed after the next schedule updated the
// tracker: its views must keep the values they had, whether the tracker's vectors grow past their
// capacity or a preemption rewrites them (run under ASan in the asan preset: a view into a freed
// buffer fails there even when the stale bytes happen to match).
TEST(VllmAdapter, EarlierMetadataKeepsItsTokensAndSlotsWhileTheTrackerChanges) {
  RequestTracker t;
  t.req_id = "r";
  t.prompt_len = 64;
  t.token_ids = seq(16, 0);  // tokens 0 .. 15
  t.token_ids.shrink_to_fit();
  t.allocated_block_ids = {7};
  t.allocated_block_ids.shrink_to_fit();
  ReqMetaOptions o{16, 16, true, false};
  const auto m1 = req_meta_from_tracker(t, std::nullopt, o);
  ASSERT_TRUE(m1);
  ASSERT_EQ(m1->token_ids.size(), 16u);
  const TokenId* before = t.token_ids.data();
  t.update(seq(32, 16), std::vector<int64_t>{3, 9}, false, 0, 0, nullptr);  // past capacity
  EXPECT_NE(t.token_ids.data(), before);  // the tracker moved on to a new buffer
  const auto m2 = req_meta_from_tracker(t, std::nullopt, o);
  ASSERT_TRUE(m2);
  const std::vector<TokenId> all = seq(48, 0);
  const std::span<const TokenId> all_span(all);
  t.update(seq(1, 48), std::vector<int64_t>{5, 6, 2}, /*preempted=*/true, 0, 0, &all_span, 0);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(m1->token_ids[i], static_cast<TokenId>(i));
    EXPECT_EQ(m1->slot(i), 7 * 16 + static_cast<int64_t>(i));
  }
  ASSERT_EQ(m2->token_ids.size(), 48u);
  EXPECT_EQ(m2->token_ids[47], 47);
  EXPECT_EQ(m2->slot(16), 3 * 16);  // the blocks before the preemption
  EXPECT_EQ(m2->slot(47), 9 * 16 + 15);
  EXPECT_EQ(t.allocated_block_ids, (std::vector<int64_t>{5, 6, 2}));
}

// A failed load recomputed: vLLM rolls num_computed_tokens back from 32 to 16 and schedules the
// 16 tokens again. Upstream's tracker appends them a second time (48 tokens, the last 16 a copy
// of 16..31, saved as if they followed token 31); the fix cuts it back first (the request's 32).
TEST(VllmAdapter, RecomputedTokensAreAppendedTwiceUnlessFixed) {
  for (bool fixed : {false, true}) {
    Fixture f(/*min_retrieve=*/0,
              Fixture::upstream_but(&Quirks::tracker_reappends_recomputed_tokens, !fixed));
    std::vector<TokenId> a = seq(64, 1);
    VllmRequest r = f.request("r", a);
    f.schedule_first_chunk(r);
    // blocks of tokens 16..31 failed to load: recomputed
    ConnectorMetadata meta = f.schedule_running(r, 16, 16);
    ASSERT_EQ(f.sched->request_trackers().size(), 1u);
    const RequestTracker* t = &f.sched->request_trackers().front();
    SCOPED_TRACE(fixed ? "fixed" : "upstream");
    if (fixed) {
      EXPECT_EQ(t->token_ids, std::vector<TokenId>(a.begin(), a.begin() + 32));
    } else {
      ASSERT_EQ(t->token_ids.size(), 48u);
      EXPECT_EQ(t->token_ids[32], a[16]);
    }
  }
}

TEST(VllmAdapter, SavesOnlyAtChunkBoundariesAndNotInDecode) {
  RequestTracker t;
  t.req_id = "r";
  t.prompt_len = 40;
  t.token_ids = seq(20);
  t.allocated_block_ids = {7, 3};
  ReqMetaOptions o{16, 16, true, false};
  auto m = req_meta_from_tracker(t, std::nullopt, o);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->token_ids.size(), 16u);  // cut to a chunk multiple
  EXPECT_EQ(m->slot(0), 7 * 16);
  EXPECT_EQ(t.num_saved_tokens, 16);
  t.update(seq(10, 20), std::vector<int64_t>{}, false, 0, 0, nullptr);  // 30 tokens: < 32
  EXPECT_FALSE(req_meta_from_tracker(t, std::nullopt, o));
  t.update(seq(10, 30), std::vector<int64_t>{9}, false, 0, 0, nullptr);  // 40: last prefill
  m = req_meta_from_tracker(t, std::nullopt, o);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->is_last_prefill);
  EXPECT_EQ(m->save_spec->skip_leading_tokens, 16);
  EXPECT_EQ(m->token_ids.size(), 32u);  // partial chunk discarded
  EXPECT_EQ(m->slot(16), 3 * 16);
  ASSERT_EQ(m->num_slots(), 32u);  // blocks 7, 3 (and 9) cover every saved token
  for (size_t i = 0; i < m->num_slots(); ++i)
    EXPECT_EQ(m->slot(i), (i < 16 ? 7 : 3) * 16 + static_cast<int64_t>(i % 16)) << i;
  t.update(seq(1, 40), std::nullopt, false, 0, 0, nullptr);
  EXPECT_TRUE(t.is_decode_phase);
  EXPECT_FALSE(req_meta_from_tracker(t, std::nullopt, o));
  o.save_decode_cache = true;
  t.update(seq(7, 41), std::nullopt, false, 0, 0, nullptr);  // 48 tokens: next boundary
  EXPECT_TRUE(req_meta_from_tracker(t, std::nullopt, o));
}

TEST(VllmAdapter, WorkerStepLoadsThenUnpinsThenStoresTheNewChunks) {
  Fixture f;
  std::vector<TokenId> a = seq(48, 1);
  store(*f.engine, std::vector<TokenId>(a.begin(), a.begin() + 32));
  VllmRequest r = f.request("r", a);
  EXPECT_EQ(*f.sched->get_num_new_matched_tokens(r, 0).ret, 32);
  ConnectorMetadata meta = f.schedule_new(r, 32, {4, 5, 6}, 16);
  ASSERT_EQ(meta.requests.size(), 1u);
  EXPECT_EQ(meta.requests[0].save_spec->skip_leading_tokens, 32);
  WorkerLog log;
  f.worker->start_load_kv(meta, &log);
  f.worker->wait_for_save(meta, &log);
  ASSERT_EQ(log.calls.size(), 3u);
  EXPECT_EQ(log.calls[0].kind, AdapterCall::Kind::kRetrieve);
  EXPECT_EQ(log.calls[0].ret_tokens, 32);
  EXPECT_EQ(log.calls[1].kind, AdapterCall::Kind::kUnpin);
  EXPECT_EQ(log.calls[2].kind, AdapterCall::Kind::kStore);
  EXPECT_EQ(log.calls[2].num_masked, 32);
  EXPECT_EQ(log.stored, (std::vector<TokenRange>{{32, 48}}));
  EXPECT_TRUE(f.worker->get_block_ids_with_load_errors().empty());
  for (const auto& [k, id] : f.engine->storage_manager().local_cpu().entries())
    EXPECT_EQ(f.engine->storage_manager().allocator().obj(id).pin_count, 0);
}

// Not upstream (its engine stops at the raise): a bulk store that raises after its GPU -> CPU copy
// leaves the copied chunks in the log, for the simulator to charge; one that raises before it
// leaves nothing. Either way no store call is logged and the request keeps its skip.
TEST(VllmAdapter, ABulkStoreThatRaisesLogsOnlyTheChunksItCopied) {
  for (bool in_puts : {true, false}) {
    Fixture f;
    f.cfg = toy_config(in_puts ? 16 : 5, in_puts ? 4 : 8);
    if (in_puts) f.cfg.cache_policy = CachePolicyKind::kLfu;  // the scan raises on pending keys
    f.cfg.force_store_wait = !in_puts;                        // the allocation would spin
    f.engine = std::make_unique<LMCacheEngine>(f.cfg, toy_metadata());
    f.worker = std::make_unique<LMCacheWorkerAdapter>(f.engine.get(), f.adapter);
    store(*f.engine, seq(64, 1));  // four chunks whose disk writes are pending
    VllmRequest r = f.request("r", seq(32, 5000));
    ConnectorMetadata meta = f.schedule_new(r, 0, {1, 2}, 32);
    ASSERT_EQ(meta.requests.size(), 1u);
    WorkerLog log;
    try {
      f.worker->wait_for_save(meta, &log);
      ADD_FAILURE() << "no raise";
    } catch (const UpstreamError& e) {
      EXPECT_EQ(e.kind(), in_puts ? PyError::kKeyError : PyError::kWouldBusyWait);
    }
    EXPECT_EQ(log.stored,
              in_puts ? (std::vector<TokenRange>{{0, 16}, {16, 32}}) : std::vector<TokenRange>{})
        << in_puts;
    for (const AdapterCall& c : log.calls) EXPECT_NE(c.kind, AdapterCall::Kind::kStore);
    EXPECT_EQ(meta.requests[0].save_spec->skip_leading_tokens, 0);
  }
}

// Not upstream: the simulator drops a step's layerwise stores when one raises. abandon_stores
// returns each chunk a store had allocated with the layers it had copied (here: put, and so in the
// CPU tier; a put that raised adds its layer, LMCacheEngine.ALayerwisePutThatRaisesCounts...),
// and afterwards save_kv_layer and wait_for_save neither advance nor raise over the dropped
// stores; wait_for_save still unpins.
TEST(VllmAdapter, AbandonedLayerwiseStoresReportTheLayersTheyCopied) {
  Fixture f;
  f.cfg.use_layerwise = true;
  f.engine = std::make_unique<LMCacheEngine>(f.cfg, toy_metadata());
  f.worker = std::make_unique<LMCacheWorkerAdapter>(f.engine.get(), f.adapter);
  VllmRequest r = f.request("r", seq(48, 1));
  ConnectorMetadata meta = f.schedule_new(r, 0, {1, 2, 3}, 48);
  ASSERT_EQ(meta.requests.size(), 1u);
  WorkerLog log;
  f.worker->start_load_kv(meta, &log);
  f.worker->save_kv_layer(meta, &log);  // the store's first step: three chunks allocated
  f.worker->save_kv_layer(meta, &log);  // layer 0 of each put
  EXPECT_EQ(log.stored, (std::vector<TokenRange>{{0, 16}, {16, 32}, {32, 48}}));
  const auto put = f.worker->abandon_stores();
  EXPECT_EQ(put,
            (std::vector<std::pair<TokenRange, int>>{{{0, 16}, 1}, {{16, 32}, 1}, {{32, 48}, 1}}));
  EXPECT_TRUE(f.worker->abandon_stores().empty());
  EXPECT_NO_THROW(f.worker->save_kv_layer(meta, &log));
  EXPECT_NO_THROW(f.worker->wait_for_save(meta, &log));
  EXPECT_EQ(f.engine->storage_manager().local_cpu().entries().size(), 3u);  // layer 0 only
}

// A request carrying a chunk-hash memo: its lookups fill the memo and its tracker's stores use the
// same one (each chunk hashed once), with exactly the keys and ranges of a request without one.
TEST(VllmAdapter, TheRequestsChunkHashMemoServesLookupsAndStoresAlike) {
  // Keys as strings: a CacheEngineKey points into its engine's scope registry, gone with `f`.
  std::vector<std::vector<std::string>> keys;
  for (bool shared : {false, true}) {
    Fixture f;
    std::vector<TokenId> a = seq(48, 1);
    store(*f.engine, std::vector<TokenId>(a.begin(), a.begin() + 16));
    VllmRequest r = f.request("r", a);
    ChunkHashChain chain;
    if (shared) r.chunk_hashes = &chain;
    EXPECT_EQ(*f.sched->get_num_new_matched_tokens(r, 0).ret, 16);
    if (shared) {
      EXPECT_EQ(chain.hashes.size(), 3u);
    }
    ConnectorMetadata meta = f.schedule_new(r, 16, {4, 5, 6}, 32);
    ASSERT_EQ(meta.requests.size(), 1u);
    if (shared) {
      EXPECT_EQ(meta.requests[0].chunk_hashes, &chain);
    } else {
      EXPECT_NE(meta.requests[0].chunk_hashes, nullptr);
    }
    WorkerLog log;
    f.worker->start_load_kv(meta, &log);
    f.worker->wait_for_save(meta, &log);
    EXPECT_EQ(log.stored, (std::vector<TokenRange>{{16, 32}, {32, 48}}));
    if (shared) {
      EXPECT_EQ(chain.hashes.size(), 3u);
    }
    keys.emplace_back();
    for (const auto& [k, id] : f.engine->storage_manager().local_cpu().entries())
      keys.back().push_back(k.to_string());
  }
  ASSERT_EQ(keys[0].size(), 3u);
  EXPECT_EQ(keys[0], keys[1]);
}

// The reappend quirk (a failed load rolled 16..31 back) leaves the tracker holding a[0:32] then
// a[16:32]: no longer a prefix of the request's tokens. Upstream then stores chunk 2 under the
// hash of the tracker's tokens (a[16:32] after chunks 0-1), which no lookup of the request
// finds. A request carrying a chunk-hash memo (filled by its lookup over a's 4 chunks) must store
// under the same keys as one without, and keep its memo's hashes those of its own tokens.
TEST(VllmAdapter, AfterTheReappendQuirkStoresHashTheTrackersTokensNotTheRequestsMemo) {
  std::vector<std::vector<std::string>> keys;  // per run, the CPU tier's keys as strings
  for (bool shared : {false, true}) {
    Fixture f;
    std::vector<TokenId> a = seq(64, 1);
    VllmRequest r = f.request("r", a);
    ChunkHashChain chain;
    if (shared) r.chunk_hashes = &chain;
    EXPECT_EQ(*f.sched->get_num_new_matched_tokens(r, 0).ret, 0);
    const std::vector<ChunkHash> looked_up = chain.hashes;
    EXPECT_EQ(looked_up.size(), shared ? 4u : 0u);
    ConnectorMetadata first = f.schedule_new(r, 0, {1, 2, 3, 4}, 32);
    WorkerLog log;
    f.worker->wait_for_save(first, &log);
    EXPECT_EQ(log.stored, (std::vector<TokenRange>{{0, 16}, {16, 32}}));
    ConnectorMetadata meta = f.schedule_running(r, 16, 16);
    ASSERT_EQ(meta.requests.size(), 1u);
    ASSERT_EQ(meta.requests[0].token_ids.size(), 48u);
    EXPECT_EQ(meta.requests[0].token_ids[32], a[16]);
    EXPECT_NE(meta.requests[0].chunk_hashes, &chain) << "a diverged tracker uses its own memo";
    log = WorkerLog();
    f.worker->wait_for_save(meta, &log);
    EXPECT_EQ(log.stored, (std::vector<TokenRange>{{32, 48}}));
    EXPECT_EQ(chain.hashes, looked_up) << "the request's memo keeps its own tokens' hashes";
    keys.emplace_back();
    for (const auto& [k, id] : f.engine->storage_manager().local_cpu().entries())
      keys.back().push_back(k.to_string());
    if (shared) {
      // The stored chunk 2 is not the request's chunk 2: a lookup of a finds chunks 0-1 only.
      r.num_computed_tokens = 0;
      f.client->clear_lookup_status("r");
      EXPECT_EQ(f.sched->get_num_new_matched_tokens(r, 0).ret, 32);
    }
  }
  ASSERT_EQ(keys[0].size(), 3u);
  EXPECT_EQ(keys[0], keys[1]);
}

// Under async scheduling a running request's new tokens may start past the tracker's end (a
// gap): the tracker then holds a[0:32] and a[40:56], not a prefix of the request's tokens, and
// its stores hash its own tokens, leaving the request's memo as its lookup filled it.
TEST(VllmAdapter, ATrackerWithAGapStopsUsingTheRequestsMemo) {
  Fixture f;
  std::vector<TokenId> a = seq(64, 1);
  VllmRequest r = f.request("r", a);
  ChunkHashChain chain;
  r.chunk_hashes = &chain;
  EXPECT_EQ(*f.sched->get_num_new_matched_tokens(r, 0).ret, 0);
  const std::vector<ChunkHash> looked_up = chain.hashes;
  ConnectorMetadata first = f.schedule_new(r, 0, {1, 2, 3, 4}, 32);
  ASSERT_EQ(first.requests.size(), 1u);
  EXPECT_EQ(first.requests[0].chunk_hashes, &chain);
  ConnectorMetadata meta = f.schedule_running(r, 40, 16);
  ASSERT_EQ(meta.requests.size(), 1u);
  ASSERT_EQ(meta.requests[0].token_ids.size(), 48u);
  EXPECT_EQ(meta.requests[0].token_ids[32], a[40]);
  EXPECT_NE(meta.requests[0].chunk_hashes, &chain);
  WorkerLog log;
  f.worker->wait_for_save(meta, &log);
  EXPECT_EQ(log.stored, (std::vector<TokenRange>{{32, 48}}));
  EXPECT_EQ(chain.hashes, looked_up);
}

// Upstream's worker asserts that every token it loads or saves has a slot. The reappend quirk
// gets there: a[0:32] in blocks 1-2, then 16..31 recomputed with no new block leaves 48 tokens to
// save over 32 slots, and wait_for_save raises AssertionError before it stores; with the fix the
// tracker holds 32 tokens, short of the next chunk boundary (48), and nothing is saved.
TEST(VllmAdapter, TheWorkerRaisesWhenTheTokensToSaveOutrunTheirSlots) {
  for (bool fixed : {false, true}) {
    SCOPED_TRACE(fixed ? "fixed" : "upstream");
    Fixture f(/*min_retrieve=*/0,
              Fixture::upstream_but(&Quirks::tracker_reappends_recomputed_tokens, !fixed));
    VllmRequest r = f.request("r", seq(64, 1));
    EXPECT_EQ(*f.sched->get_num_new_matched_tokens(r, 0).ret, 0);
    ConnectorMetadata first = f.schedule_new(r, 0, {1, 2}, 32);
    WorkerLog log;
    f.worker->wait_for_save(first, &log);
    EXPECT_EQ(log.stored.size(), 2u);
    ConnectorMetadata meta = f.schedule_running(r, 16, 16);
    log = WorkerLog();
    if (fixed) {
      EXPECT_TRUE(meta.requests.empty());
      continue;
    }
    ASSERT_EQ(meta.requests.size(), 1u);
    EXPECT_EQ(meta.requests[0].token_ids.size(), 48u);
    EXPECT_EQ(meta.requests[0].num_slots(), 32u);
    try {
      f.worker->wait_for_save(meta, &log);
      ADD_FAILURE() << "no raise";
    } catch (const UpstreamError& e) {
      EXPECT_EQ(e.kind(), PyError::kAssertionError);
    }
    EXPECT_TRUE(log.stored.empty());
    EXPECT_EQ(f.engine->storage_manager().local_cpu().entries().size(), 2u);
  }
}

// The same assertion guards loads (start_load_kv, for requests with a LoadSpec) and layerwise
// stores (save_kv_layer's first call), here on metadata built by hand: 48 tokens over 2 or 3
// blocks of 16.
TEST(VllmAdapter, LoadsAndLayerwiseStoresAssertASlotPerToken) {
  const std::vector<TokenId> tokens = seq(48, 1);
  for (bool layerwise : {false, true}) {
    for (size_t blocks : {2, 3}) {
      Fixture f;
      f.cfg.use_layerwise = layerwise;
      f.engine = std::make_unique<LMCacheEngine>(f.cfg, toy_metadata());
      f.worker = std::make_unique<LMCacheWorkerAdapter>(f.engine.get(), f.adapter);
      const std::vector<int64_t> block_ids = {5, 6, 7};
      ReqMeta m;
      m.req_id = "r";
      m.token_ids = tokens;
      m.block_ids = std::span(block_ids).first(blocks);
      ConnectorMetadata load;
      load.requests.push_back(m);
      load.requests[0].load_spec = LoadSpec{0, 48, true};
      ConnectorMetadata save;
      save.requests.push_back(m);
      save.requests[0].save_spec = SaveSpec{0, true};
      WorkerLog log;
      auto raises = [](auto fn) {
        try {
          fn();
        } catch (const UpstreamError& e) {
          return e.kind() == PyError::kAssertionError;
        }
        return false;
      };
      EXPECT_EQ(raises([&] { f.worker->start_load_kv(load, &log); }), blocks == 2)
          << layerwise << blocks;
      if (layerwise) {
        EXPECT_EQ(raises([&] { f.worker->save_kv_layer(save, &log); }), blocks == 2) << blocks;
      } else {
        EXPECT_EQ(raises([&] { f.worker->wait_for_save(save, &log); }), blocks == 2) << blocks;
        EXPECT_EQ(log.stored.size(), blocks == 2 ? 0u : 3u);
      }
    }
  }
}

TEST(VllmAdapter, FailedLoadsAreReportedAsVllmBlockIds) {
  Fixture f;
  f.cfg.remote = true;
  f.engine = std::make_unique<LMCacheEngine>(f.cfg, toy_metadata());
  f.client = std::make_unique<LMCacheLookupClient>(f.cfg, toy_metadata(),
                                                   std::vector<LMCacheEngine*>{f.engine.get()});
  f.sched = std::make_unique<LMCacheSchedulerAdapter>(f.cfg, f.adapter, f.client.get());
  f.worker = std::make_unique<LMCacheWorkerAdapter>(f.engine.get(), f.adapter);
  std::vector<TokenId> a = seq(64, 1);
  store(*f.engine, a);
  f.engine->storage_manager().complete_all_writes();
  f.engine->clear(std::nullopt, nullptr, nullptr);
  auto infos = f.engine->chunk_infos(a, nullptr);
  f.engine->storage_manager().shared().remote->delete_kv_bytes(infos[3].key.to_string());
  std::vector<TokenId> prompt = a;
  prompt.push_back(7);
  VllmRequest r = f.request("r", prompt);
  EXPECT_EQ(*f.sched->get_num_new_matched_tokens(r, 0).ret, 64);
  ConnectorMetadata meta = f.schedule_new(r, 64, {10, 11, 12, 13, 14}, 1);
  WorkerLog log;
  f.worker->start_load_kv(meta, &log);
  // Chunk 3 failed and the quirk also drops chunk 2 from the load while its mask stays set:
  // only chunk 3's blocks are reported.
  EXPECT_EQ(f.worker->get_block_ids_with_load_errors(), (std::vector<int64_t>{13}));
}

}  // namespace
}  // namespace kvtwin::model::lmcache
