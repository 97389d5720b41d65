#include "model/lmcache/vllm_scheduler_adapter.h"

#include <algorithm>
#include <span>

#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {

LMCacheSchedulerAdapter::LMCacheSchedulerAdapter(const LMCacheEngineConfig& config,
                                                 const AdapterConfig& adapter,
                                                 LMCacheLookupClient* lookup_client)
    : config_(config), adapter_(adapter), lookup_client_(lookup_client) {}

namespace {

// output.num_scheduled_tokens[req_id], or the count the caller gave inline.
int64_t scheduled_tokens(const SchedulerOutput& output, const std::string& req_id,
                         const std::optional<int64_t>& given) {
  if (given) return *given;
  auto it = output.num_scheduled_tokens.find(req_id);
  if (it == output.num_scheduled_tokens.end())
    raise(PyError::kKeyError, "num_scheduled_tokens[" + req_id + "]");
  return it->second;
}

// Not upstream: when the caller memoises the request's chunk hashes (VllmRequest::chunk_hashes,
// which its lookups fill), the step's stores use that memo instead of the tracker's own, so each
// chunk is hashed once. That is exact while the tracker's tokens are a prefix of the request's:
// always, preempted or not, except after new tokens that did not start at the tracker's end
// (tokens_diverged: the tracker_reappends_recomputed_tokens quirk, or a gap). Upstream then hashes,
// and stores under, the tracker's own sequence, and so does the tracker's memo; the request's memo
// is left to lookups. The memo is read only while this step's metadata is, when the request is
// live.
ReqMeta with_request_memo(ReqMeta m, const VllmRequest& request, const RequestTracker& tracker) {
  if (request.chunk_hashes != nullptr && !tracker.tokens_diverged)
    m.chunk_hashes = request.chunk_hashes;
  return m;
}

}  // namespace

ReqMetaOptions LMCacheSchedulerAdapter::meta_options() const {
  return {adapter_.vllm_block_size, config_.chunk_size,
          adapter_.discard_partial_chunks_extra || !config_.save_unfull_chunk,
          config_.save_decode_cache};
}

const std::optional<LoadSpec> LMCacheSchedulerAdapter::load_spec(const std::string& req_id) const {
  auto it = load_specs_.find(req_id);
  if (it == load_specs_.end()) return std::nullopt;
  return it->second;
}

RequestTracker* LMCacheSchedulerAdapter::tracker(const std::string& req_id) {
  auto it = tracker_index_.find(req_id);
  return it == tracker_index_.end() ? nullptr : &*it->second;
}

void LMCacheSchedulerAdapter::put_tracker(RequestTracker t) {
  auto it = tracker_index_.find(t.req_id);
  if (it != tracker_index_.end()) {
    *it->second = std::move(t);  // dict assignment keeps the position
    return;
  }
  trackers_.push_back(std::move(t));
  tracker_index_.emplace(trackers_.back().req_id, std::prev(trackers_.end()));
}

LMCacheSchedulerAdapter::MatchResult LMCacheSchedulerAdapter::get_num_new_matched_tokens(
    const VllmRequest& request, int64_t num_computed_tokens, int64_t now_ns) {
  MatchResult out;
  const std::string& req_id = request.request_id;
  const bool async = lookup_client_->is_async();
  int64_t hit = -1;
  if (async) {
    LMCacheLookupClient::AsyncStatus st = lookup_client_->lookup_cache_async(req_id, now_ns);
    if (st.kind == LMCacheLookupClient::AsyncStatus::kPending) return out;
    if (st.kind == LMCacheLookupClient::AsyncStatus::kHit) hit = st.hit_tokens;
  } else {
    hit = lookup_client_->lookup_cache(req_id);
  }
  if (hit == -1) {
    requests_priority_[req_id] = request.priority;
    std::span<const TokenId> tokens = request.all_token_ids;
    if (adapter_.skip_last_n_tokens > 0) {
      size_t drop =
          std::min<size_t>(tokens.size(), static_cast<size_t>(adapter_.skip_last_n_tokens));
      tokens = tokens.first(tokens.size() - drop);
    }
    const RequestConfigs* configs = request.request_configs ? &*request.request_configs : nullptr;
    if (async) {
      lookup_client_->lookup_async(tokens, req_id, configs, request.chunk_hashes);
      return out;  // None: vLLM tries again next step
    }
    LMCacheLookupClient::Result r =
        lookup_client_->lookup(tokens, req_id, configs, request.chunk_hashes);
    hit = r.hit_tokens;
    out.rank_hits = std::move(r.rank_hits);
  }
  int64_t need = hit - num_computed_tokens;
  if (hit == request.num_tokens()) need -= 1;
  bool below_min = config_.min_retrieve_tokens > 0 && need < config_.min_retrieve_tokens;
  load_specs_[req_id] = LoadSpec{num_computed_tokens, hit, false};
  out.ret = (below_min || need <= 0) ? 0 : need;
  return out;
}

void LMCacheSchedulerAdapter::update_state_after_alloc(const VllmRequest& request,
                                                       int64_t num_external_tokens) {
  lookup_client_->clear_lookup_status(request.request_id);
  unfinished_requests_[request.request_id] = &request;
  auto it = load_specs_.find(request.request_id);
  if (it == load_specs_.end()) return;
  if (num_external_tokens == 0) {
    it->second.can_load = false;
    return;
  }
  int64_t recalc_last = it->second.lmcache_cached_tokens == request.num_tokens() ? 1 : 0;
  if (num_external_tokens !=
      it->second.lmcache_cached_tokens - it->second.vllm_cached_tokens - recalc_last)
    raise(PyError::kAssertionError, "Mismatch in tokens to load for " + request.request_id);
  it->second.can_load = true;
}

