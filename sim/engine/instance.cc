#include "sim/engine/instance.h"

#include <algorithm>
#include <cmath>

#include "model/check.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::engine {

model::vllm::KVCacheManagerOptions kv_cache_manager_options(const scenario::Scenario& s,
                                                            const KvCacheLayout& layout,
                                                            bool events) {
  model::vllm::KVCacheManagerOptions o;
  o.kv_cache_config = layout.config;
  o.max_model_len = s.vllm.max_model_len;
  o.hash_block_size = layout.hash_block_size;
  o.enable_caching = layout.enable_caching;
  o.log_stats = false;
  // The prefix index needs only which hashes come and go: the hash stream, not vLLM's events.
  o.record_hash_events = events;
  return o;
}

namespace {

SchedulerConfig scheduler_config(const scenario::Scenario& s, const KvCacheLayout& layout) {
  SchedulerConfig c;
  c.max_num_batched_tokens = scenario::effective_max_num_batched_tokens(s);
  c.max_num_seqs = scenario::effective_max_num_seqs(s);
  c.long_prefill_token_threshold = s.vllm.long_prefill_token_threshold;
  c.enable_chunked_prefill = s.vllm.enable_chunked_prefill;
  if (s.model.encoder_layers > 0) {
    // vLLM's SchedulerConfig turns both off for encoder-decoder models.
    c.enable_chunked_prefill = false;
    c.long_prefill_token_threshold = 0;
    c.encoder_compute_budget = std::max<int64_t>(c.max_num_batched_tokens, s.model.encoder_tokens);
  }
  c.max_model_len = s.vllm.max_model_len;
  c.block_size = layout.attention_block_size;
  c.recompute_kv_load_failures = s.vllm.kv_load_failure_policy == "recompute";
  c.async_scheduling = s.vllm.async_scheduling;
  c.priority_policy = s.vllm.scheduling_policy == "priority";
  // The layout holds a Mamba group only for a model with Mamba layers, in the mode vLLM runs.
  c.mamba_block_aligned_split =
      std::any_of(layout.config.kv_cache_groups.begin(), layout.config.kv_cache_groups.end(),
                  [](const model::vllm::KVCacheGroupSpec& g) {
                    return g.kv_cache_spec.kind == model::vllm::KVCacheSpecKind::kMamba &&
                           g.kv_cache_spec.mamba_cache_mode == model::vllm::MambaCacheMode::kAlign;
                  });
  return c;
}

}  // namespace

Instance::Instance(int id, const scenario::Scenario& s, const KvCacheLayout& layout,
                   const InstanceContext& ctx, KvConnector* connector)
    : id_(id),
      ctx_(ctx),
      kv_(kv_cache_manager_options(s, layout, /*events=*/ctx.track_prefix_index)),
      scheduler_(scheduler_config(s, layout), &kv_, connector),
      max_in_flight_(s.vllm.async_scheduling ? 2 : 1),
      uni_executor_(s.gpu.tensor_parallel == 1),
      schedule_cpu_ns_(static_cast<SimDuration>(std::llround(s.vllm.schedule_cpu_us * 1e3))),
      output_cpu_ns_(static_cast<SimDuration>(std::llround(s.vllm.output_cpu_us * 1e3))) {}

void Instance::add_request(EngineRequest* r) {
  r->instance = id_;
  r->record.instance = id_;
  // Upstream's input queue: the engine core adds it to the scheduler when it next looks.
  inbox_.push_back(r);
  kick();
}

void Instance::kick() {
  kicked_ = true;
  if (engine_ == EngineState::kIdle) {
    engine_loop();
  } else if (engine_ == EngineState::kPolling) {
    // The engine notices at its next poll: polls repeat the one that found nothing (its
    // lookups, then the 1-ms sleep) until one begins after the event.
    const SimTime now = ctx_.sim->now();
    const SimDuration polls =
        std::max<SimDuration>(1, (now - poll_origin_ + poll_period_ - 1) / poll_period_);
    const SimTime next = poll_origin_ + polls * poll_period_;
    // The repeated polls' lookups block the engine until the next one starts (their pending
    // checks only sleep): it schedules then.
    sleep_until(next);
  }
}

