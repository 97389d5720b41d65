// The Instance's engine loop against a scripted KV connector worker side (StepHooks): when each
// batch's loads are in, whether it stores, and when the engine schedules — the orderings a whole
// LMCache run reaches only through faults.
#include "sim/engine/instance.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/vllm/request_block_hasher.h"

namespace kvtwin::sim::engine {
namespace {

namespace vllm = model::vllm;

// Every step takes 1 ms.
struct OneMsSteps final : hw::StepModel {
  hw::StepTime step_time(const std::vector<hw::StepSlice>&) const override {
    hw::StepTime t;
    t.total_ns = 1'000'000;
    return t;
  }
};

// Batch k (in schedule order) loads unless it is `storing`, which stores instead. Loads take
// 0.1 ms, except batch `instant_load`, whose `ready` fires from within begin_step (a retrieve
// that moved nothing or stalled). Stores finish at the forward pass's end.
struct ScriptedHooks final : StepHooks {
  Simulator* sim = nullptr;
  int storing = -1;
  int instant_load = -1;
  int built = 0;
  int begun = 0;
  std::vector<SimTime> schedules;  // when each schedule's lookups ran

  void begin_step(const SchedulerOutput&, const hw::StepTime&,
                  std::function<void()> ready) override {
    if (begun++ == instant_load) {
      ready();
      return;
    }
    sim->schedule_after(100'000, [ready] { ready(); });
  }
  void end_step(const SchedulerOutput&,
                std::function<void(const std::set<vllm::BlockId>&)> done) override {
    sim->schedule_after(0, [done] { done({}); });
  }
  void run_lookups(std::function<void()> done) override {
    schedules.push_back(sim->now());
    done();
  }
  Blocking newest_blocking() const override {
    Blocking b;
    const int k = const_cast<ScriptedHooks*>(this)->built++;
    b.stores = k == storing;
    b.loads = !b.stores;
    return b;
  }
};

struct InstanceRig {
  // `tweak` adjusts the scenario before the instance is built; without `with_hooks` a batch costs
  // exactly its step time.
  explicit InstanceRig(int tensor_parallel,
                       const std::function<void(scenario::Scenario&)>& tweak = {},
                       bool with_hooks = true)
      : hasher(16, vllm::BlockHasher(vllm::HashFn::kSha256Cbor,
                                     vllm::none_hash(vllm::HashFn::kSha256Cbor, "0"))),
        tokens(1, 1000) {
    s.vllm.async_scheduling = true;
    s.vllm.max_model_len = 1024;
    s.gpu.tensor_parallel = tensor_parallel;
    vllm::KVCacheSpec spec;
    spec.kind = vllm::KVCacheSpecKind::kFullAttention;
    spec.block_size = 16;
    spec.num_kv_heads = 1;
    spec.head_size = 8;
    spec.dtype = "bfloat16";
    layout.config.num_blocks = 256;
    layout.config.kv_cache_groups.push_back({{"l"}, spec});
    layout.hash_block_size = 16;
    layout.attention_block_size = 16;
    ctx.sim = &sim;
    ctx.step_model = &steps;
    ctx.tokens = &tokens;
    ctx.on_done = [this](EngineRequest* r) { finished.push_back({r, sim.now()}); };
    if (tweak) tweak(s);
    instance = std::make_unique<Instance>(0, s, layout, ctx, nullptr);
    hooks.sim = &sim;
    if (with_hooks) instance->set_hooks(&hooks);
  }
  // One request: a 32-token prompt and `outputs` tokens, arriving at 0.
  void run(int64_t outputs) {
    std::vector<vllm::TokenId> t;
    for (int i = 0; i < 32; ++i) t.push_back(i);
    vllm::RequestOptions o;
    o.max_tokens = outputs;
    request = std::make_unique<EngineRequest>();
    request->req = std::make_unique<vllm::Request>("a", std::move(t), o, &hasher);
    sim.schedule_at(0, [this] { instance->add_request(request.get()); });
    sim.run();
  }

