// Instance: one simulated vLLM engine (one tensor-parallel group of GPUs) in virtual time.
//
// The engine loop, as vLLM's EngineCore runs it, one step at a time:
//
//   idle ──(request arrives / a KV load finishes)──▶ schedule()
//     schedule() empty → idle (a waiting request that can never fit while nothing runs is
//                         rejected, so the loop cannot stall)
//     else  step:  [worker: KV loads before the forward pass]
//                  forward pass  (StepModel: roofline or profile)
//                  [worker: KV stores after the forward pass]
//           ──(step time later)──▶ update_from_output() → tokens, finished requests → schedule()
//
// The KV connector's worker side (LMCache loads/stores) plugs in through StepHooks; without one,
// a step costs exactly the step model's time.
//
// Threading: the simulation thread only.
#pragma once

#include <functional>
#include <memory>
#include <unordered_set>
#include <vector>

#include "model/vllm/kv_cache_manager.h"
#include "sim/engine/kv_cache_layout.h"
#include "sim/engine/scheduler.h"
#include "sim/hw/step_model.h"
#include "sim/report/run_recorder.h"
#include "sim/simulator.h"
#include "sim/u64_set.h"
#include "sim/workload/token_synth.h"

namespace kvtwin::sim::engine {

// The worker side of a KV connector: work around each forward pass. begin_step() may start
// transfers and calls `ready(extra_ns)` (asynchronously, through the Simulator) when the forward
// pass may start; `extra_ns` is added to the step's duration (layerwise transfers not hidden by
// compute). end_step() runs after the forward pass and calls `done(failed)` when the step is
// over; `failed` are requests whose loads failed (they recompute instead of sampling).
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  virtual void begin_step(const SchedulerOutput& out, const hw::StepTime& compute,
                          std::function<void(SimDuration extra_ns)> ready) = 0;
  virtual void end_step(const SchedulerOutput& out,
                        std::function<void(const std::set<EngineRequest*>& failed)> done) = 0;
};

struct InstanceContext {
  Simulator* sim = nullptr;
  const hw::StepModel* step_model = nullptr;
  const workload::TokenSynthesizer* tokens = nullptr;
  report::RunRecorder* recorder = nullptr;
  // Called once per request that leaves the instance (finished or rejected).
  std::function<void(EngineRequest*)> on_done;
  bool track_prefix_index = false;  // keep the set of cached block hashes (prefix-aware routing)
};

class Instance {
 public:
  // `connector` (may be null) is the scheduler side of the KV connector; its worker side is set
  // with set_hooks.
  Instance(int id, const scenario::Scenario& s, const KvCacheLayout& layout,
           const InstanceContext& ctx, KvConnector* connector);

  int id() const { return id_; }
  void add_request(EngineRequest* r);
  // Wakes an idle instance (e.g. an async KV load finished).
  void kick();
  void set_hooks(StepHooks* hooks) { hooks_ = hooks; }

  bool idle() const { return !busy_; }
  bool has_unfinished() const { return scheduler_.has_unfinished(); }
  size_t num_running() const { return scheduler_.num_running(); }
  size_t num_waiting() const { return scheduler_.num_waiting(); }
  // Prompt tokens still to compute over all unfinished requests (router load signal).
  int64_t queued_tokens() const;
  double kv_usage() const { return kv_.usage(); }
  uint64_t computed_tokens() const { return computed_tokens_; }
  uint64_t gpu_evictions() const { return kv_.block_pool().num_evicted_blocks(); }

  // Leading block hashes of `hashes` this instance holds in its GPU prefix cache (from its KV
  // events, as the hash stream). Requires track_prefix_index.
  int64_t cached_prefix_blocks(const std::vector<model::vllm::BlockHash>& hashes) const;

  model::vllm::KVCacheManager& kv() { return kv_; }
  Scheduler& scheduler() { return scheduler_; }

 private:
  void try_step();
  void run_forward(SimDuration extra);
  void finish_step(const std::set<EngineRequest*>& failed);
  void drain_events();
  bool reject_stuck_head();
  // A request the scheduler aborted (record.rejected set): it leaves now.
  void done_rejected(EngineRequest* r);

  int id_;
  InstanceContext ctx_;
  model::vllm::KVCacheManager kv_;
  Scheduler scheduler_;
  StepHooks* hooks_ = nullptr;
  bool busy_ = false;
  SimTime step_start_ = 0;
  // The step in flight (busy_): its batch and compute time, kept here until finish_step so that
  // the event callbacks capture only `this`.
  SchedulerOutput step_out_;
  Scheduler::StepOutcome step_outcome_;  // finish_step's, kept for its capacity
  hw::StepTime step_compute_;
  std::vector<hw::StepSlice> slices_;  // scratch
  uint64_t computed_tokens_ = 0;
  U64Set cached_hashes_;                               // low 64 bits of cached block hashes
  std::vector<model::vllm::KvHashEvent> hash_events_;  // drain_events' buffer, kept for capacity
};

// Options of the vLLM KV-cache manager for a scenario; `events`: record the hash stream (for the
// prefix index).
model::vllm::KVCacheManagerOptions kv_cache_manager_options(const scenario::Scenario& s,
                                                            const KvCacheLayout& layout,
                                                            bool events);

}  // namespace kvtwin::sim::engine