void Instance::sleep_until(SimTime t) {
  engine_ = EngineState::kSleeping;
  ctx_.sim->schedule_at(t, [this] {
    woke_ = true;
    engine_loop();
  });
}

void Instance::busy_cpu(SimDuration ns) {
  engine_ = EngineState::kBusyCpu;
  ctx_.sim->schedule_after(ns, [this] { engine_loop(); });
}

void Instance::drain_inbox() {
  for (EngineRequest* r : inbox_) scheduler_.add_request(r);
  inbox_.clear();
}

int64_t Instance::queued_tokens() const {
  int64_t n = 0;
  for (const EngineRequest* r : inbox_) n += r->req->num_tokens();
  for (const EngineRequest* r : scheduler_.waiting())
    n += r->req->num_tokens() - r->req->num_computed_tokens;
  for (const EngineRequest* r : scheduler_.running())
    n += std::max<int64_t>(0, r->req->num_prompt_tokens() - r->req->num_computed_tokens);
  return n;
}

void Instance::engine_loop() {
  engine_ = EngineState::kFree;
  while (true) {
    if (!after_schedule_) {
      if (waiting_oldest_ || count_ == max_in_flight_) {
        if (!process_oldest()) return;
        continue;
      }
      drain_inbox();
      kicked_ = false;
      schedule_began_ = ctx_.sim->now();
      schedule_into(&batch(count_));
      after_schedule_ = true;
      schedule_cpu_due_ = schedule_cpu_ns_ > 0 && !batch(count_).out.empty();
      if (hooks_) {
        // The schedule's connector lookups block the engine core (and its batch) first.
        engine_ = EngineState::kWaitLookups;
        in_run_lookups_ = true;
        hooks_->run_lookups([this] { lookups_done(); });
        in_run_lookups_ = false;
        if (engine_ == EngineState::kWaitLookups) return;  // lookups_done() resumes here
      }
    }
    if (std::exchange(schedule_cpu_due_, false)) {
      busy_cpu(schedule_cpu_ns_);  // the rest of the schedule: its batch starts after it
      return;
    }
    after_schedule_ = false;
    Batch& b = batch(count_);
    if (!b.out.empty()) {
      woke_ = false;
      if (uni_executor_ && hooks_) {
        // execute_model runs here: the engine waits for the batch's loads, or for the whole
        // batch when it may store (upstream's copies synchronise their streams).
        const StepHooks::Blocking blocking = hooks_->newest_blocking();
        b.returned = !blocking.loads && !blocking.stores;
        b.returns_when_done = blocking.stores;
      }
      ++count_;
      start_worker();
      if (!b.returned) {
        engine_ = EngineState::kWaitExecute;
        return;  // batch_returned() resumes
      }
      // With the oldest batch already done, upstream processes it before it schedules again.
      if (batch(0).done) waiting_oldest_ = true;
      continue;
    }
    if (count_ > 0) {
      // Upstream queues an empty batch, waits for the oldest, processes it, then sleeps.
      ran_none_ = true;
      waiting_oldest_ = true;
      if (!process_oldest()) return;
      continue;
    }
    if (reject_stuck_head()) {
      woke_ = false;  // a request left: the next empty schedule sleeps before it polls again
      continue;
    }
    if (!scheduler_.has_unfinished()) {
      woke_ = false;
      if (!inbox_.empty()) continue;  // upstream takes its inputs before it waits for more
      engine_ = EngineState::kIdle;   // blocks on its input queue: an arrival wakes it at once
      return;
    }
    if (std::exchange(woke_, false) && !kicked_) {
      // A poll found nothing either and nothing happened since it began: only an event (an
      // arrival, a KV load, a lookup answer) can change that, and the engine sees it at the next
      // poll after it (kick()).
      engine_ = EngineState::kPolling;
      poll_origin_ = schedule_began_;
      poll_period_ = ctx_.sim->now() - schedule_began_ + kPollNs;
      return;
    }
    sleep_until(ctx_.sim->now() + kPollNs);
    return;
  }
}

