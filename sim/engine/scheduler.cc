#include "sim/engine/scheduler.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::sim::engine {

using model::vllm::AllocateSlotsArgs;
using model::vllm::KVCacheBlocks;

Scheduler::Scheduler(const SchedulerConfig& config, model::vllm::KVCacheManager* kv,
                     KvConnector* connector)
    : config_(config), kv_(kv), connector_(connector) {}

void Scheduler::add_request(EngineRequest* r) {
  r->status = RequestStatus::kWaiting;
  enqueue_waiting(r, /*front=*/false);
}

namespace {

// vLLM's arrival_time: the trace's arrival, then the order of arrival, which is the trace's
// request order (record.index: traces are sorted by arrival; see the header).
std::pair<SimTime, uint64_t> arrival_time(const EngineRequest* r) {
  return {r->record.arrival, r->record.index};
}

// Request.__lt__: priority, then arrival time, then the request id as a string (the last never
// decides here: arrival times are distinct).
bool runs_before(const EngineRequest* a, const EngineRequest* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  if (arrival_time(a) != arrival_time(b)) return arrival_time(a) < arrival_time(b);
  return a->id() < b->id();
}

}  // namespace

void Scheduler::enqueue_waiting(EngineRequest* r, bool front) {
  if (config_.priority_policy) {
    waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), r, runs_before), r);
  } else if (front) {
    waiting_.push_front(r);
  } else {
    waiting_.push_back(r);
  }
}

EngineRequest* Scheduler::priority_victim() const {
  EngineRequest* victim = nullptr;
  for (EngineRequest* r : running_) {
    if (victim == nullptr ||
        std::pair(r->priority, arrival_time(r)) > std::pair(victim->priority, arrival_time(victim)))
      victim = r;
  }
  return victim;
}

void Scheduler::schedule(SchedulerOutput* out_ptr) {
  SchedulerOutput& out = *out_ptr;
  out.clear();
  int64_t budget = config_.max_num_batched_tokens;
  stalled_ = nullptr;
  kv_->new_step_starts();
  schedule_running(&out, &budget);
  if (out.preempted.empty()) schedule_waiting(&out, &budget);
  KVTWIN_CHECK_GE(budget, 0);
  KVTWIN_CHECK_LE(static_cast<int64_t>(running_.size()), config_.max_num_seqs);
  for (const ScheduledRequest& s : out.scheduled)
    out.total_num_scheduled_tokens += s.num_new_tokens;
  // As upstream: the connector's metadata sees the counts before _update_after_schedule.
  if (connector_) connector_->build_connector_meta(out);
  for (ScheduledRequest& s : out.scheduled) {  // _update_after_schedule
    EngineRequest& r = *s.request;
    model::vllm::Request& req = *r.req;
    req.num_computed_tokens += s.num_new_tokens;
    s.samples = req.num_computed_tokens >= req.num_tokens() + r.num_output_placeholders;
    if (config_.async_scheduling && s.samples) r.num_output_placeholders += 1;
  }
}

void Scheduler::schedule_running(SchedulerOutput* out, int64_t* budget) {
  size_t index = 0;
  while (index < running_.size() && *budget > 0) {
    EngineRequest* r = running_[index];
    model::vllm::Request& req = *r->req;
    // Async: the step in flight already samples this request's last token (max_tokens).
    if (r->num_output_placeholders > 0 &&
        req.num_computed_tokens + 2 - r->num_output_placeholders >=
            req.num_prompt_tokens() + req.max_tokens()) {
      ++index;
      continue;
    }
    int64_t n = req.num_tokens() + r->num_output_placeholders - req.num_computed_tokens;
    if (config_.long_prefill_token_threshold > 0 && n > config_.long_prefill_token_threshold)
      n = config_.long_prefill_token_threshold;
    n = std::min(n, *budget);
    n = std::min(n, config_.max_model_len - 1 - req.num_computed_tokens);
    if (config_.mamba_block_aligned_split) n = mamba_block_aligned_split(*r, n, 0);
    if (n <= 0) {
      ++index;
      continue;
    }
    std::optional<KVCacheBlocks> blocks;
    while (true) {
      blocks = kv_->allocate_slots(req, AllocateSlotsArgs{.num_new_tokens = n});
      if (blocks) break;
      EngineRequest* victim;
      if (config_.priority_policy) {
        victim = priority_victim();
        running_.erase(std::find(running_.begin(), running_.end(), victim));
        auto sched =
            std::find_if(out->scheduled.begin(), out->scheduled.end(),
                         [victim](const ScheduledRequest& s) { return s.request == victim; });
        if (sched != out->scheduled.end()) {  // scheduled earlier in this step: undone
          *budget += sched->num_new_tokens;
          out->scheduled.erase(sched);
          --index;
        }
      } else {
        victim = running_.back();
        running_.pop_back();
      }
      preempt(victim);
      out->preempted.push_back(victim);
      if (victim != r) continue;
      if (running_.empty() && kv_->num_free_blocks() == kv_->block_pool().num_gpu_blocks() - 1) {
        // r failed with every other block free: its tokens alone outgrow the pool, and each
        // recompute would fail at the same point again (vLLM loops forever here).
        out->preempted.pop_back();
        abort_waiting(r);
        out->rejected.push_back(r);
      }
      break;
    }
    if (!blocks) break;
    ScheduledRequest sr{r, n, req.num_computed_tokens, 0, false, {}};
    if (connector_ && blocks->num_groups() > 0)
      sr.new_block_ids.assign((*blocks)[0].begin(), (*blocks)[0].end());
    out->scheduled.push_back(std::move(sr));
    *budget -= n;
    ++index;
  }
}

