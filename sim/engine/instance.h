// Instance: one simulated vLLM engine (one tensor-parallel group of GPUs) in virtual time.
//
// Two threads of upstream's engine are modelled: the engine core (schedule, process output) and
// the worker (KV loads, forward pass, KV stores), which runs the batches it is given in order.
//
// Synchronous loop (vllm.async_scheduling = false; EngineCore.step):
//
//   idle ──(request arrives)──▶ schedule()  [+ its connector lookups: StepHooks::run_lookups]
//     schedule() empty → sleep 1 ms and poll again while requests remain (a waiting request
//                         that can never fit while nothing runs is rejected, so the loop cannot
//                         stall), else idle
//     else  batch:  [worker: KV loads before the forward pass]
//                   forward pass  (StepModel: roofline or profile)
//                   [worker: KV stores after the forward pass]
//           ──(its end)──▶ update_from_output() → tokens, finished requests → schedule()
//
// Asynchronous scheduling (vllm.async_scheduling = true, vLLM v0.17's default;
// EngineCore.step_with_batch_queue with a batch queue of 2): the engine core schedules until two
// batches are in flight or a schedule comes back empty, then waits for the oldest batch, processes
// its output, and schedules again. So step N+1 is scheduled while step N runs (its requests' next
// tokens as placeholders), a request that arrives during step N is first scheduled in step N+2,
// and step N's finished requests keep their blocks and seats until step N+1 is scheduled. The
// worker starts a batch when the one before it ended and the lookups of the schedule that built
// it are done. With one GPU (gpu.tensor_parallel = 1) vLLM's uni executor runs execute_model on
// the engine core's thread: after a schedule the engine waits for the batch's KV loads, or for
// the whole batch when a request may save (StepHooks::newest_blocking), and a batch done by then
// is processed before the next schedule; with several GPUs (mp executor) the workers run it.
// Upstream's empty batches (a schedule that found nothing while a batch runs) only
// order the queue; they are not materialised: the result is the same.
//
// The engine core's own CPU time (vllm.schedule_cpu_us, vllm.output_cpu_us; 0 by default): after a
// schedule that built a batch (and its lookups) the engine is busy schedule_cpu_us before the
// batch may start; a done batch's output is applied output_cpu_us after the engine takes it up.
// The synchronous loop pays both every step; under async scheduling the engine spends them while
// the worker runs the batch before.
//
// Both loops, as vLLM's busy loop: arrivals wait in an input queue until the engine core next
// looks (a request arriving during a step is not "unfinished" until then); a schedule's connector
// lookups (Redis EXISTS round trips, async loading's backoff sleeps) block the engine core and
// the batch it built; an engine iteration that scheduled nothing sleeps 1 ms before the next
// poll when requests remain. Polls that would find nothing are not run: after one that found
// nothing, the engine waits for an event (arrival, KV load, lookup answer: kick()) and wakes at
// the first poll, repeating that one's lookups and sleep, that begins after it.
//
// The KV connector's worker side (LMCache loads/stores) plugs in through StepHooks; without one,
// a batch costs exactly the step model's time.
//
// Threading: the simulation thread only.
#pragma once

#include <array>
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

// The worker side of a KV connector: work around each forward pass, one batch at a time, in the
// order the batches were scheduled. begin_step() may start transfers and calls `ready()` when the
// forward pass may start (later, through the Simulator, or from within begin_step when nothing
// has to arrive first: layerwise steps, loads that moved nothing). end_step() runs after the
// forward pass and calls `done(invalid)` when the step is over; `invalid` are the blocks whose
// loads failed (the engine hands them to Scheduler::handle_invalid_blocks when it processes the
// step's output). run_lookups(), right after every schedule, runs the time that schedule's
// connector lookups block the engine core, and calls `done` when it is over (at once, from
// within, when there is none).
class StepHooks {
 public:
  virtual ~StepHooks() = default;
  virtual void begin_step(const SchedulerOutput& out, const hw::StepTime& compute,
                          std::function<void()> ready) = 0;
  virtual void end_step(
      const SchedulerOutput& out,
      std::function<void(const std::set<model::vllm::BlockId>& invalid)> done) = 0;
  virtual void run_lookups(std::function<void()> done) = 0;
  // What the newest batch's connector work (its metadata built, not yet begun) blocks in the
  // caller of execute_model: loads (start_load_kv waits for the previous forward pass and its
  // copies), stores (wait_for_save waits for this forward pass and its copies; in layerwise mode
  // whenever it loads or stores).
  struct Blocking {
    bool loads = false;
    bool stores = false;
  };
  virtual Blocking newest_blocking() const = 0;
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

