// Scheduler: vLLM v0.17.0's v1 scheduler (vllm/v1/core/sched/scheduler.py), FCFS or priority
// policy, for one serving instance. Every allocation and prefix hit goes through model/vllm's
// KVCacheManager.
//
// Policies (SchedulerConfig::priority_policy): FCFS keeps the waiting queue in arrival order, a
// preempted request goes to its front and skipped requests back to its front. PRIORITY
// (PriorityRequestQueue) keeps it sorted by Request.__lt__ — (priority, arrival time, request id
// as a string) — wherever a request enters it; preemption takes the running request with the
// largest (priority, arrival time), the first such in running order, and when that request was
// already scheduled in this step its tokens go back to the budget (upstream then steps its index
// back; it does not for a victim it skipped, as upstream).
//
// Arrival time: upstream stamps each request with time.time() when it comes in, so two requests
// never share one and the later one is the larger. Traces give times in milliseconds or coarser,
// and many requests share one (the Mooncake traces start with 8 at 0 ms). The simulator's arrival
// time is therefore (trace arrival, trace request index): the trace is sorted by arrival, so
// among equal arrivals the index is the order in which they arrive. Ties taken at face value
// would make the request id decide the waiting order ("10" before "9") and make preemption take
// the first tied request in running order, which has the most work done: each preemption then
// lands on the request that was about to finish, and with a small KV pool (fuzz case: Gemma-3,
// 2,000 blocks, 8 requests at 0 ms) the requests preempted each other in turn for ever.
//
// schedule() — one engine step's batch, in upstream's order:
//   new_step_starts()
//   1. RUNNING requests, in queue order, while tokens remain in the budget:
//        n = num_tokens − num_computed_tokens, capped by long_prefill_token_threshold, the budget
//            and max_model_len − 1 − num_computed_tokens (Mamba "align": block-aligned split);
//        allocate_slots(n); on failure preempt the LAST running request (PRIORITY: see above;
//        recompute: free its blocks, num_computed_tokens = 0, to the FRONT of the waiting queue)
//        and retry; a request that preempts itself is not scheduled and ends the loop.
//   2. WAITING requests, only if nothing was preempted in this step, while the budget lasts and
//      fewer than max_num_seqs run:
//        WAITING_FOR_REMOTE_KVS: ready → cache its loaded blocks and continue, else skip it;
//        num_computed_tokens == 0: local hits = get_computed_blocks(); the KV connector adds
//          external hits (nullopt → skip; async → allocate with delay_cache_blocks and park it
//          in WAITING_FOR_REMOTE_KVS);
//        without chunked prefill a prompt larger than the budget ends the loop;
//        a request whose encoder has not run (num_computed_tokens == 0: new or preempted) runs it
//        with its first chunk, from the step's encoder compute budget; when that budget is short
//        the loop ends;
//        allocate_slots(n, local hits, external tokens, encoder tokens); failure ends the loop.
//      Skipped requests go back to the front of the queue in their original order.
//   3. num_computed_tokens += scheduled tokens for every scheduled request; it samples in this
//      step unless it is still in a prefill chunk (is_prefill_chunk).
//
// Async scheduling (vLLM's AsyncScheduler; the Instance runs the batch queue): each request that
// samples in a step holds one output placeholder until the step's output arrives; a running
// request is scheduled for num_tokens + placeholders − num_computed_tokens tokens, and not at all
// once the tokens in flight reach max_tokens (num_computed + 2 − placeholders ≥ prompt +
// max_tokens). An output fills a placeholder and caches the blocks it completes
// (num_computed − placeholders tokens) unless the request was preempted since; a preempted request
// whose last token was in flight stops from the waiting queue. As upstream, a request whose load
// failed keeps the failed step's placeholder (its output is skipped), and a step scheduled before
// the failure was known still samples for it.
//
// update_from_output() — after the forward pass: every scheduled request that is not still in a
// prefill chunk samples one token (appended to its vLLM Request, which hashes completed blocks);
// it stops at max_tokens or max_model_len, and a stopped request is freed (connector first).
// Requests whose KV connector load failed sample nothing: under kv_load_failure_policy
// "recompute" they recompute the lost tokens; under "fail" (vLLM v0.17's default) their failed
// blocks and every later one leave the prefix cache and they end with an error (FINISHED_ERROR)
// once the step's stopped requests are freed.
//
// Not modelled: speculative decoding, LoRA limits, structured output, pipeline parallelism,
// streaming input.
//
// Threading: single-threaded, owned by one Instance.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <set>
#include <vector>