void Scheduler::schedule_waiting(SchedulerOutput* out, int64_t* budget) {
  int64_t encoder_budget = config_.encoder_compute_budget;
  std::vector<EngineRequest*> skipped;  // in encounter order
  auto skip_head = [&] {
    skipped.push_back(waiting_.front());
    waiting_.pop_front();
  };
  while (!waiting_.empty() && *budget > 0) {
    if (static_cast<int64_t>(running_.size()) == config_.max_num_seqs) break;
    EngineRequest* r = waiting_.front();
    model::vllm::Request& req = *r->req;
    if (r->status == RequestStatus::kWaitingForRemoteKvs) {
      if (!update_waiting_for_remote_kv(r)) {
        skip_head();
        continue;
      }
      r->status = req.num_preemptions > 0 ? RequestStatus::kPreempted : RequestStatus::kWaiting;
    }
    int64_t num_external = 0;
    bool load_async = false;
    KVCacheBlocks local_hits = kv_->empty_kv_cache_blocks();
    int64_t num_local = 0;
    int64_t num_computed;
    if (req.num_computed_tokens == 0) {
      auto computed = kv_->get_computed_blocks(req);
      local_hits = std::move(computed.blocks);
      num_local = computed.num_computed_tokens;
      if (connector_) {
        auto match = connector_->get_num_new_matched_tokens(*r, num_local);
        if (!match) {
          skip_head();
          continue;
        }
        num_external = match->num_tokens;
        load_async = match->load_async;
        r->num_external_computed_tokens = num_external;
      }
      num_computed = num_local + num_external;
    } else {
      num_computed = req.num_computed_tokens;
    }
    int64_t n = 0;
    int64_t num_encoder = 0;
    if (!load_async) {
      n = req.num_tokens() - num_computed;
      if (config_.long_prefill_token_threshold > 0 && n > config_.long_prefill_token_threshold)
        n = config_.long_prefill_token_threshold;
      if (!config_.enable_chunked_prefill && n > *budget) break;
      n = std::min(n, *budget);
      KVTWIN_CHECK(n > 0) << "nothing to compute for a waiting request";
      // An encoder-decoder request runs its encoder input with its first chunk (upstream: only
      // while num_computed_tokens is 0, so again after a preemption), from the step's encoder
      // compute budget; when it does not fit, upstream schedules 0 tokens and the loop ends.
      if (r->num_encoder_tokens > 0 && num_computed == 0) {
        if (r->num_encoder_tokens > encoder_budget) break;
        num_encoder = r->num_encoder_tokens;
      }
    }
    if (config_.mamba_block_aligned_split) {
      n = mamba_block_aligned_split(*r, n, num_local);
      if (n == 0 && !load_async) break;
    }
    auto blocks =
        kv_->allocate_slots(req, AllocateSlotsArgs{.num_new_tokens = n,
                                                   .num_new_computed_tokens = num_local,
                                                   .new_computed_blocks = &local_hits,
                                                   .num_lookahead_tokens = 0,
                                                   .num_external_computed_tokens = num_external,
                                                   .delay_cache_blocks = load_async,
                                                   .num_encoder_tokens = num_encoder});
    if (!blocks) break;
    // The hits of the request's first admission. Those of an attempt whose allocation failed
    // were never used (a request rejected before any admission reports none).
    if (req.num_computed_tokens == 0 && req.num_preemptions == 0 && r->record.first_scheduled < 0) {
      r->record.gpu_hit_tokens = num_local;
      r->record.lmcache_hit_tokens = num_external;
    }
    if (connector_)
      connector_->update_state_after_alloc(*r, kv_->get_blocks(r->id()), num_external);
    waiting_.pop_front();
    if (load_async) {
      skipped.push_back(r);
      r->status = RequestStatus::kWaitingForRemoteKvs;
      continue;
    }
    running_.push_back(r);
    bool is_new = true;
    out->scheduled.push_back(ScheduledRequest{r, n, num_computed, num_encoder, is_new, {}});
    *budget -= n;
    encoder_budget -= num_encoder;
    r->status = RequestStatus::kRunning;
    req.num_computed_tokens = num_computed;
    if (r->num_cached_tokens < 0) r->num_cached_tokens = num_computed;
  }
  // Where admission stopped, before the skipped requests go back in front of it.
  stalled_ = waiting_.empty() ? nullptr : waiting_.front();
  // Back to the front, in their original order (PRIORITY: each to its place).
  if (config_.priority_policy) {
    for (EngineRequest* r : skipped) enqueue_waiting(r, /*front=*/true);
  } else {
    waiting_.insert(waiting_.begin(), skipped.begin(), skipped.end());
  }
}