  bool has_unfinished() const { return !inbox_.empty() || scheduler_.has_unfinished(); }
  size_t num_running() const { return scheduler_.num_running(); }
  size_t num_waiting() const { return scheduler_.num_waiting() + inbox_.size(); }
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
  // A scheduled batch, from its schedule to the processing of its output.
  struct Batch {
    SchedulerOutput out;
    hw::StepTime compute;
    SimTime started = -1;  // the worker began it (a batch counts once its lookups are done)
    // One GPU (uni executor): execute_model, on the engine core's thread, has returned; with
    // connector stores it returns once the batch is done, else once its loads are in.
    bool returned = true;
    bool returns_when_done = false;
    bool done = false;                       // the worker finished it
    std::set<model::vllm::BlockId> invalid;  // blocks whose loads failed (from the hooks)
  };
  // The engine core, free now: schedules while batches may be added, else processes the oldest
  // batch's output once it is done; returns when it must wait (a batch, lookups, an arrival).
  void engine_loop();
  // Waits for the oldest batch and processes it; false when the engine must wait (for the batch,
  // or in its 1-ms sleep after an iteration that scheduled nothing).
  bool process_oldest();
  void drain_inbox();
  // One schedule into `b` (cleared); rejected requests leave.
  void schedule_into(Batch* b);
  void sleep_until(SimTime t);    // the engine sleeps, then polls (engine_loop) at t
  void busy_cpu(SimDuration ns);  // the engine core computes for ns, then engine_loop()
  void start_worker();  // begins the next batch if the worker is free and the batch may start
  void run_forward();
  void batch_returned(Batch* b);  // uni executor: execute_model of b returned
  void resume_after_execute();
  void worker_done(const std::set<model::vllm::BlockId>& invalid);
  void lookups_done();
  void process_output(Batch* b);  // update_from_output and what follows; frees b's slot
  bool reject_stuck_head();
  // A request leaves the instance (finished, failed or rejected; record set): reported done now,
  // or once the last batch in flight that holds it has been processed.
  void leave(EngineRequest* r);
  void drain_events();

  Batch& batch(int i) { return ring_[static_cast<size_t>((head_ + i) % kMaxBatches)]; }

  int id_;
  InstanceContext ctx_;
  model::vllm::KVCacheManager kv_;
  Scheduler scheduler_;
  StepHooks* hooks_ = nullptr;
  int max_in_flight_ = 1;  // 2 under async scheduling (upstream's batch queue)
  // vLLM's uni executor (one GPU: gpu.tensor_parallel = 1) runs execute_model, KV connector work
  // included, on the engine core's thread; the mp executor (several) runs it in worker processes.
  bool uni_executor_ = false;
  bool in_run_lookups_ = false;
  bool hold_resume_ = false;           // worker_done is on the stack: it resumes the engine itself
  bool after_schedule_ = false;        // engine_loop() resumes after a schedule's lookups
  bool ran_none_ = false;              // this engine iteration scheduled nothing
  bool waiting_oldest_ = false;        // engine_loop() resumes by processing the oldest batch
  bool schedule_cpu_due_ = false;      // the schedule just made built a batch: its CPU time next
  bool output_cpu_spent_ = false;      // the oldest batch's output CPU time has run
  bool kicked_ = false;                // kick() since the last schedule began
  std::vector<EngineRequest*> inbox_;  // arrived, not yet seen by the engine core
  // The engine core: kFree while engine_loop runs, kIdle with no unfinished request (an arrival
  // wakes it at once), kWaitBatch waiting for the oldest batch, kWaitLookups for its schedule's
  // lookups, kWaitExecute in execute_model (uni executor), kBusyCpu in its own CPU time (a
  // schedule's or an output's), kSleeping in the 1-ms sleep before a poll, kPolling between polls
  // that find nothing (it sleeps until the poll after the next kick()).
  enum class EngineState {
    kIdle,
    kFree,
    kWaitBatch,
    kWaitLookups,
    kWaitExecute,
    kBusyCpu,
    kSleeping,
    kPolling
  } engine_ = EngineState::kIdle;
  SimDuration schedule_cpu_ns_ = 0;                  // vllm.schedule_cpu_us
  SimDuration output_cpu_ns_ = 0;                    // vllm.output_cpu_us
  static constexpr SimDuration kPollNs = 1'000'000;  // upstream's time.sleep(0.001)
  SimTime schedule_began_ = 0;         // the last schedule began (its lookups may have run since)
  SimTime poll_origin_ = 0;            // kPolling: the poll that found nothing began
  SimDuration poll_period_ = kPollNs;  // kPolling: that poll's lookups + the 1-ms sleep
  bool woke_ = false;                  // the next engine_loop() is a poll after a sleep
  // Batches scheduled and not yet processed, oldest first (ring, reused step after step so that
  // their vectors keep their capacity).
  static constexpr int kMaxBatches = 2;
  std::array<Batch, kMaxBatches> ring_;
  int head_ = 0;
  int count_ = 0;
  int worker_ = -1;  // the batch (index from the oldest) the worker runs, -1: none
  Scheduler::StepOutcome step_outcome_;   // process_output's, kept for its capacity
  std::vector<hw::StepSlice> slices_;     // scratch
  std::vector<EngineRequest*> released_;  // scratch
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