bool Instance::process_oldest() {
  if (!batch(0).done) {
    waiting_oldest_ = true;
    engine_ = EngineState::kWaitBatch;
    return false;  // worker_done() resumes
  }
  if (output_cpu_ns_ > 0 && !std::exchange(output_cpu_spent_, true)) {
    waiting_oldest_ = true;
    busy_cpu(output_cpu_ns_);  // update_from_output: the step's tokens are out after it
    return false;
  }
  output_cpu_spent_ = false;
  waiting_oldest_ = false;
  process_output(&batch(0));
  // An engine iteration that scheduled nothing sleeps 1 ms when requests remain in the
  // scheduler (those still in the input queue do not count).
  if (std::exchange(ran_none_, false) && scheduler_.has_unfinished()) {
    sleep_until(ctx_.sim->now() + kPollNs);
    return false;
  }
  return true;
}

void Instance::schedule_into(Batch* b) {
  SchedulerOutput& out = b->out;
  scheduler_.schedule(&out);
  drain_events();
  const SimTime now = ctx_.sim->now();
  for (EngineRequest* r : out.rejected) {
    r->record.finish = now;
    leave(r);
  }
  out.rejected.clear();
  if (out.empty()) return;
  b->started = -1;
  b->done = false;
  b->returned = true;
  b->returns_when_done = false;
  b->invalid.clear();
  slices_.clear();
  for (const ScheduledRequest& s : out.scheduled) {
    slices_.push_back(hw::StepSlice{s.num_new_tokens, s.num_computed_before, s.num_encoder_tokens});
    s.request->in_flight_batches += 1;
    if (s.request->record.first_scheduled < 0) s.request->record.first_scheduled = now;
  }
  b->compute = ctx_.step_model->step_time(slices_);
}

void Instance::lookups_done() {
  KVTWIN_CHECK(engine_ == EngineState::kWaitLookups);
  engine_ = EngineState::kFree;
  if (!in_run_lookups_) engine_loop();  // else engine_loop() goes on by itself
}

void Instance::start_worker() {
  if (worker_ >= 0) return;
  for (int i = 0; i < count_; ++i) {
    Batch& b = batch(i);
    if (b.started >= 0) continue;
    worker_ = i;
    b.started = ctx_.sim->now();
    if (hooks_) {
      hooks_->begin_step(b.out, b.compute, [this] { run_forward(); });
    } else {
      run_forward();
    }
    return;
  }
}

void Instance::batch_returned(Batch* b) {
  if (b->returned) return;
  b->returned = true;
  // The engine waits in execute_model for the newest batch only; worker_done resumes it itself.
  if (engine_ == EngineState::kWaitExecute && !hold_resume_) resume_after_execute();
}

void Instance::run_forward() {
  Batch& b = batch(worker_);
  // Its loads are in: an execute_model that does not store returns (the forward pass is queued).
  if (!b.returns_when_done) batch_returned(&b);
  ctx_.sim->schedule_after(b.compute.total_ns, [this] {
    if (hooks_) {
      hooks_->end_step(batch(worker_).out, [this](const std::set<model::vllm::BlockId>& invalid) {
        worker_done(invalid);
      });
    } else {
      worker_done({});
    }
  });
}

void Instance::worker_done(const std::set<model::vllm::BlockId>& invalid) {
  Batch& b = batch(worker_);
  worker_ = -1;
  b.done = true;
  b.invalid = invalid;
  const SimTime now = ctx_.sim->now();
  computed_tokens_ += static_cast<uint64_t>(b.out.total_num_scheduled_tokens);
  if (ctx_.recorder)
    ctx_.recorder->on_step(id_, b.started, now - b.started, b.out.total_num_scheduled_tokens,
                           static_cast<int64_t>(b.out.scheduled.size()));
  b.returned = true;  // an execute_model that waited for the whole batch returns now
  // The worker goes on with the next batch at once (its loads may be in at once too: the engine
  // is resumed below, once); the engine core processes this one's output when it waits for it.
  hold_resume_ = true;
  start_worker();  // `b` may not be used after this
  hold_resume_ = false;
  if (engine_ == EngineState::kWaitBatch) {
    engine_loop();
  } else if (engine_ == EngineState::kWaitExecute && batch(count_ - 1).returned) {
    resume_after_execute();
  }
}

void Instance::resume_after_execute() {
  // The oldest batch, if done, is processed before the next schedule.
  if (batch(0).done) waiting_oldest_ = true;
  engine_loop();
}

