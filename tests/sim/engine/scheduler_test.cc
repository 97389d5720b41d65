// The scheduler on its own, step by step, on a real vLLM KV-cache manager (no connector):
// vLLM v0.17.0's Scheduler.schedule rules that a whole-cluster run hides.
#include "sim/engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/vllm/request_block_hasher.h"
#include "sim/engine/kv_connector.h"

namespace kvtwin::sim::engine {
namespace {

namespace vllm = model::vllm;
using Ids = std::vector<std::string>;

struct SchedulerRig {
  SchedulerRig(int num_blocks, int block_size, const SchedulerConfig& config, bool caching)
      : SchedulerRig(options(num_blocks, block_size, caching), config) {}
  SchedulerRig(const vllm::KVCacheManagerOptions& kv_options, const SchedulerConfig& config,
               KvConnector* connector = nullptr)
      : hasher(kv_options.hash_block_size,
               vllm::BlockHasher(vllm::HashFn::kSha256Cbor,
                                 vllm::none_hash(vllm::HashFn::kSha256Cbor, "0"))),
        kv(kv_options),
        scheduler(config, &kv, connector) {}

  // The rigs' common scheduler: a 64-token budget, max_model_len 1024, `block_size`-token blocks
  // (each rig sets what it tests on top).
  static SchedulerConfig base_config(int block_size) {
    SchedulerConfig c;
    c.max_num_batched_tokens = 64;
    c.max_model_len = 1024;
    c.block_size = block_size;
    return c;
  }

  static vllm::KVCacheManagerOptions options(int num_blocks, int block_size, bool caching) {
    vllm::KVCacheSpec spec;
    spec.kind = vllm::KVCacheSpecKind::kFullAttention;
    spec.block_size = block_size;
    spec.num_kv_heads = 1;
    spec.head_size = 8;
    spec.dtype = "bfloat16";
    vllm::KVCacheManagerOptions o;
    o.kv_cache_config.num_blocks = num_blocks;
    o.kv_cache_config.kv_cache_groups.push_back({{"l"}, spec});
    o.max_model_len = 1024;
    o.hash_block_size = block_size;
    o.enable_caching = caching;
    return o;
  }

  // Adds a request with prompt tokens [start, start + prompt) to the waiting queue.
  EngineRequest* add(const std::string& id, int prompt, int64_t max_tokens, int start,
                     int64_t priority = 0) {
    std::vector<vllm::TokenId> t;
    for (int i = 0; i < prompt; ++i) t.push_back(start + i);
    vllm::RequestOptions o;
    o.max_tokens = max_tokens;
    auto r = std::make_unique<EngineRequest>();
    r->req = std::make_unique<vllm::Request>(id, std::move(t), o, &hasher);
    r->priority = priority;
    r->record.index = requests.size();  // as the trace numbers requests: in arrival order
    requests.push_back(std::move(r));
    scheduler.add_request(requests.back().get());
    return requests.back().get();
  }

  // One engine step: schedule, then sample token 7 for every request done with its prompt.
  const SchedulerOutput& step() {
    scheduler.schedule(&out);
    scheduler.update_from_output(
        out, [](const EngineRequest&, int64_t) { return vllm::TokenId{7}; }, {}, &outcome);
    return out;
  }

  // Request ids, for readable failures.
  static std::vector<std::string> ids(const SchedulerOutput& out) {
    std::vector<std::string> v;
    for (const ScheduledRequest& s : out.scheduled) v.push_back(s.request->id());
    return v;
  }
  template <typename Requests>
  static std::vector<std::string> ids(const Requests& requests) {
    std::vector<std::string> v;
    for (const EngineRequest* r : requests) v.push_back(r->id());
    return v;
  }
  std::vector<std::string> waiting() const { return ids(scheduler.waiting()); }