  scenario::Scenario s;
  KvCacheLayout layout;
  Simulator sim;
  OneMsSteps steps;
  vllm::RequestBlockHasher hasher;
  workload::TokenSynthesizer tokens;
  InstanceContext ctx;
  ScriptedHooks hooks;
  std::unique_ptr<Instance> instance;
  std::unique_ptr<EngineRequest> request;
  std::vector<std::pair<EngineRequest*, SimTime>> finished;
};

// One GPU (uni executor): the engine waits in execute_model for a batch's loads, or for the whole
// batch when it stores. Batch 1's loads are in at once, at 1.1 ms, when batch 0 ends; batch 2,
// scheduled then, stores, so the next schedule waits for batch 2's end (3.2 ms), even though the
// worker began batch 2 from within batch 0's completion.
//   schedules: 0 (b0), 0.1 (b1: b0's loads in), 1.1 (b2: b1's loads in at once), 3.2, 3.3, ...
TEST(Instance, OneGpuWaitsForAStoringBatchWhoseLoadsEndedWithinThePreviousBatchsEnd) {
  InstanceRig x(/*tensor_parallel=*/1);
  x.hooks.instant_load = 1;
  x.hooks.storing = 2;
  x.run(/*outputs=*/6);
  ASSERT_GE(x.hooks.schedules.size(), 4u);
  EXPECT_EQ(x.hooks.schedules[0], 0);
  EXPECT_EQ(x.hooks.schedules[1], 100'000);
  EXPECT_EQ(x.hooks.schedules[2], 1'100'000);
  EXPECT_EQ(x.hooks.schedules[3], 3'200'000);
  ASSERT_EQ(x.finished.size(), 1u);
  EXPECT_EQ(x.request->req->num_output_tokens(), 6);
}

// Several GPUs (mp executor): the workers do that work, and the engine schedules the next batch
// as soon as one batch is in flight (0, 0, then at each batch's end).
TEST(Instance, SeveralGpusScheduleTheNextBatchAtOnce) {
  InstanceRig x(/*tensor_parallel=*/2);
  x.hooks.storing = 2;
  x.run(/*outputs=*/6);
  ASSERT_GE(x.hooks.schedules.size(), 3u);
  EXPECT_EQ(x.hooks.schedules[0], 0);
  EXPECT_EQ(x.hooks.schedules[1], 0);
  EXPECT_EQ(x.hooks.schedules[2], 1'100'000);
  ASSERT_EQ(x.finished.size(), 1u);
}

// The engine core's CPU time (vllm.schedule_cpu_us 0.3 ms, vllm.output_cpu_us 0.2 ms), 1-ms steps,
// one request with 4 output tokens, no connector:
//   synchronous: schedule 0, +0.3 CPU, step 0.3-1.3, +0.2 CPU: token 1 at 1.5; each step adds
//     1.5 ms: tokens at 1.5, 3.0, 4.5, 6.0.
//   async: step k+1 is scheduled (and its 0.3 ms spent) while step k runs, and step k's output
//     (0.2 ms) is processed while step k+1 runs: steps 0.3-1.3, 1.3-2.3, 2.3-3.3, 3.3-4.3, tokens
//     at 1.5, 2.5, 3.5, 4.5: only the first step's CPU time shows.
//   Without CPU time both loops give tokens at 1, 2, 3, 4 ms.
TEST(Instance, TheEngineCoresCpuTimeIsOnTheSynchronousPathAndHiddenUnderAsyncScheduling) {
  struct Case {
    bool async;
    double schedule_us, output_us;
    SimTime first, finish;
  };
  for (const Case& c :
       {Case{false, 300, 200, 1'500'000, 6'000'000}, Case{true, 300, 200, 1'500'000, 4'500'000},
        Case{false, 0, 0, 1'000'000, 4'000'000}, Case{true, 0, 0, 1'000'000, 4'000'000}}) {
    InstanceRig x(
        /*tensor_parallel=*/2,
        [&](scenario::Scenario& s) {
          s.vllm.async_scheduling = c.async;
          s.vllm.schedule_cpu_us = c.schedule_us;
          s.vllm.output_cpu_us = c.output_us;
        },
        /*with_hooks=*/false);
    x.run(/*outputs=*/4);
    SCOPED_TRACE(std::string(c.async ? "async" : "sync") + " cpu " + std::to_string(c.schedule_us) +
                 "/" + std::to_string(c.output_us));
    ASSERT_EQ(x.finished.size(), 1u);
    EXPECT_EQ(x.request->req->num_output_tokens(), 4);
    EXPECT_EQ(x.request->record.first_token, c.first);
    EXPECT_EQ(x.request->record.finish, c.finish);
    EXPECT_EQ(x.finished[0].second, c.finish);
  }
}

// The schedule's CPU time follows its connector lookups and delays its batch, not the lookups:
// with one GPU the engine schedules at 0, spends 0.3 ms, the batch's loads (0.1 ms) end at 0.4,
// and the next schedule (its lookups at once) comes then. Batch 0 runs 0.4-1.4; the engine, in
// batch 1's execute_model until its loads are in (1.5), then puts out batch 0's token.
TEST(Instance, AScheduleSpendsItsCpuTimeAfterItsLookupsAndBeforeItsBatch) {
  InstanceRig x(/*tensor_parallel=*/1, [](scenario::Scenario& s) { s.vllm.schedule_cpu_us = 300; });
  x.run(/*outputs=*/3);
  ASSERT_GE(x.hooks.schedules.size(), 2u);
  EXPECT_EQ(x.hooks.schedules[0], 0);
  EXPECT_EQ(x.hooks.schedules[1], 400'000);
  ASSERT_EQ(x.finished.size(), 1u);
  EXPECT_EQ(x.request->record.first_token, 1'500'000);
}

}  // namespace
}  // namespace kvtwin::sim::engine