void Instance::process_output(Batch* b) {
  KVTWIN_CHECK(b == &batch(0) && b->done);
  const SchedulerOutput& out = b->out;
  SimTime now = ctx_.sim->now();
  std::set<EngineRequest*> failed;
  if (!b->invalid.empty()) failed = scheduler_.handle_invalid_blocks(b->invalid);
  const workload::TokenSynthesizer* synth = ctx_.tokens;
  Scheduler::StepOutcome& outcome = step_outcome_;
  scheduler_.update_from_output(
      out,
      [synth](const EngineRequest& r, int64_t i) { return synth->output_token(r.record.index, i); },
      failed, &outcome);
  drain_events();
  for (EngineRequest* r : outcome.sampled) {
    if (r->record.first_token < 0) {
      r->record.first_token = now;
    } else if (ctx_.recorder && !r->record.warmup) {
      r->itl.push_back(now - r->last_token);
    }
    r->last_token = now;
  }
  // This batch no longer holds its requests: those that left while it was in flight go now.
  released_.clear();
  for (const ScheduledRequest& s : out.scheduled) {
    EngineRequest* r = s.request;
    if (--r->in_flight_batches == 0 && r->done_deferred) released_.push_back(r);
  }
  for (const auto* done : {&outcome.finished, &outcome.errored}) {
    for (EngineRequest* r : *done) {
      r->record.finish = now;
      r->record.output_tokens = r->req->num_output_tokens();
      leave(r);
    }
  }
  head_ = (head_ + 1) % kMaxBatches;
  --count_;
  if (worker_ >= 0) --worker_;
  for (EngineRequest* r : released_) ctx_.on_done(r);
}

bool Instance::reject_stuck_head() {
  // Nothing runs and nothing could be scheduled. If admission stopped at a request for want of
  // blocks or budget while no request holds blocks (none runs, none waits for a KV load), the pool
  // is as free as it will ever be: that request can never fit. Reject it, as vLLM would otherwise
  // stall. Requests skipped for a pending lookup do not change this (they hold no blocks), and
  // their answers kick the instance; a KV load's completion does too.
  if (scheduler_.num_running() > 0 || scheduler_.num_waiting() == 0) return false;
  for (const EngineRequest* r : scheduler_.waiting())
    if (r->status == RequestStatus::kWaitingForRemoteKvs) return false;
  EngineRequest* stuck = scheduler_.stalled_request();
  if (stuck == nullptr) return false;
  scheduler_.abort_waiting(stuck);
  drain_events();
  stuck->record.finish = ctx_.sim->now();
  leave(stuck);
  return true;
}

void Instance::leave(EngineRequest* r) {
  if (r->in_flight_batches > 0) {
    r->done_deferred = true;
    return;
  }
  ctx_.on_done(r);
}

void Instance::drain_events() {
  if (!ctx_.track_prefix_index) return;
  kv_.take_hash_events(&hash_events_);
  // A prefill stores, and its allocations evict, hundreds of scattered hashes at once. In runs of
  // kRun, first load each hash's home slot (independent loads whose misses overlap), then apply
  // the run.
  constexpr size_t kRun = 32;
  const size_t n = hash_events_.size();
  for (size_t run = 0; run < n; run += kRun) {
    const size_t end = std::min(n, run + kRun);
    uint64_t sink = 0;
    for (size_t i = run; i < end; ++i) sink += cached_hashes_.warm(hash_events_[i].hash);
    __asm__ volatile("" : : "r"(sink));
    for (size_t i = run; i < end; ++i) {
      const model::vllm::KvHashEvent& e = hash_events_[i];
      switch (e.kind) {
        case model::vllm::KvHashEvent::kStored:
          cached_hashes_.insert(e.hash);
          break;
        case model::vllm::KvHashEvent::kRemoved:
          cached_hashes_.erase(e.hash);
          break;
        case model::vllm::KvHashEvent::kCleared:
          cached_hashes_.clear();
          break;
      }
    }
  }
}

int64_t Instance::cached_prefix_blocks(const std::vector<model::vllm::BlockHash>& hashes) const {
  int64_t n = 0;
  for (const model::vllm::BlockHash& h : hashes) {
    if (!cached_hashes_.contains(h.low64())) break;
    ++n;
  }
  return n;
}

}  // namespace kvtwin::sim::engine