  vllm::RequestBlockHasher hasher;
  vllm::KVCacheManager kv;
  Scheduler scheduler;
  std::vector<std::unique_ptr<EngineRequest>> requests;
  SchedulerOutput out;
  Scheduler::StepOutcome outcome;
};

// Upstream caps num_new_tokens at long_prefill_token_threshold for RUNNING requests too, not
// only when a request is first admitted: a 64-token prompt with threshold 16 and a budget of 64
// prefills in four chunks of 16 (one admitted, three running), then decodes.
TEST(Scheduler, LongPrefillThresholdCapsEveryChunkOfARunningPrefill) {
  SchedulerConfig c = SchedulerRig::base_config(16);
  c.long_prefill_token_threshold = 16;
  SchedulerRig x(/*num_blocks=*/10, /*block_size=*/16, c, /*caching=*/true);
  EngineRequest* r = x.add("r", 64, /*max_tokens=*/2, 0);
  std::vector<int64_t> chunks;
  while (x.scheduler.has_unfinished()) {
    const SchedulerOutput& out = x.step();
    ASSERT_EQ(out.scheduled.size(), 1u);
    chunks.push_back(out.scheduled[0].num_new_tokens);
    ASSERT_LE(chunks.size(), 10u);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{16, 16, 16, 16, 1}));
  EXPECT_EQ(r->req->num_output_tokens(), 2);
}

// A pool of 4 blocks of 4 tokens, prefix caching off, threshold 4, max_num_seqs 2; A (4 tokens),
// B (9 tokens), C (4 tokens) wait in that order.
//   step 1: A prefills 4 (1 block), B its first 4 (1 block); C waits (two running). A samples.
//   step 2: A decodes (5 tokens: 2nd block), B its next 4 (2nd block): the pool is full.
//   step 3: A decodes (6 tokens, no new block); B's last prompt token needs a 3rd block: B
//           preempts itself (frees its 2 blocks, back to 0 computed tokens).
//   step 4: A decodes; B is re-admitted (4 tokens, 1 block); C still waits (two running).
struct PreemptionRig : SchedulerRig {
  static SchedulerConfig config() {
    SchedulerConfig c = base_config(4);
    c.max_num_seqs = 2;
    c.long_prefill_token_threshold = 4;
    return c;
  }
  PreemptionRig() : SchedulerRig(/*num_blocks=*/5, /*block_size=*/4, config(), false) {
    a = add("a", 4, 16, 0);
    b = add("b", 9, 16, 100);
    c = add("c", 4, 16, 200);
  }
  EngineRequest* a;
  EngineRequest* b;
  EngineRequest* c;
};

// Upstream's _preempt_request prepends the victim to the waiting queue: it is resumed before
// requests that were already waiting.
TEST(Scheduler, APreemptedRequestGoesBackToTheFrontOfTheWaitingQueue) {
  PreemptionRig x;
  EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"a", "b"}));
  EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"a", "b"}));
  const SchedulerOutput& out3 = x.step();
  ASSERT_EQ(SchedulerRig::ids(out3.preempted), (Ids{"b"}));
  EXPECT_EQ(x.b->req->num_computed_tokens, 0);
  EXPECT_EQ(x.waiting(), (Ids{"b", "c"}));
  const SchedulerOutput& out4 = x.step();
  EXPECT_EQ(SchedulerRig::ids(out4), (Ids{"a", "b"}));
  EXPECT_TRUE(out4.scheduled.at(1).is_new);
  EXPECT_EQ(out4.scheduled.at(1).num_new_tokens, 4);
  EXPECT_EQ(x.waiting(), (Ids{"c"}));
}

// Upstream schedules WAITING requests only `if not preempted_reqs`: in step 3 the two blocks B
// frees would fit B's first 4-token chunk again, but nothing is admitted until step 4.
TEST(Scheduler, AStepThatPreemptsAdmitsNoWaitingRequest) {
  PreemptionRig x;
  x.step();
  x.step();
  const SchedulerOutput& out3 = x.step();
  ASSERT_EQ(SchedulerRig::ids(out3.preempted), (Ids{"b"}));
  EXPECT_EQ(SchedulerRig::ids(out3), (Ids{"a"}));
  EXPECT_EQ(out3.total_num_scheduled_tokens, 1);
  EXPECT_EQ(x.scheduler.num_running(), 1u);
  EXPECT_EQ(x.kv.block_pool().get_num_free_blocks(), 2);
}