ConnectorMetadata LMCacheSchedulerAdapter::build_connector_meta(
    const SchedulerOutput& output,
    const std::unordered_map<std::string, const VllmRequest*>& requests) {
  bool force_skip_save = adapter_.kv_consumer || adapter_.force_skip_save;
  ConnectorMetadata meta;
  ReqMetaOptions options = meta_options();
  for (const std::string& id : output.finished_req_ids) {
    auto t = tracker_index_.find(id);
    if (t != tracker_index_.end()) {
      trackers_.erase(t->second);
      tracker_index_.erase(t);
    }
    unfinished_requests_.erase(id);
  }
  for (const NewRequestData& nr : output.scheduled_new_reqs) {
    std::optional<LoadSpec> load_spec;
    if (auto it = load_specs_.find(nr.req_id); it != load_specs_.end()) {
      load_spec = it->second;
      load_specs_.erase(it);
    }
    auto rit = requests.find(nr.req_id);
    if (rit == requests.end()) raise(PyError::kKeyError, "new request " + nr.req_id);
    const VllmRequest& request = *rit->second;
    int64_t to_compute =
        nr.num_computed_tokens + scheduled_tokens(output, nr.req_id, nr.num_scheduled_tokens);
    int64_t priority = 0;
    if (auto p = requests_priority_.find(nr.req_id); p != requests_priority_.end()) {
      priority = p->second;
      requests_priority_.erase(p);
    }
    RequestTracker t;
    t.req_id = nr.req_id;
    const std::span<const TokenId> prompt = request.prompt_token_ids();
    t.prompt_len = static_cast<int64_t>(prompt.size());
    size_t n =
        std::min<size_t>(static_cast<size_t>(std::max<int64_t>(to_compute, 0)), prompt.size());
    // Prefill (and, with the hint, decoding) appends without moving.
    t.token_ids.reserve(std::max(prompt.size(), request.token_capacity_hint));
    t.token_ids.assign(prompt.begin(), prompt.begin() + static_cast<ptrdiff_t>(n));
    t.allocated_block_ids = nr.block_ids;
    t.num_saved_tokens = load_spec ? load_spec->lmcache_cached_tokens : 0;
    t.request_configs = request.request_configs;
    t.skip_save = force_skip_save ||
                  (config_.priority_limit.has_value() && priority > *config_.priority_limit);
    put_tracker(std::move(t));
    if (auto m = req_meta_from_tracker(*tracker(nr.req_id), load_spec, options))
      meta.requests.push_back(with_request_memo(std::move(*m), request, *tracker(nr.req_id)));
  }
  for (const CachedRequestData& cr : output.scheduled_cached_reqs) {
    RequestTracker* t = tracker(cr.req_id);
    if (t == nullptr) raise(PyError::kKeyError, "_request_trackers[" + cr.req_id + "]");
    const int64_t num_scheduled = scheduled_tokens(output, cr.req_id, cr.num_scheduled_tokens);
    auto u = unfinished_requests_.find(cr.req_id);
    if (u == unfinished_requests_.end())
      raise(PyError::kValueError, "Request " + cr.req_id + " is not in _unfinished_requests");
    const VllmRequest& request = *u->second;
    int64_t from = std::min<int64_t>(request.num_computed_tokens, request.num_tokens());
    int64_t to = std::min<int64_t>(from + num_scheduled, request.num_tokens());
    std::span<const TokenId> new_tokens(request.all_token_ids.data() + from,
                                        static_cast<size_t>(to - from));
    std::optional<LoadSpec> load_spec;
    if (auto it = load_specs_.find(cr.req_id); it != load_specs_.end()) {
      load_spec = it->second;
      load_specs_.erase(it);
    }
    int64_t lmcache_cached = load_spec ? load_spec->lmcache_cached_tokens : 0;
    int64_t vllm_cached = load_spec ? load_spec->vllm_cached_tokens : 0;
    std::optional<int64_t> resumed_computed;  // what the tracker takes as computed
    if (cr.resumed) {
      if (!load_spec)
        raise(PyError::kAssertionError, "preempted request " + cr.req_id + " has no load spec");
      int64_t expected = std::max(lmcache_cached, vllm_cached);  // upstream's assumption
      if (!config_.quirks.resumed_request_check_ignores_skipped_loads) {
        if (!load_spec->can_load)
          expected = vllm_cached;
        else if (lmcache_cached == request.num_tokens())
          expected -= 1;  // the whole-prompt hit's last token is recomputed
      }
      if (request.num_computed_tokens != expected)
        raise(PyError::kAssertionError, "preempted request " + cr.req_id + " num_computed_tokens");
      resumed_computed = expected;
    }
    if (!cr.resumed && !config_.quirks.tracker_reappends_recomputed_tokens &&
        from < static_cast<int64_t>(t->token_ids.size())) {
      // The fix: recomputed tokens (a failed load rolled num_computed_tokens back) replace the
      // tracker's copies instead of following them. The tokens are the same, so the values that
      // earlier metadata views do not change.
      t->token_ids.resize(static_cast<size_t>(from));
    }
    // New tokens that do not start at the tracker's end: recomputed ones appended a second time
    // (the quirk), or, under async scheduling, tokens past a gap.
    if (!cr.resumed && to > from && from != static_cast<int64_t>(t->token_ids.size()))
      t->tokens_diverged = true;
    t->update(new_tokens, cr.new_block_ids, cr.resumed, lmcache_cached, vllm_cached,
              cr.resumed ? &request.all_token_ids : nullptr, resumed_computed);
    if (auto m = req_meta_from_tracker(*t, load_spec, options))
      meta.requests.push_back(with_request_memo(std::move(*m), request, *t));
  }
  return meta;
}

}  // namespace kvtwin::model::lmcache
