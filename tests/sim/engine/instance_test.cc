// The Instance's engine loop against a scripted KV connector worker side (StepHooks): when each
// batch's loads are in, whether it stores, and when the engine schedules — the orderings a whole
// LMCache run reaches only through faults.
#include "sim/engine/instance.h"

#include <gtest/gtest.h>

#include <memory>
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
                  std::function<void(SimDuration)> ready) override {
    if (begun++ == instant_load) {
      ready(0);
      return;
    }
    sim->schedule_after(100'000, [ready] { ready(0); });
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
  explicit InstanceRig(int tensor_parallel)
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
    instance = std::make_unique<Instance>(0, s, layout, ctx, nullptr);
    hooks.sim = &sim;
    instance->set_hooks(&hooks);
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

}  // namespace
}  // namespace kvtwin::sim::engine