// scheduling_policy "priority": the waiting queue is ordered as Request.__lt__ orders it —
// priority, then arrival time — whatever the order of arrival; FCFS keeps arrival order. The
// rig's arrivals are all at time 0; the arrival order breaks the tie, as upstream's distinct
// time.time() stamps would ("9" before "10", which the request id, Request.__lt__'s last key,
// would put first).
TEST(Scheduler, ThePriorityPolicyOrdersTheWaitingQueueByPriorityThenArrival) {
  for (bool priority : {true, false}) {
    SchedulerConfig c = PreemptionRig::config();
    c.max_num_seqs = 1;
    c.priority_policy = priority;
    SchedulerRig x(/*num_blocks=*/50, /*block_size=*/4, c, false);
    x.add("a", 4, 2, 0, 5);
    x.add("9", 4, 2, 100, 1);
    x.add("10", 4, 2, 200, 1);
    x.add("b", 4, 2, 300, -1);
    if (priority) {
      EXPECT_EQ(x.waiting(), (Ids{"b", "9", "10", "a"}));
      EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"b"}));
    } else {
      EXPECT_EQ(x.waiting(), (Ids{"a", "9", "10", "b"}));
      EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"a"}));
    }
  }
}

// Under the priority policy a failed allocation preempts the running request with the largest
// (priority, arrival), not the last one. Four usable 4-token blocks, chunks of 4 tokens, two
// seats. A (4 tokens, priority 1) runs alone in step 1; B (9 tokens) and C (4), priority 0,
// arrive; step 2 admits B; in step 4 A's decode is scheduled first, then B's last chunk needs a
// fifth block. FCFS preempts B itself; the priority policy preempts A — its scheduled token goes
// back to the budget — and B's chunk fits in A's freed blocks. A then waits behind C.
TEST(Scheduler, ThePriorityPolicyPreemptsTheLowestPriorityRequestEvenIfScheduled) {
  for (bool priority : {true, false}) {
    SchedulerConfig c = PreemptionRig::config();
    c.priority_policy = priority;
    SchedulerRig x(/*num_blocks=*/5, /*block_size=*/4, c, false);
    x.add("a", 4, 16, 0, 1);
    EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"a"}));
    x.add("b", 9, 16, 100, 0);
    x.add("c", 4, 16, 200, 0);
    EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"a", "b"}));
    EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"a", "b"}));
    const SchedulerOutput& out4 = x.step();
    if (priority) {
      EXPECT_EQ(SchedulerRig::ids(out4.preempted), (Ids{"a"}));
      EXPECT_EQ(SchedulerRig::ids(out4), (Ids{"b"}));
      EXPECT_EQ(out4.total_num_scheduled_tokens, 1);
      EXPECT_EQ(x.waiting(), (Ids{"c", "a"}));
    } else {
      EXPECT_EQ(SchedulerRig::ids(out4.preempted), (Ids{"b"}));
      EXPECT_EQ(SchedulerRig::ids(out4), (Ids{"a"}));
      EXPECT_EQ(x.waiting(), (Ids{"b", "c"}));
    }
  }
}