bool Scheduler::update_waiting_for_remote_kv(EngineRequest* r) {
  KVTWIN_CHECK(connector_ != nullptr);
  if (!finished_recving_.count(r)) return false;
  model::vllm::Request& req = *r->req;
  if (failed_recving_.erase(r) > 0) {
    if (req.num_computed_tokens > 0)
      kv_->cache_blocks(req, req.num_computed_tokens);
    else
      kv_->free(req);
  } else {
    auto ids = kv_->get_block_ids(r->id());
    int64_t computed = static_cast<int64_t>(ids[0].size()) * config_.block_size;
    computed = std::min(computed, req.num_tokens());
    if (computed == req.num_tokens()) computed -= 1;
    kv_->cache_blocks(req, computed);
    req.num_computed_tokens = computed;
  }
  finished_recving_.erase(r);
  return true;
}

void Scheduler::preempt(EngineRequest* r) {
  KVTWIN_CHECK(r->status == RequestStatus::kRunning) << "only running requests are preempted";
  kv_->free(*r->req);
  r->status = RequestStatus::kPreempted;
  r->req->num_computed_tokens = 0;  // an encoder-decoder request runs its encoder again
  r->req->num_preemptions += 1;
  r->record.preemptions += 1;
  ++num_preemptions_;
  enqueue_waiting(r, /*front=*/true);
}

int64_t Scheduler::mamba_block_aligned_split(const EngineRequest& r, int64_t num_new_tokens,
                                             int64_t num_new_local_computed) const {
  const model::vllm::Request& req = *r.req;
  int64_t computed = req.num_computed_tokens + num_new_local_computed;
  if (computed < std::max(req.num_prompt_tokens(), req.num_tokens() - 1)) {
    int64_t bs = config_.block_size;
    int64_t last_cache_position = req.num_tokens() - req.num_tokens() % bs;
    int64_t after = computed + num_new_tokens;
    if (after < last_cache_position)
      num_new_tokens = num_new_tokens / bs * bs;
    else if (computed < last_cache_position && last_cache_position < after)
      num_new_tokens = last_cache_position - computed;
  }
  return num_new_tokens;
}

void Scheduler::update_from_output(const SchedulerOutput& out, const TokenFn& token,
                                   const std::set<EngineRequest*>& skip, StepOutcome* outcome_ptr) {
  StepOutcome& outcome = *outcome_ptr;
  outcome.clear();
  for (const ScheduledRequest& s : out.scheduled) {
    EngineRequest* r = s.request;
    if (r->finished() || skip.count(r)) continue;
    if (!s.samples) continue;  // a prefill chunk: its sampled token is discarded
    model::vllm::Request& req = *r->req;
    const bool was_running = r->status == RequestStatus::kRunning;
    model::vllm::TokenId t = token(*r, req.num_output_tokens());
    req.append_output_token_ids(std::span<const model::vllm::TokenId>(&t, 1));
    if (config_.async_scheduling) {
      // AsyncScheduler._update_request_with_output: the placeholder is filled, and the blocks the
      // new token completes are cached (not for a request preempted since it was scheduled).
      KVTWIN_CHECK(r->num_output_placeholders > 0);
      r->num_output_placeholders -= 1;
      if (was_running) kv_->cache_blocks(req, req.num_computed_tokens - r->num_output_placeholders);
    }
    outcome.sampled.push_back(r);
    if (req.num_tokens() >= config_.max_model_len || req.num_output_tokens() >= req.max_tokens()) {
      // Async: a request preempted after it was scheduled may stop here (from the waiting queue).
      if (!was_running) remove_waiting(r);
      free_request(r);
      outcome.finished.push_back(r);
    }
  }
  if (!outcome.finished.empty())
    running_.erase(std::remove_if(running_.begin(), running_.end(),
                                  [](EngineRequest* r) { return r->finished(); }),
                   running_.end());
  if (config_.recompute_kv_load_failures || skip.empty()) return;
  // "fail": finish_requests(failed, FINISHED_ERROR) after the stopped requests left.
  // Running order (the scheduled order, with unscheduled running requests in place), then
  // waiting order.
  std::vector<EngineRequest*> failed;
  for (EngineRequest* r : running_)
    if (skip.count(r)) failed.push_back(r);
  for (EngineRequest* r : waiting_)
    if (skip.count(r)) failed.push_back(r);
  for (EngineRequest* r : failed) {
    finish_with_error(r);
    outcome.errored.push_back(r);
  }
}