#include "model/vllm/kv_cache_manager.h"
#include "sim/engine/engine_request.h"
#include "sim/engine/kv_connector.h"

namespace kvtwin::sim::engine {

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 8192;
  int64_t max_num_seqs = 256;
  int64_t long_prefill_token_threshold = 0;
  bool enable_chunked_prefill = true;
  int64_t max_model_len = 131072;
  int block_size = 16;                     // the attention block size (Mamba split, invalid blocks)
  bool mamba_block_aligned_split = false;  // Mamba layers with mamba_cache_mode "align"
  // Encoder inputs (encoder-decoder models) one step may run: vLLM's encoder compute budget,
  // max(max_num_encoder_input_tokens = max_num_batched_tokens, largest encoder input). Encoder
  // tokens do not use the token budget.
  int64_t encoder_compute_budget = 0;
  // kv_load_failure_policy: true = "recompute", false = "fail" (vLLM v0.17's default).
  bool recompute_kv_load_failures = false;
  // vLLM's AsyncScheduler: a step is scheduled before the previous step's output is processed;
  // each sampling request holds one output placeholder per token in flight.
  bool async_scheduling = false;
  // scheduling_policy "priority" (true) or "fcfs" (vLLM's default).
  bool priority_policy = false;
};

struct ScheduledRequest {
  EngineRequest* request = nullptr;
  int64_t num_new_tokens = 0;
  int64_t num_computed_before = 0;  // num_computed_tokens when scheduled (context of the slice)
  int64_t num_encoder_tokens = 0;   // encoder input run in this step
  bool is_new = false;              // first schedule or resumed after preemption
  std::vector<model::vllm::BlockId> new_block_ids;  // running requests: blocks added (group 0)
  // Samples a token in this step: its computed tokens reach its tokens (with placeholders) once
  // the step's tokens are counted (not is_prefill_chunk).
  bool samples = false;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running requests first, then new / resumed
  std::vector<EngineRequest*> preempted;
  // Requests that alone need more blocks than the whole pool (they preempted themselves with
  // every other block free): vLLM would preempt and recompute them forever; they are aborted
  // (record.rejected) and the caller reports them done.
  std::vector<EngineRequest*> rejected;
  int64_t total_num_scheduled_tokens = 0;
  bool empty() const { return scheduled.empty(); }
  // Back to a fresh output, keeping the vectors' capacity (one output is reused step after step).
  void clear() {
    scheduled.clear();
    preempted.clear();
    rejected.clear();
    total_num_scheduled_tokens = 0;
  }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, model::vllm::KVCacheManager* kv, KvConnector* connector);

  void add_request(EngineRequest* r);
  // Fills *out with this step's batch (cleared first; its vectors' capacity is reused).
  void schedule(SchedulerOutput* out);

  // The token each sampling request generates: (request, index of the output token) → token id.
  using TokenFn = std::function<model::vllm::TokenId(const EngineRequest&, int64_t)>;
  struct StepOutcome {
    std::vector<EngineRequest*> sampled;   // produced a token this step
    std::vector<EngineRequest*> finished;  // stopped and freed (a subset of sampled)
    // Ended with an error by a failed KV load (policy "fail"; record.load_error), freed.
    std::vector<EngineRequest*> errored;
    // Back to a fresh outcome, keeping the vectors' capacity.
    void clear() {
      sampled.clear();
      finished.clear();
      errored.clear();
    }
  };
  // `skip`: requests whose loads failed this step (handle_invalid_blocks' result): they sample
  // nothing; under "recompute" they recompute, under "fail" they end with an error after the
  // step's other requests (FINISHED_ERROR: connector told, blocks freed), in running order and
  // then waiting order (upstream iterates a set of ids). *outcome is cleared first.
  void update_from_output(const SchedulerOutput& out, const TokenFn& token,
                          const std::set<EngineRequest*>& skip, StepOutcome* outcome);

  // KV connector feedback (vLLM's finished_recving / invalid block ids).
  void finish_recving(EngineRequest* r) { finished_recving_.insert(r); }
  // Requests whose externally loaded blocks failed: num_computed_tokens drops to the first
  // failed block (sync loads: running requests; async: waiting ones). Under "fail" the first
  // failed block of each sync request and every later block of it are evicted from the prefix
  // cache, and the async requests affected are returned too. Returns the requests to skip (and,
  // under "fail", to end) in update_from_output.
  std::set<EngineRequest*> handle_invalid_blocks(const std::set<model::vllm::BlockId>& invalid);

  // Removes a waiting request that can never be scheduled (larger than the whole pool) and marks
  // it rejected. REQUIRES: r is in the waiting queue and holds no blocks.
  void abort_waiting(EngineRequest* r);
  // The first waiting request the last schedule() neither admitted nor skipped (for a pending
  // lookup or KV load); nullptr when there is none. When that schedule() admitted nothing and
  // nothing runs, admission stopped at it for want of blocks or budget.
  EngineRequest* stalled_request() const { return stalled_; }

  const KvConnector* connector() const { return connector_; }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  const std::deque<EngineRequest*>& waiting() const { return waiting_; }
  const std::vector<EngineRequest*>& running() const { return running_; }
  uint64_t num_preemptions() const { return num_preemptions_; }

 private:
  void schedule_running(SchedulerOutput* out, int64_t* budget);
  void schedule_waiting(SchedulerOutput* out, int64_t* budget);
  bool update_waiting_for_remote_kv(EngineRequest* r);
  void preempt(EngineRequest* r);
  int64_t mamba_block_aligned_split(const EngineRequest& r, int64_t num_new_tokens,
                                    int64_t num_new_local_computed) const;
  // blocks_to_evict (sync loads): each affected request's first failed block and later ones.
  std::set<EngineRequest*> update_requests_with_invalid_blocks(
      const std::vector<EngineRequest*>& requests, const std::set<model::vllm::BlockId>& invalid,
      bool sync, std::set<model::vllm::BlockId>* blocks_to_evict);
  // A request leaving the engine: the connector told first (upstream's _free_request), then its
  // blocks freed; status finished.
  void free_request(EngineRequest* r);
  void remove_waiting(EngineRequest* r);  // REQUIRES: r is in the waiting queue
  // Into the waiting queue: FCFS at the back (add_request) or the front (a preempted or skipped
  // request); PRIORITY at its place in (priority, arrival, request id) order either way.
  void enqueue_waiting(EngineRequest* r, bool front);
  // The running request vLLM's priority policy preempts: max (priority, arrival), first in order.
  EngineRequest* priority_victim() const;
  void finish_with_error(EngineRequest* r);

  SchedulerConfig config_;
  model::vllm::KVCacheManager* kv_;
  KvConnector* connector_;
  std::deque<EngineRequest*> waiting_;
  EngineRequest* stalled_ = nullptr;  // see stalled_request()
  std::vector<EngineRequest*> running_;
  std::set<EngineRequest*> finished_recving_;
  std::set<EngineRequest*> failed_recving_;
  uint64_t num_preemptions_ = 0;
};

}  // namespace kvtwin::sim::engine