// Upstream stamps arrival_time with time.time() as each request comes in: distinct, larger for the
// later one. The rig's requests all arrive at time 0, as many trace requests share a millisecond;
// the simulator breaks such ties by the order of arrival. "9" then "10", priority 0, 7 prompt
// tokens each, four usable 4-token blocks: the waiting queue keeps arrival order (the id string
// alone would put "10" first); both prefill in two chunks and decode once, holding two blocks
// each; in step 4 "9" needs a third block and the priority policy preempts "10", the later
// arrival, not "9", the first of the tie in running order.
TEST(Scheduler, ThePriorityPolicyBreaksArrivalTimeTiesByArrivalOrder) {
  SchedulerConfig c = PreemptionRig::config();
  c.priority_policy = true;
  SchedulerRig x(/*num_blocks=*/5, /*block_size=*/4, c, false);
  x.add("9", 7, 16, 0);
  x.add("10", 7, 16, 100);
  EXPECT_EQ(x.waiting(), (Ids{"9", "10"}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"9", "10"})) << i;
  const SchedulerOutput& out4 = x.step();
  EXPECT_EQ(SchedulerRig::ids(out4.preempted), (Ids{"10"}));
  EXPECT_EQ(SchedulerRig::ids(out4), (Ids{"9"}));
  EXPECT_EQ(x.waiting(), (Ids{"10"}));
}

// Eight requests arriving together in a pool that holds three of them at their longest: under the
// priority policy the earliest arrivals keep their blocks and finish, the later ones are preempted
// and recomputed, and every request finishes (taking the first of a tie in running order, the
// request with the most work done, preempted the requests in turn and never finished).
TEST(Scheduler, ThePriorityPolicyFinishesRequestsThatArriveTogether) {
  SchedulerConfig c = PreemptionRig::config();
  c.priority_policy = true;
  c.max_num_seqs = 8;
  c.long_prefill_token_threshold = 0;
  SchedulerRig x(/*num_blocks=*/13, /*block_size=*/4, c, false);
  std::vector<EngineRequest*> rs;
  for (int i = 0; i < 8; ++i) rs.push_back(x.add("r" + std::to_string(i), 9, 6, 100 * i));
  int steps = 0;
  std::vector<std::string> finish_order;
  while (x.scheduler.has_unfinished()) {
    x.step();
    for (EngineRequest* r : x.outcome.finished) finish_order.push_back(r->id());
    ASSERT_LT(++steps, 1000) << "requests still unfinished: " << x.waiting().size() << " waiting";
  }
  for (EngineRequest* r : rs) EXPECT_EQ(r->req->num_output_tokens(), 6) << r->id();
  ASSERT_EQ(finish_order.size(), 8u);
  EXPECT_EQ(finish_order.front(), "r0");
  EXPECT_GT(x.scheduler.num_preemptions(), 0u);
}

// An encoder-decoder rig: 4-token blocks; self-attention group "l" and cross-attention group "c"
// (vLLM's CrossAttentionManager: ceil(encoder tokens / 4) blocks, allocated with the encoder
// input), prefix caching off, chunked prefill off; each request has 8 encoder tokens.
struct EncoderDecoderRig : SchedulerRig {
  static SchedulerConfig config(int64_t encoder_budget) {
    SchedulerConfig c;
    c.max_num_batched_tokens = 64;
    c.enable_chunked_prefill = false;
    c.max_model_len = 64;
    c.block_size = 4;
    c.encoder_compute_budget = encoder_budget;
    return c;
  }
  static vllm::KVCacheManagerOptions options(int num_blocks) {
    vllm::KVCacheManagerOptions o = SchedulerRig::options(num_blocks, 4, false);
    vllm::KVCacheSpec cross = o.kv_cache_config.kv_cache_groups[0].kv_cache_spec;
    cross.kind = vllm::KVCacheSpecKind::kCrossAttention;
    o.kv_cache_config.kv_cache_groups.push_back({{"c"}, cross});
    o.max_model_len = 64;
    return o;
  }
  EncoderDecoderRig(int num_blocks, int64_t encoder_budget)
      : SchedulerRig(options(num_blocks), config(encoder_budget)) {}
  EngineRequest* add_encdec(const std::string& id, int prompt, int64_t max_tokens, int start) {
    EngineRequest* r = add(id, prompt, max_tokens, start);
    r->num_encoder_tokens = 8;
    return r;
  }
  size_t cross_blocks(const EngineRequest* r) { return kv.get_block_ids(r->id()).at(1).size(); }
};