std::set<EngineRequest*> Scheduler::update_requests_with_invalid_blocks(
    const std::vector<EngineRequest*>& requests, const std::set<model::vllm::BlockId>& invalid,
    bool sync, std::set<model::vllm::BlockId>* blocks_to_evict) {
  std::set<EngineRequest*> affected;
  std::set<model::vllm::BlockId> marked;
  const int64_t bs = config_.block_size;
  for (EngineRequest* r : requests) {
    model::vllm::Request& req = *r->req;
    auto ids = kv_->get_block_ids(r->id());
    const std::vector<model::vllm::BlockId>& blocks = ids[0];
    int64_t computed = sync ? r->num_cached_tokens
                            : (failed_recving_.count(r) ? req.num_computed_tokens
                                                        : static_cast<int64_t>(blocks.size()) * bs);
    int64_t num_blocks = (computed + bs - 1) / bs;
    bool is_affected = false, marked_here = false;
    for (int64_t i = 0; i < num_blocks && i < static_cast<int64_t>(blocks.size()); ++i) {
      model::vllm::BlockId b = blocks[static_cast<size_t>(i)];
      if (!invalid.count(b)) continue;
      is_affected = true;
      if (marked.count(b)) continue;
      marked.insert(b);
      if (marked_here) continue;
      marked_here = true;
      req.num_computed_tokens = i * bs;
      int64_t lost = computed - req.num_computed_tokens;
      r->num_external_computed_tokens -= lost;
      r->record.failed_load_tokens += lost;
      if (blocks_to_evict)
        blocks_to_evict->insert(blocks.begin() + static_cast<ptrdiff_t>(i), blocks.end());
    }
    if (is_affected) {
      if (!marked_here) req.num_computed_tokens = r->num_cached_tokens;
      affected.insert(r);
    }
  }
  return affected;
}

std::set<EngineRequest*> Scheduler::handle_invalid_blocks(
    const std::set<model::vllm::BlockId>& invalid) {
  std::vector<EngineRequest*> async_reqs;
  for (EngineRequest* r : waiting_)
    if (r->status == RequestStatus::kWaitingForRemoteKvs) async_reqs.push_back(r);
  std::set<EngineRequest*> async_failed =
      update_requests_with_invalid_blocks(async_reqs, invalid, /*sync=*/false, nullptr);
  std::set<model::vllm::BlockId> to_evict;
  std::set<EngineRequest*> sync_failed =
      update_requests_with_invalid_blocks(running_, invalid, /*sync=*/true, &to_evict);
  if (config_.recompute_kv_load_failures) {
    // The invalid blocks stay cached and are recomputed in place.
    failed_recving_.insert(async_failed.begin(), async_failed.end());
    return sync_failed;
  }
  // "fail": the failed blocks and those after them leave the prefix cache (others may share
  // them, and their content is wrong); every affected request ends with an error.
  if (!to_evict.empty()) {
    std::vector<model::vllm::BlockId> ids(to_evict.begin(), to_evict.end());
    kv_->evict_blocks(ids);
  }
  sync_failed.insert(async_failed.begin(), async_failed.end());
  return sync_failed;
}

void Scheduler::free_request(EngineRequest* r) {
  if (connector_) {
    // _connector_finished: out-of-window blocks go first, then the connector sees the table.
    kv_->remove_skipped_blocks(r->id(), r->req->num_tokens());
    connector_->request_finished(*r);
  }
  kv_->free(*r->req);
  r->status = RequestStatus::kFinished;
}

void Scheduler::remove_waiting(EngineRequest* r) {
  auto it = std::find(waiting_.begin(), waiting_.end(), r);
  KVTWIN_CHECK(it != waiting_.end()) << "request " << r->id() << " is not waiting";
  waiting_.erase(it);
  if (stalled_ == r) stalled_ = nullptr;
}

void Scheduler::finish_with_error(EngineRequest* r) {
  if (r->status == RequestStatus::kRunning)
    running_.erase(std::find(running_.begin(), running_.end(), r));
  else
    remove_waiting(r);
  failed_recving_.erase(r);
  finished_recving_.erase(r);
  free_request(r);
  r->record.load_error = true;
}

void Scheduler::abort_waiting(EngineRequest* r) {
  remove_waiting(r);
  free_request(r);
  r->record.rejected = true;
  // A preempted request that grew too large to fit again keeps the tokens it produced.
  r->record.output_tokens = r->req->num_output_tokens();
}

}  // namespace kvtwin::sim::engine