// Upstream takes each admitted request's encoder input from one per-step encoder compute budget
// (max(max_num_encoder_input_tokens, largest input)); encoder tokens do not use the token budget.
// Budget 20, inputs of 8: two requests per step although 64 decoder tokens would admit all five.
TEST(Scheduler, EncoderInputsShareOneComputeBudgetPerStep) {
  EncoderDecoderRig x(/*num_blocks=*/64, /*encoder_budget=*/20);
  for (int i = 0; i < 5; ++i) x.add_encdec("r" + std::to_string(i), 4, 8, 100 * i);
  const SchedulerOutput& s1 = x.step();
  EXPECT_EQ(SchedulerRig::ids(s1), (Ids{"r0", "r1"}));
  for (const ScheduledRequest& s : s1.scheduled) EXPECT_EQ(s.num_encoder_tokens, 8);
  EXPECT_EQ(s1.total_num_scheduled_tokens, 8);
  const SchedulerOutput& s2 = x.step();  // r0, r1 decode (no encoder); r2, r3 admitted
  EXPECT_EQ(SchedulerRig::ids(s2), (Ids{"r0", "r1", "r2", "r3"}));
  EXPECT_EQ(s2.scheduled[0].num_encoder_tokens, 0);
  EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"r0", "r1", "r2", "r3", "r4"}));
}

// A preempted encoder-decoder request loses its cross-attention blocks with the rest and restarts
// at 0 computed tokens, so upstream runs its encoder again and allocates cross-attention blocks
// anew. Pool of 7 usable blocks; A and B each take 1 self + 2 cross blocks when admitted.
//   step 1: both admitted (6 blocks); step 2: A's 5th token takes the last block, B's fails and
//   B preempts itself (5 tokens now: it will need 2 self + 2 cross blocks);
//   step 3: A samples its 3rd and last token and is freed; B does not fit yet;
//   step 4: B is re-admitted with its encoder input and 2 cross blocks again.
TEST(Scheduler, APreemptedEncoderDecoderRequestRunsItsEncoderAgain) {
  EncoderDecoderRig x(/*num_blocks=*/8, /*encoder_budget=*/64);
  EngineRequest* a = x.add_encdec("a", 4, /*max_tokens=*/3, 0);
  EngineRequest* b = x.add_encdec("b", 4, 16, 100);
  x.step();
  EXPECT_EQ(x.cross_blocks(a), 2u);
  EXPECT_EQ(x.cross_blocks(b), 2u);
  const SchedulerOutput& s2 = x.step();
  ASSERT_EQ(SchedulerRig::ids(s2.preempted), (Ids{"b"}));
  EXPECT_EQ(x.cross_blocks(b), 0u);
  EXPECT_EQ(SchedulerRig::ids(x.step()), (Ids{"a"}));
  ASSERT_TRUE(a->finished());
  const SchedulerOutput& s4 = x.step();
  ASSERT_EQ(SchedulerRig::ids(s4), (Ids{"b"}));
  EXPECT_TRUE(s4.scheduled[0].is_new);
  EXPECT_EQ(s4.scheduled[0].num_new_tokens, 5);
  EXPECT_EQ(s4.scheduled[0].num_encoder_tokens, 8);
  EXPECT_EQ(x.cross_blocks(b), 2u);
}

// Asynchronous scheduling (vLLM's AsyncScheduler): the engine schedules step N+1 before step N's
// output is processed. An async rig drives the batch queue by hand: schedule() fills a batch,
// update() processes one (sampling token 7 for each request that samples in it).
struct AsyncRig : SchedulerRig {
  static SchedulerConfig config(int block_size) {
    SchedulerConfig c = base_config(block_size);
    c.async_scheduling = true;
    return c;
  }
  AsyncRig(int num_blocks, int block_size, bool caching = false)
      : SchedulerRig(num_blocks, block_size, config(block_size), caching) {}
  void update(const SchedulerOutput& batch) {
    scheduler.update_from_output(
        batch, [](const EngineRequest&, int64_t) { return vllm::TokenId{7}; }, {}, &outcome);
  }
};

// A 8-token prompt with max_tokens 3. Each sampling step adds a placeholder; a running request
// is scheduled for num_tokens + placeholders − num_computed_tokens, and not at all once the
// tokens in flight reach max_tokens (num_computed + 2 − placeholders ≥ prompt + max_tokens).
//   S1: prefill 8 (1 placeholder)          S2: decode 1 (computed 9, 2 placeholders)
//   update S1: token 1 (1 placeholder)     S3: decode 1 (computed 10; 9 + 2 − 1 = 10 < 11)
//   update S2: token 2                     S4: nothing (10 + 2 − 1 = 11 ≥ 11)
//   update S3: token 3, finished
TEST(Scheduler, AsyncSchedulingSchedulesWithPlaceholdersAndNoStepPastMaxTokens) {
  AsyncRig x(/*num_blocks=*/10, /*block_size=*/4);
  EngineRequest* a = x.add("a", 8, /*max_tokens=*/3, 0);
  SchedulerOutput s1, s2, s3, s4;
  x.scheduler.schedule(&s1);
  ASSERT_EQ(s1.scheduled.size(), 1u);
  EXPECT_EQ(s1.scheduled[0].num_new_tokens, 8);
  EXPECT_TRUE(s1.scheduled[0].samples);
  EXPECT_EQ(a->num_output_placeholders, 1);
  x.scheduler.schedule(&s2);
  ASSERT_EQ(s2.scheduled.size(), 1u);
  EXPECT_EQ(s2.scheduled[0].num_new_tokens, 1);
  EXPECT_EQ(a->req->num_computed_tokens, 9);
  EXPECT_EQ(a->num_output_placeholders, 2);
  x.update(s1);
  EXPECT_EQ(a->req->num_output_tokens(), 1);
  EXPECT_EQ(a->num_output_placeholders, 1);
  x.scheduler.schedule(&s3);
  ASSERT_EQ(s3.scheduled.size(), 1u);
  EXPECT_EQ(s3.scheduled[0].num_new_tokens, 1);
  x.update(s2);
  x.scheduler.schedule(&s4);
  EXPECT_TRUE(s4.empty());
  EXPECT_FALSE(a->finished());
  x.update(s3);
  EXPECT_TRUE(a->finished());
  EXPECT_EQ(a->req->num_output_tokens(), 3);
  EXPECT_EQ(a->num_output_placeholders, 0);
  EXPECT_EQ(x.outcome.finished.size(), 1u);
}

// A block is cached once its tokens' KV is computed. A prompt of 0..6 with 2 outputs (token 7,
// then 7) and 4-token blocks: the first decode computes token 7's KV and fills block 2. The
// synchronous scheduler caches block 2 when it allocates that decode (token 7 is known then);
// under async scheduling the decode is scheduled before token 7 exists (allocate_slots caches up
// to num_tokens only), and AsyncScheduler caches block 2 when the decode's output arrives. Either
// way B (prompt 0..11) then finds 8 tokens in the prefix cache.
//   async: S1 prefill 7; S2 decode (1 placeholder left after S1's output); S3 nothing (its last
//          token is in flight); S2's output: cache_blocks(8 − 0) → block 2.
TEST(Scheduler, AsyncSchedulingCachesTheBlockADecodeFillsWhenItsOutputArrives) {
  for (bool async : {true, false}) {
    SchedulerConfig c = AsyncRig::config(4);
    c.async_scheduling = async;
    SchedulerRig x(/*num_blocks=*/10, /*block_size=*/4, c, /*caching=*/true);
    EngineRequest* a = x.add("a", 7, /*max_tokens=*/2, 0);
    auto update = [&](const SchedulerOutput& batch) {
      x.scheduler.update_from_output(
          batch, [](const EngineRequest&, int64_t) { return vllm::TokenId{7}; }, {}, &x.outcome);
    };
    SchedulerOutput s1, s2, s3;
    x.scheduler.schedule(&s1);
    if (async) {
      x.scheduler.schedule(&s2);
      update(s1);
      x.scheduler.schedule(&s3);
      EXPECT_TRUE(s3.empty());
      update(s2);
    } else {
      update(s1);
      x.scheduler.schedule(&s2);
      update(s2);
    }
    ASSERT_TRUE(a->finished()) << async;
    EXPECT_EQ(a->req->num_tokens(), 9);
    EngineRequest* b = x.add("b", 12, /*max_tokens=*/1, 0);
    x.scheduler.schedule(&x.out);
    ASSERT_EQ(x.out.scheduled.size(), 1u);
    EXPECT_EQ(x.out.scheduled[0].request, b);
    EXPECT_EQ(x.out.scheduled[0].num_computed_before, 8) << async;
  }
}

// A request can be preempted after the step that samples its last token was scheduled: A (4
// tokens, max 10) and B (4 tokens, max 1) prefill in S1 and fill the pool (2 usable blocks). In
// S2, B is skipped (its only token is in flight) and A's decode needs a new block: A preempts the
// last running request, B. When S1's output arrives, B samples its token from the waiting queue,
// stops, and leaves it (upstream's stopped_preempted_reqs).
TEST(Scheduler, AsyncSchedulingAPreemptedRequestStopsFromTheWaitingQueue) {
  AsyncRig x(/*num_blocks=*/3, /*block_size=*/4);
  EngineRequest* a = x.add("a", 4, /*max_tokens=*/10, 0);
  EngineRequest* b = x.add("b", 4, /*max_tokens=*/1, 100);
  SchedulerOutput s1, s2;
  x.scheduler.schedule(&s1);
  ASSERT_EQ(SchedulerRig::ids(s1), (Ids{"a", "b"}));
  x.scheduler.schedule(&s2);
  EXPECT_EQ(SchedulerRig::ids(s2), (Ids{"a"}));
  ASSERT_EQ(SchedulerRig::ids(s2.preempted), (Ids{"b"}));
  EXPECT_EQ(x.waiting(), (Ids{"b"}));
  x.update(s1);
  EXPECT_TRUE(b->finished());
  EXPECT_EQ(b->req->num_output_tokens(), 1);
  EXPECT_EQ(SchedulerRig::ids(x.outcome.finished), (Ids{"b"}));
  EXPECT_TRUE(x.waiting().empty());
  EXPECT_EQ(x.scheduler.num_running(), 1u);
  EXPECT_EQ(a->req->num_output_tokens(), 1);
}

// A connector that loads asynchronously (vLLM's WAITING_FOR_REMOTE_KVS, as a disaggregated-prefill
// connector does; LMCache's loads are synchronous): it answers `external` tokens beyond the local
// hits for the request named `async_id`, to be loaded while that request waits, and no tokens for
// any other.
// Request `async_id` has `external` tokens to load asynchronously; the others have none.
struct AsyncLoadConnector : KvConnector {
  AsyncLoadConnector(std::string id, int64_t tokens) : async_id(std::move(id)), external(tokens) {}
  std::string async_id;
  int64_t external = 0;
  std::vector<std::string> asked;  // requests looked up, in order
  std::optional<Match> get_num_new_matched_tokens(EngineRequest& r, int64_t) override {
    asked.push_back(r.id());
    if (r.id() != async_id) return Match{};
    return Match{external, /*load_async=*/true};
  }
  void update_state_after_alloc(EngineRequest&, const vllm::KVCacheBlocks&, int64_t) override {}
  void build_connector_meta(const SchedulerOutput&) override {}
  void request_finished(EngineRequest&) override {}
};

struct AsyncLoadRig : SchedulerRig {
  static SchedulerConfig config() {
    SchedulerConfig c = base_config(4);
    c.recompute_kv_load_failures = true;
    return c;
  }
  explicit AsyncLoadRig(AsyncLoadConnector* c)
      : SchedulerRig(options(32, 4, /*caching=*/true), config(), c) {}
  size_t blocks_of(const EngineRequest* r) { return kv.get_block_ids(r->id()).at(0).size(); }
};

// vLLM's scheduler with an asynchronous load: the request gets blocks for its external tokens
// and waits, unscheduled and looked up only once, until the connector reports them received;
// then it computes the rest, and a request behind it in the same step hits its loaded blocks.
// a: 10 prompt tokens, 8 of them loaded (2 blocks of 4); b: the same prompt.
TEST(Scheduler, AnAsynchronousLoadWaitsForItsBlocksThenCachesThemAndComputesTheRest) {
  AsyncLoadConnector c("a", 8);
  AsyncLoadRig x(&c);
  EngineRequest* a = x.add("a", 10, 4, 0);
  const SchedulerOutput& s1 = x.step();
  EXPECT_TRUE(s1.scheduled.empty());
  EXPECT_EQ(a->status, RequestStatus::kWaitingForRemoteKvs);
  EXPECT_EQ(x.blocks_of(a), 2u);            // the external tokens' blocks, allocated before loading
  EXPECT_TRUE(x.step().scheduled.empty());  // not received yet: skipped again
  EXPECT_EQ(c.asked, (Ids{"a"}));           // looked up once
  x.scheduler.finish_recving(a);
  x.add("b", 10, 4, 0);
  const SchedulerOutput& s3 = x.step();
  ASSERT_EQ(SchedulerRig::ids(s3), (Ids{"a", "b"}));
  EXPECT_EQ(s3.scheduled[0].num_computed_before, 8);
  EXPECT_EQ(s3.scheduled[0].num_new_tokens, 2);
  EXPECT_EQ(s3.scheduled[1].num_computed_before, 8);  // a's loaded blocks, cached
  EXPECT_EQ(s3.scheduled[1].num_new_tokens, 2);
  EXPECT_EQ(c.asked, (Ids{"a", "b"}));  // a is not looked up again
}

// A load that brings the whole prompt still leaves its last token to compute (its logits are
// needed); a failed asynchronous load (policy "recompute") restarts at the first failed block.
TEST(Scheduler, AnAsynchronousLoadLeavesTheLastTokenAndAFailedOneRestartsAtItsFirstBadBlock) {
  {
    AsyncLoadConnector c("a", 8);
    AsyncLoadRig x(&c);
    EngineRequest* a = x.add("a", 8, 4, 0);
    x.step();
    x.scheduler.finish_recving(a);
    const SchedulerOutput& s = x.step();
    ASSERT_EQ(SchedulerRig::ids(s), (Ids{"a"}));
    EXPECT_EQ(s.scheduled[0].num_computed_before, 7);
    EXPECT_EQ(s.scheduled[0].num_new_tokens, 1);
  }
  {
    AsyncLoadConnector c("a", 12);
    AsyncLoadRig x(&c);
    EngineRequest* a = x.add("a", 14, 4, 0);
    x.step();
    const auto blocks = x.kv.get_block_ids("a").at(0);
    ASSERT_EQ(blocks.size(), 3u);
    const std::set<vllm::BlockId> bad = {blocks[1]};
    EXPECT_TRUE(x.scheduler.handle_invalid_blocks(bad).empty());  // no running request failed
    EXPECT_EQ(a->req->num_computed_tokens, 4);
    EXPECT_EQ(a->record.failed_load_tokens, 8);
    x.scheduler.finish_recving(a);
    const SchedulerOutput& s = x.step();
    ASSERT_EQ(SchedulerRig::ids(s), (Ids{"a"}));
    EXPECT_EQ(s.scheduled[0].num_computed_before, 4);
    EXPECT_EQ(s.scheduled[0].num_new_tokens, 10);
  }
}

}  // namespace
}  // namespace kvtwin::sim::engine
