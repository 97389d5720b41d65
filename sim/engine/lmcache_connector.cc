#include "sim/engine/lmcache_connector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "model/check.h"
#include "sim/engine/blocking_get.h"

namespace kvtwin::sim::engine {
namespace lm = model::lmcache;
namespace {

using scenario::kGiB;

lm::KvDtype kv_dtype(const hw::ModelGeometry& g) {
  if (g.kv_bytes == 1) return lm::KvDtype::kFp8E4m3fn;
  if (g.kv_bytes == 4) return lm::KvDtype::kFloat;
  return lm::KvDtype::kBfloat16;
}

int tier_of(std::string_view location) {
  if (location == "LocalDiskBackend") return report::kTierDisk;
  if (location == "RemoteBackend") return report::kTierRemote;
  return report::kTierCpu;
}

lm::LMCacheEngineConfig engine_config(const scenario::Scenario& s) {
  const scenario::LmcacheConfig& l = s.lmcache;
  lm::LMCacheEngineConfig c;
  c.chunk_size = l.chunk_size;
  c.save_unfull_chunk = l.save_unfull_chunk;
  c.python_hash_seed = std::to_string(s.run.seed);
  c.local_cpu = l.local_cpu;
  c.max_local_cpu_size_bytes = static_cast<uint64_t>(l.max_local_cpu_size_gb * kGiB);
  c.local_disk = l.max_local_disk_size_gb > 0;
  c.max_local_disk_size_bytes = static_cast<uint64_t>(l.max_local_disk_size_gb * kGiB);
  c.remote = l.remote;
  c.cache_policy = *lm::cache_policy_from_name(l.cache_policy);
  c.use_layerwise = l.use_layerwise;
  c.save_only_first_rank = l.save_only_first_rank;
  c.save_decode_cache = l.save_decode_cache;
  c.min_retrieve_tokens = l.min_retrieve_tokens;
  c.priority_limit = l.priority_limit;
  c.enable_async_loading = l.enable_async_loading;
  c.lookup_timeout_ms = l.lookup_timeout_ms;
  c.lookup_backoff_time_s = l.lookup_backoff_ms / 1000.0;
  c.quirks = l.upstream_fixes ? lm::Quirks::all_fixed() : lm::Quirks::upstream();
  return c;
}

lm::LMCacheMetadata engine_metadata(const scenario::Scenario& s, const hw::ModelGeometry& g) {
  lm::LMCacheMetadata m;
  m.model_name = s.model.name;
  m.world_size = g.tp;
  m.worker_id = 0;
  m.num_layers = g.num_full_layers + g.num_sliding_layers;
  m.use_mla = g.mla;
  m.num_kv_heads = g.mla ? 1 : std::max(1, s.model.num_kv_heads / g.tp);
  m.head_size = g.mla ? s.model.kv_lora_rank + s.model.qk_rope_head_dim : g.head_size;
  m.kv_dtype = kv_dtype(g);
  m.chunk_size = s.lmcache.chunk_size;
  return m;
}

}  // namespace

// The health monitor's view of the model's RemoteBackend. The test get of a recovery finds
// nothing at links.remote_get_failure_rate (drawn from the stream "health_check_<instance>", one
// draw per test), and then counts as a failed blocking read, as upstream's get_blocking does.
class LmcacheConnector::HealthRemote final : public LmcacheHealthMonitor::Remote {
 public:
  HealthRemote(lm::RemoteBackend* backend, double failure_rate, Rng rng)
      : backend_(backend), failure_rate_(failure_rate), rng_(std::move(rng)) {}
  uint64_t failed_reads() const override { return backend_->interval_get_blocking_failed_count(); }
  uint64_t take_failed_reads() override {
    return backend_->get_and_clear_interval_get_blocking_failed_count();
  }
  bool test_get_fails() override {
    const bool fails =
        failure_rate_ >= 1 || (failure_rate_ > 0 && rng_.next_double() < failure_rate_);
    if (fails) backend_->count_failed_get_blocking();
    return fails;
  }
  bool test_gets_always_fail() const override { return failure_rate_ >= 1; }
  void add_failed_reads(uint64_t n) override { backend_->count_failed_get_blocking(n); }

 private:
  lm::RemoteBackend* backend_;
  double failure_rate_;
  Rng rng_;
};

LmcacheConnector::LmcacheConnector(const scenario::Scenario& s, Context ctx)
    : s_(s),
      ctx_(std::move(ctx)),
      keyed_disk_io_(s.links.page_cache_gb > 0),
      config_(engine_config(s)),
      metadata_(engine_metadata(s, *ctx_.geometry)),
      faults_(s.run.seed, "remote_faults_" + std::to_string(ctx_.instance)) {
  adapter_config_.vllm_block_size = ctx_.layout->attention_block_size;
  engine_ = std::make_unique<lm::LMCacheEngine>(config_, metadata_, ctx_.shared, ctx_.registry);
  if (lm::LocalDiskBackend* disk = engine_->storage_manager().local_disk())
    disk->set_busy_loop_sleeper(this);
  lookup_client_ = std::make_unique<lm::LMCacheLookupClient>(
      config_, metadata_, std::vector<lm::LMCacheEngine*>{engine_.get()});
  scheduler_adapter_ =
      std::make_unique<lm::LMCacheSchedulerAdapter>(config_, adapter_config_, lookup_client_.get());
  worker_adapter_ = std::make_unique<lm::LMCacheWorkerAdapter>(engine_.get(), adapter_config_);
  if (config_.enable_async_loading) {
    LmcachePrefetchDriver::Context p;
    p.sim = ctx_.sim;
    p.mover = ctx_.mover;
    p.instance = ctx_.instance;
    p.tp = tier_ranks();
    p.engine = engine_.get();
    p.client = lookup_client_.get();
    p.kick = [this] {
      if (instance_ != nullptr) instance_->kick();
    };
    p.before_remote_read = [this](const std::vector<lm::CacheEngineKey>& keys) {
      inject_faults_into(keys);
    };
    p.run_on_worker = [this](lm::Tier tier, std::function<void()> job) {
      run_prefetch_job(tier == lm::Tier::kDisk ? 0 : 1, std::move(job));
    };
    p.worker_done = [this](lm::Tier tier) { prefetch_job_done(tier == lm::Tier::kDisk ? 0 : 1); };
    p.metadata_round_trip_ns = from_seconds(s_.links.network_latency_us * 1e-6);
    p.keyed_disk_io = keyed_disk_io_;
    prefetch_ = std::make_unique<LmcachePrefetchDriver>(std::move(p));
  }
  if (s.lmcache.health_monitor && engine_->storage_manager().remote() != nullptr) {
    LmcacheHealthMonitor::Config c;
    c.interval = std::max<SimDuration>(1, from_seconds(s.lmcache.ping_interval_s));
    c.recovery_wait = from_seconds(s.lmcache.waiting_time_for_recovery_s);
    c.threshold = static_cast<uint64_t>(s.lmcache.get_blocking_failed_threshold);
    health_remote_ = std::make_unique<HealthRemote>(
        engine_->storage_manager().remote(), s.links.remote_get_failure_rate,
        Rng(s.run.seed, "health_check_" + std::to_string(ctx_.instance)));
    health_ = std::make_unique<LmcacheHealthMonitor>(
        c, health_remote_.get(), [this](bool healthy) { apply_health(healthy); });
  }
}

LmcacheConnector::~LmcacheConnector() = default;

// What the health monitor does when its check fails or passes again. "recompute": the engine is
// unhealthy meanwhile. "local_cpu" (HealthMonitor._apply_local_cpu_fallback and
// _recover_from_local_cpu_fallback, for this one check): the remote tier is bypassed and the CPU
// hot cache forced on; recovering, Redis is back and use_hot restored, and when it was off the hot
// cache is cleared, after the restore upstream (so not at all:
// Quirks::health_recovery_clear_is_noop) or before it with the fix.
void LmcacheConnector::apply_health(bool healthy) {
  if (s_.lmcache.health_fallback_policy != "local_cpu") {
    engine_->set_healthy(healthy);
    return;
  }
  lm::StorageManager& sm = engine_->storage_manager();
  lm::LocalCPUBackend& cpu = sm.local_cpu();
  if (!healthy) {
    original_use_hot_ = cpu.use_hot();
    sm.set_backend_bypass("RemoteBackend", true);
    cpu.set_use_hot(true);
    return;
  }
  sm.set_backend_bypass("RemoteBackend", false);
  if (!original_use_hot_ && !config_.quirks.health_recovery_clear_is_noop) {
    cpu.clear();  // the fix: while use_hot is still on
    engine_->end_of_operation();
    drain_storage_events();
  }
  cpu.set_use_hot(original_use_hot_);
  // Upstream clears here, which returns at once when use_hot is off.
}

uint64_t LmcacheConnector::object_bytes(int64_t tokens) const {
  return static_cast<uint64_t>(metadata_.shape_bytes(metadata_.get_shape(tokens)));
}

LmcacheConnector::RequestState& LmcacheConnector::state_of(const EngineRequest& r) {
  if (r.connector_state != nullptr) return *static_cast<RequestState*>(r.connector_state);
  RequestState& st = requests_[r.id()];  // unordered_map: the reference outlives rehashes
  r.connector_state = &st;
  if (!st.mirror) {
    st.mirror = std::make_unique<lm::VllmRequest>();
    st.mirror->request_id = r.id();
    st.mirror->priority = r.priority;  // LMCache's priority_limit reads it
    st.mirror->chunk_hashes = &st.chunk_hashes;
    st.mirror->token_capacity_hint = model::vllm::Request::token_capacity(
        static_cast<size_t>(r.req->num_prompt_tokens()), r.req->max_tokens());
  }
  return st;
}

// Brings the adapter's view of a request up to date: tokens appended since, computed tokens.
void LmcacheConnector::sync(lm::VllmRequest& m, const EngineRequest& r,
                            int64_t num_computed_tokens) {
  m.view_tokens(r.req->all_token_ids(), r.req->num_prompt_tokens());
  m.num_computed_tokens = num_computed_tokens;
}

std::optional<KvConnector::Match> LmcacheConnector::get_num_new_matched_tokens(
    EngineRequest& r, int64_t num_local_computed) {
  catch_up_health();
  RequestState& st = state_of(r);
  st.live = &r;
  sync(*st.mirror, r, r.req->num_computed_tokens);
  // Upstream's clock inside one schedule() has moved by that schedule's earlier backoff sleeps,
  // which the engine core pays after it (run_lookups).
  const SimTime now = ctx_.sim->now() + sleep_ns_;
  const uint64_t timeouts = lookup_client_->num_timeouts();
  const bool was_pending = lookup_client_->is_pending(r.id());
  const lm::RemoteBackend* remote = engine_->storage_manager().remote();
  const uint64_t exists_before = remote ? remote->exists_calls() : 0;
  auto result = scheduler_adapter_->get_num_new_matched_tokens(*st.mirror, num_local_computed, now);
  engine_->end_of_operation();
  // A synchronous lookup blocks the scheduler while the remote tier answers its EXISTS calls
  // (every rank asks its own, in parallel): run_lookups runs them through the Redis workers.
  if (!prefetch_ && remote) lookup_exists_ += remote->exists_calls() - exists_before;
  if (prefetch_) {
    sleep_ns_ +=
        lookup_client_->take_backoff_sleeps() * from_seconds(config_.lookup_backoff_time_s);
    stats_.async_lookup_timeouts += lookup_client_->num_timeouts() - timeouts;
    if (!was_pending && lookup_client_->is_pending(r.id()) && !result.ret) {
      ++stats_.async_lookups;
      prefetch_->on_lookup_sent();
    }
    // A poll that finds nothing new repeats until an event (kick()); a check still pending
    // reads the clock `now - ctx_.sim->now()` after its poll began, so the first poll whose
    // check would time out begins from `from` minus that. A lookup just sent is first checked
    // at the next poll, which the engine runs (it sleeps 1 ms, then polls).
    if (!result.ret && lookup_client_->is_pending(r.id())) {
      if (std::optional<int64_t> from = lookup_client_->times_out_from(r.id()))
        prefetch_->kick_at(std::max(ctx_.sim->now(), *from - (now - ctx_.sim->now())));
    }
  }
  if (!result.ret) return std::nullopt;
  return Match{*result.ret, false};
}

void LmcacheConnector::update_state_after_alloc(EngineRequest& r,
                                                const model::vllm::KVCacheBlocks& /*blocks*/,
                                                int64_t num_external_tokens) {
  catch_up_health();
  lm::VllmRequest& m = mirror(r);
  m.view_tokens(r.req->all_token_ids(), r.req->num_prompt_tokens());
  scheduler_adapter_->update_state_after_alloc(m, num_external_tokens);
}

void LmcacheConnector::build_connector_meta(const SchedulerOutput& output) {
  catch_up_health();
  lm::SchedulerOutput& o = sched_out_;
  o.finished_req_ids.swap(finished_since_meta_);
  finished_since_meta_.clear();
  o.scheduled_new_reqs.clear();
  // Cached entries are overwritten in place (their strings and vectors keep their capacity).
  size_t num_cached = 0;
  auto next_cached = [&]() -> lm::CachedRequestData& {
    if (num_cached == o.scheduled_cached_reqs.size()) o.scheduled_cached_reqs.emplace_back();
    return o.scheduled_cached_reqs[num_cached++];
  };
  new_requests_.clear();
  for (const ScheduledRequest& s : output.scheduled) {
    const EngineRequest& r = *s.request;
    RequestState& st = state_of(r);
    sync(*st.mirror, r, s.num_computed_before);
    const bool first = !st.seen;
    st.seen = true;
    if (first || s.is_new) {  // new, or resumed after preemption: every block is new to it
      const auto blocks = instance_->kv().get_blocks(r.id());
      std::vector<int64_t> ids(blocks[0].begin(), blocks[0].end());
      if (first) {
        new_requests_.emplace(r.id(), st.mirror.get());
        o.scheduled_new_reqs.push_back(
            lm::NewRequestData{r.id(), std::move(ids), s.num_computed_before, s.num_new_tokens});
      } else {
        next_cached() = lm::CachedRequestData{r.id(), std::move(ids), s.num_computed_before, true,
                                              s.num_new_tokens};
      }
    } else {
      lm::CachedRequestData& c = next_cached();
      c.req_id.assign(r.id());
      if (!c.new_block_ids) c.new_block_ids.emplace();
      c.new_block_ids->assign(s.new_block_ids.begin(), s.new_block_ids.end());
      c.num_computed_tokens = s.num_computed_before;
      c.resumed = false;
      c.num_scheduled_tokens = s.num_new_tokens;
    }
  }
  o.scheduled_cached_reqs.resize(num_cached);
  try {
    lm::ConnectorMetadata meta = scheduler_adapter_->build_connector_meta(o, new_requests_);
    if (!output.empty()) {  // only a batch that runs takes its metadata
      built_.push_back(std::move(meta));
      ++metas_built_;
    }
  } catch (const lm::UpstreamError& e) {
    // An exception in the scheduler-side connector ends upstream's engine; the run ends here.
    char when[64];
    std::snprintf(when, sizeof when, "at %.6f s", to_seconds(ctx_.sim->now()));
    throw std::runtime_error(
        std::string("the modelled LMCache scheduler raised ") + e.what() + " " + when +
        ", which stops vLLM's engine (an upstream defect reproduced by default; "
        "lmcache.upstream_fixes = true applies the fixes)");
  }
}

void LmcacheConnector::request_finished(EngineRequest& r) {
  catch_up_health();
  r.connector_state = nullptr;
  if (metas_ended_ < metas_built_) {
    // A batch built before it finished may still hold its metadata (async scheduling: a failed
    // request ended while its next step is in flight); its state stays until that batch ends.
    retiring_.emplace_back(metas_built_, r.id());
  } else {
    retire(r.id());
  }
  if (prefetch_ && r.record.first_scheduled < 0 && lookup_client_->is_pending(r.id())) {
    lookup_client_->cancel_lookup(r.id());  // aborted while its lookup runs (FINISHED_ABORTED)
    return;
  }
  lookup_client_->clear_lookup_status(r.id());
}

void LmcacheConnector::retire(const std::string& id) {
  finished_since_meta_.push_back(id);
  requests_.erase(id);
}

// Deletes, with probability links.remote_get_failure_rate, the remote copy of each chunk a
// request pinned in the remote tier: the Redis GET that follows finds nothing, LMCache's retrieve
// fails from that chunk on, and vLLM recomputes the tokens (upstream's failure path).
void LmcacheConnector::inject_faults_into(const std::vector<lm::CacheEngineKey>& keys) {
  double p = s_.links.remote_get_failure_rate;
  if (p <= 0) return;
  for (const lm::CacheEngineKey& k : keys)
    if (faults_.next_double() < p) ctx_.shared.remote->delete_kv_bytes(k.to_string());
}

void LmcacheConnector::inject_remote_faults() {
  double p = s_.links.remote_get_failure_rate;
  if (p <= 0 || !config_.remote) return;
  for (const lm::ReqMeta& m : meta_.requests) {
    if (!m.load_spec || !m.load_spec->can_load) continue;
    const lm::PinMap* pins = engine_->lookup_pins_of(m.req_id);
    if (!pins) continue;
    for (const auto& [tier, keys] : *pins) {
      if (tier != "RemoteBackend") continue;
      for (const lm::CacheEngineKey& k : keys)
        if (faults_.next_double() < p) ctx_.shared.remote->delete_kv_bytes(k.to_string());
    }
  }
}

void LmcacheConnector::begin_step(const SchedulerOutput& /*out*/, const hw::StepTime& compute,
                                  std::function<void()> ready) {
  catch_up_health();
  KVTWIN_CHECK(!built_.empty()) << "a step began without its connector metadata";
  meta_ = std::move(built_.front());
  built_.pop_front();
  per_layer_ns_ = compute.per_layer_ns;
  inject_remote_faults();
  step_ready_ = std::move(ready);
  start_step_transfers();
}

StepHooks::Blocking LmcacheConnector::newest_blocking() const {
  Blocking b;
  if (built_.empty()) return b;
  for (const lm::ReqMeta& m : built_.back().requests) {
    // start_load_kv copies each loading request's slot mapping to the GPU (a synchronous copy
    // behind the previous step's forward pass), then waits for its load stream.
    if (m.load_spec && m.load_spec->can_load) b.loads = true;
    // wait_for_save does the same for each request that may save, stored tokens or not: it
    // waits for this step's forward pass, then for its store stream.
    if (m.save_spec && m.save_spec->can_save) b.stores = true;
  }
  if (config_.use_layerwise && (b.loads || b.stores)) b.stores = true;
  return b;
}

// What the last schedule spent in lookups blocks the engine core (and the batch it built): async
// loading's backoff sleeps, then the synchronous lookups' EXISTS calls, one after the other, each
// on a Redis worker.
void LmcacheConnector::run_lookups(std::function<void()> done) {
  catch_up_health();
  const uint64_t exists = std::exchange(lookup_exists_, 0);
  const SimDuration sleep = std::exchange(sleep_ns_, 0);
  if (exists == 0 && sleep == 0) {  // most schedules: no lookup blocked the scheduler
    done();
    return;
  }
  lookups_done_ = std::move(done);
  exists_done_ = [this] { std::exchange(lookups_done_, nullptr)(); };
  if (sleep > 0) {
    ctx_.sim->schedule_after(sleep, [this, exists] { run_exists(exists); });
  } else {
    run_exists(exists);
  }
}

// Upstream's RedisConnector runs EXISTS, GET and PUT jobs on one executor of kWriteWorkers
// workers, by priority (EXISTS first), FIFO within one. The scheduler submits a lookup's EXISTS
// calls one after the other, so each needs a free worker: with every worker busy on a put it
// waits for the first put to end (and takes that worker before the queued puts); between two
// EXISTS calls the queued puts take the worker it frees.
void LmcacheConnector::run_exists(uint64_t remaining) {
  if (remaining == 0) {
    std::exchange(exists_done_, nullptr)();
    return;
  }
  if (workers_busy_[1] >= kWriteWorkers) {
    exists_waiting_ = remaining;  // dispatch_remote hands it the next free worker
    return;
  }
  ++workers_busy_[1];  // the EXISTS holds a worker for one round trip
  ctx_.sim->schedule_after(from_seconds(s_.links.network_latency_us * 1e-6), [this, remaining] {
    --workers_busy_[1];
    start_writes();
    run_exists(remaining - 1);
  });
}

void LmcacheConnector::start_step_transfers() {
  if (!config_.use_layerwise) {
    load_bulk();
    return;
  }
  std::function<void()> ready = std::exchange(step_ready_, nullptr);
  // Layerwise: run the generators' logic for the whole step now; charge time as transfers that
  // overlap with the forward pass.
  //
  // Where upstream would stop (a load waiting forever for CPU memory, or an exception out of a
  // generator), the simulator goes on as in bulk mode, loads and stores apart: a load that raised
  // ends the step's loads, which are recomputed (a stalled load); a store that raised ends the
  // step's stores (a failed store), and the layers they had already put, which reached the CPU
  // tier, are still charged as copied. The other side runs to the end.
  lm::WorkerLog log;
  bool loads_failed = false, stores_failed = false;
  std::vector<std::pair<lm::TokenRange, int>> dropped_stores;  // (chunk, layers it had copied)
  try {
    worker_adapter_->start_load_kv(meta_, &log);
  } catch (const lm::UpstreamError&) {
    loads_failed = true;
  }
  for (int l = 0; l < engine_->num_layers(); ++l) {
    if (!loads_failed) {
      try {
        worker_adapter_->wait_for_layer_load(&log);
      } catch (const lm::UpstreamError&) {
        loads_failed = true;
      }
    }
    if (!stores_failed) {
      try {
        worker_adapter_->save_kv_layer(meta_, &log);
      } catch (const lm::UpstreamError&) {
        stores_failed = true;
        dropped_stores = worker_adapter_->abandon_stores();
      }
    }
  }
  if (loads_failed) {
    ++stats_.stalled_loads;
    for (const lm::ReqMeta& m : meta_.requests)
      if (m.load_spec) fail_whole_load(m);
    log.loaded.clear();
  }
  if (stores_failed) {
    ++stats_.failed_stores;
    log.stored.clear();
  }
  engine_->end_of_operation();
  std::map<int, uint64_t> by_tier;
  std::vector<KvObject> disk_objects;  // keyed_disk_io_: one per layer object read from disk
  uint64_t to_gpu = 0;
  const int num_layers = engine_->num_layers();
  // Which request each loaded chunk is for: retrieve_layer calls run in metadata order, one per
  // request with a LoadSpec, each appending its chunks. `request` is its index in meta_.requests
  // (meta_.requests.size() when unknown), `live` the request itself (null once gone).
  struct Owner {
    EngineRequest* live;
    size_t request;
  };
  std::vector<Owner> owner;
  owner.reserve(log.loaded.size());
  {
    size_t m = 0;
    for (const lm::AdapterCall& call : log.calls) {
      if (call.kind != lm::AdapterCall::Kind::kRetrieveLayer) continue;
      while (m < meta_.requests.size() && !meta_.requests[m].load_spec) ++m;
      Owner o{nullptr, m};
      if (m < meta_.requests.size()) {
        auto it = requests_.find(meta_.requests[m].req_id);
        if (it != requests_.end()) o.live = it->second.live;
        ++m;
      }
      owner.insert(owner.end(), call.num_loaded, o);
    }
  }
  // Each chunk read from disk or Redis, for fail_load_from should its tier's read fail (which
  // only a real tier's does). Made only for a step that reads a tier.
  struct Read {
    int tier;
    size_t request;  // index in meta_.requests
    int64_t start;   // the chunk's first token
  };
  std::shared_ptr<std::vector<Read>> reads;
  for (size_t i = 0; i < log.loaded.size(); ++i) {
    const lm::LoadedChunk& c = log.loaded[i];
    int t = tier_of(c.location);
    uint64_t b = object_bytes(c.end - c.start);
    if (i < owner.size() && owner[i].live != nullptr)
      owner[i].live->record.loaded_tokens[t] += c.end - c.start;
    if (t != report::kTierCpu && i < owner.size() && owner[i].request < meta_.requests.size()) {
      if (!reads) reads = std::make_shared<std::vector<Read>>();
      reads->push_back({t, owner[i].request, c.start});
    }
    if (t != report::kTierCpu) by_tier[t] += b;
    if (t == report::kTierDisk && keyed_disk_io_) {
      // Each layer's file holds an equal share of the chunk's bytes.
      const uint64_t layer_bytes = b / static_cast<uint64_t>(num_layers);
      for (int l = 0; l < num_layers; ++l) {
        const uint64_t own = l + 1 < num_layers ? layer_bytes : b - layer_bytes * (num_layers - 1);
        disk_objects.push_back(disk_object(c.key.layer(l), own));
      }
    }
    to_gpu += b;
  }
  uint64_t stored = 0;
  for (const lm::TokenRange& r : log.stored) stored += object_bytes(r.end - r.start);
  stats_.stored_chunks += log.stored.size();
  for (const auto& [r, layers] : dropped_stores)  // a chunk's layers hold equal shares
    stored += object_bytes(r.end - r.start) / static_cast<uint64_t>(num_layers) *
              static_cast<uint64_t>(layers);
  auto invalid = worker_adapter_->get_block_ids_with_load_errors();
  invalid_.insert(invalid.begin(), invalid.end());
  loads_done_ = -1;
  pending_ = 0;
  if (to_gpu > 0) {
    ++pending_;
    start_fetches(
        by_tier, std::move(disk_objects), to_gpu,
        [this] {
          loads_done_ = ctx_.sim->now();
          if (--pending_ == 0 && on_idle_) on_idle_();
        },
        [this, reads](int tier) {
          // Layerwise reads are non-blocking gets: the health monitor does not count them. Each
          // request that read the tier fails from its first chunk there.
          if (!reads) return;
          std::map<size_t, int64_t> first;  // request index -> first token read from the tier
          for (const Read& r : *reads) {
            if (r.tier != tier) continue;
            auto [at, fresh] = first.emplace(r.request, r.start);
            if (!fresh) at->second = std::min(at->second, r.start);
          }
          for (const auto& [index, token] : first) fail_load_from(meta_.requests[index], token);
        });
  } else {
    loads_done_ = ctx_.sim->now();
  }
  if (stored > 0) {
    ++pending_;
    ctx_.sim->schedule_after(per_layer_ns_, [this, stored] {
      Transfer t{Location::kGpu, Location::kCpu, ctx_.instance, "store", {}};
      t.objects.push_back(KvObject{"stored chunks", stored, -1, {}});
      ctx_.mover->start(std::move(t), [this](const TransferResult&) {
        if (--pending_ == 0 && on_idle_) on_idle_();
      });
    });
  }
  ready();
}

// Every vLLM block that the request expected from LMCache becomes invalid (recomputed).
void LmcacheConnector::fail_whole_load(const lm::ReqMeta& m) {
  fail_load_from(m, 0);
}

void LmcacheConnector::fail_load_from(const lm::ReqMeta& m, int64_t token) {
  const lm::LoadSpec& ls = *m.load_spec;
  const int64_t end =
      std::min<int64_t>(ls.lmcache_cached_tokens, static_cast<int64_t>(m.num_slots()));
  const int64_t bs = adapter_config_.vllm_block_size;
  for (int64_t i = std::max(token, ls.vllm_cached_tokens); i < end; ++i)
    invalid_.insert(static_cast<model::vllm::BlockId>(m.slot(static_cast<size_t>(i)) / bs));
}

void LmcacheConnector::fail_stage_read(const LoadStage& stage, size_t first_failed) {
  if (stage.starts.empty()) return;
  fail_load_from(meta_.requests[stage.request],
                 stage.starts[std::min(first_failed, stage.starts.size() - 1)]);
}

// Upstream's start_load_kv retrieves request after request, and each retrieve reads its chunks
// (disk reads inside get_blocking, Redis GETs) and copies them to the GPU before the next one
// starts. So request k's retrieve runs here after request k - 1's stages: only then may its
// allocations find what the writes finishing meanwhile freed.
void LmcacheConnector::load_bulk() {
  load_from(0);
}

void LmcacheConnector::load_from(size_t index) {
  for (; index < meta_.requests.size(); ++index) {
    if (!meta_.requests[index].load_spec) continue;
    catch_up_health();  // a later request's retrieve runs after the earlier ones' transfers
    load_index_ = index;
    wait_sleeps_ = 0;
    // No write in flight, or no disk tier: no get can sleep (none becomes in flight while the
    // retrieve runs on this stack), so the fiber's switches are saved.
    if (writes_in_flight_ == 0 || engine_->storage_manager().local_disk() == nullptr) {
      retrieve_request();
    } else {
      load_fiber_.start([this] { retrieve_request(); });
      if (load_fiber_.suspended()) return;  // resume_load goes on
    }
    if (charge_request()) return;  // the last stage goes on
  }
  auto invalid = worker_adapter_->get_block_ids_with_load_errors();
  invalid_.insert(invalid.begin(), invalid.end());
  fire_ready();
}

void LmcacheConnector::resume_load() {
  load_fiber_.resume();
  if (load_fiber_.suspended()) return;
  if (ctx_.recorder != nullptr)  // the retrieve ended: its wait is one span of the timeline
    ctx_.recorder->on_memory_wait(ctx_.instance, wait_start_, ctx_.sim->now() - wait_start_,
                                  wait_sleeps_);
  if (!charge_request()) load_from(load_index_ + 1);
}

bool LmcacheConnector::charge_request() {
  if (!load_stages_) return false;
  run_load_stages(std::move(load_stages_), 0);
  return true;
}

// Upstream's engine thread sleeps 0.1 s and tries the pool again; the writes in flight finish
// meanwhile (each frees its object, or makes the CPU tier's copy evictable). When none is in
// flight, nothing the simulator models frees memory: the engine's own loads and stores wait for
// this one, and what holds the pool is references (upstream waits for ever) or pins (upstream's
// PinMonitor, not modelled, force-unpins them after lmcache's pin timeout, 300 s by default).
bool LmcacheConnector::sleep(double seconds) {
  if (!load_fiber_.inside() || writes_in_flight_ == 0) return false;
  const SimDuration d = from_seconds(seconds);
  if (wait_sleeps_++ == 0) {  // the load's first sleep
    ++stats_.memory_waits;
    wait_start_ = ctx_.sim->now();
  }
  stats_.memory_wait_ns += d;
  ctx_.sim->schedule_after(d, [this] { resume_load(); });
  load_fiber_.suspend();
  return true;
}

// The retrieve of meta_.requests[load_index_]; its stages (if it loaded anything) in
// load_stages_, so that the tiers that served it are attributed to it and charged in upstream's
// order. Allocated only for a request that loads.
void LmcacheConnector::retrieve_request() {
  const size_t index = load_index_;
  const lm::ReqMeta& m = meta_.requests[index];
  lm::ConnectorMetadata one;
  one.requests.push_back(m);
  lm::WorkerLog log;
  try {
    worker_adapter_->start_load_kv(one, &log);
  } catch (const lm::UpstreamError& e) {
    // A get found no evictable CPU memory and could not wait (WouldBusyWait), or retrieve
    // raised. A disk get waits (sleep()) while writes are in flight. Upstream's Redis get sleeps
    // on the storage manager's event loop, blocking every Redis job, while the retrieve waits up
    // to blocking_timeout_secs for it (not modelled), and an exception stops the engine. The
    // simulator turns the request's whole external load into a recompute and counts a stalled
    // load.
    engine_->end_of_operation();
    ++stats_.stalled_loads;
    fail_whole_load(m);
    return;
  }
  engine_->end_of_operation();
  auto it = requests_.find(m.req_id);
  EngineRequest* live = it != requests_.end() ? it->second.live : nullptr;
  uint64_t from_disk = 0, to_gpu = 0;
  std::vector<uint64_t> remote_chunks;  // one GET job each
  std::vector<KvObject> disk_objects;   // keyed_disk_io_ only
  std::vector<int64_t> disk_starts, remote_starts;
  for (const lm::LoadedChunk& c : log.loaded) {
    int t = tier_of(c.location);
    int64_t tokens = c.end - c.start;
    uint64_t b = object_bytes(tokens);
    if (live != nullptr) live->record.loaded_tokens[t] += tokens;
    if (t == report::kTierDisk && !c.prefetched) {
      from_disk += b;
      disk_starts.push_back(c.start);
      if (keyed_disk_io_) disk_objects.push_back(disk_object(c.key, b));
    }
    if (t == report::kTierRemote && !c.prefetched) {
      remote_chunks.push_back(b);
      remote_starts.push_back(c.start);
    }
    if (c.bad) ++stats_.wrong_kv_chunks;
    to_gpu += b;
  }
  if (to_gpu == 0) return;
  auto stages = std::make_shared<std::vector<LoadStage>>();
  if (from_disk > 0)
    stages->push_back({LoadStage::kFetchDisk,
                       from_disk,
                       {},
                       std::move(disk_objects),
                       index,
                       std::move(disk_starts)});
  if (!remote_chunks.empty())
    stages->push_back({LoadStage::kFetchRemote,
                       0,
                       std::move(remote_chunks),
                       {},
                       index,
                       std::move(remote_starts)});
  if (broadcast_ns(to_gpu) > 0) stages->push_back({LoadStage::kBroadcast, to_gpu});
  stages->push_back({LoadStage::kToGpu, to_gpu});
  load_stages_ = std::move(stages);
}

void LmcacheConnector::run_load_stages(std::shared_ptr<const std::vector<LoadStage>> stages,
                                       size_t next) {
  if (next == stages->size()) {
    load_from(load_index_ + 1);
    return;
  }
  const LoadStage& st = (*stages)[next];
  auto then = [this, stages, next] { run_load_stages(stages, next + 1); };
  if (st.kind == LoadStage::kBroadcast) {
    ctx_.sim->schedule_after(broadcast_ns(st.bytes), then);
    return;
  }
  if (st.kind == LoadStage::kFetchRemote) {
    // RemoteBackend.batched_get_blocking: one GET job per key, all submitted at once; each runs
    // on a Redis worker (GET of the metadata, then of the bytes) as workers come free.
    get_queue_.assign(st.chunks.begin(), st.chunks.end());
    gets_start_ = ctx_.sim->now();
    get_finish_.assign(st.chunks.size(), 0);
    gets_left_ = st.chunks.size();
    gets_stage_ = &st;
    first_failed_get_ = st.chunks.size();
    gets_done_ = then;
    dispatch_remote();
    return;
  }
  Transfer t = st.kind == LoadStage::kToGpu ? to_gpu_transfer(st.bytes)
                                            : fetch_transfer(Location::kDisk, st.bytes);
  if (!st.objects.empty()) t.objects = st.objects;  // the same bytes, one keyed object per chunk
  ctx_.mover->start(std::move(t), [this, &st, then](const TransferResult& r) {
    if (st.kind == LoadStage::kFetchDisk) {
      const auto bad = std::find(r.ok.begin(), r.ok.end(), uint8_t{0});
      if (bad != r.ok.end()) fail_stage_read(st, static_cast<size_t>(bad - r.ok.begin()));
    }
    then();
  });
}

KvObject LmcacheConnector::disk_object(const lm::CacheEngineKey& key, uint64_t bytes) const {
  return KvObject{key.to_string(), bytes * static_cast<uint64_t>(tier_ranks()), -1, {}};
}

Transfer LmcacheConnector::fetch_transfer(Location src, uint64_t bytes) const {
  Transfer t{src, Location::kCpu, ctx_.instance, "fetch", {}};
  t.objects.push_back(
      KvObject{"fetched chunks", bytes * static_cast<uint64_t>(tier_ranks()), -1, {}});
  return t;
}

Transfer LmcacheConnector::to_gpu_transfer(uint64_t bytes) const {
  Transfer t{Location::kCpu, Location::kGpu, ctx_.instance, "retrieve", {}};
  t.objects.push_back(KvObject{"loaded chunks", bytes, -1, {}});
  return t;
}

void LmcacheConnector::fire_ready() {
  std::exchange(step_ready_, nullptr)();
}

void LmcacheConnector::fire_done() {
  ++metas_ended_;
  while (!retiring_.empty() && retiring_.front().first <= metas_ended_) {
    retire(retiring_.front().second);
    retiring_.pop_front();
  }
  std::set<model::vllm::BlockId> invalid;
  invalid.swap(invalid_);
  std::exchange(step_done_, nullptr)(invalid);
}

// Layerwise loads: tier → CPU fetches (disk and remote in parallel), then one CPU → GPU copy of
// everything (the per-layer pipeline overlaps them with the layers).
void LmcacheConnector::start_fetches(const std::map<int, uint64_t>& bytes_by_tier,
                                     std::vector<KvObject> disk_objects, uint64_t to_gpu_bytes,
                                     std::function<void()> done,
                                     std::function<void(int)> failed_tier) {
  auto h2d = [this, to_gpu_bytes, done = std::move(done)] {
    ctx_.mover->start(to_gpu_transfer(to_gpu_bytes), [done](const TransferResult&) { done(); });
  };
  if (bytes_by_tier.empty()) {
    h2d();
    return;
  }
  auto remaining = std::make_shared<int>(static_cast<int>(bytes_by_tier.size()));
  auto after = std::make_shared<std::function<void()>>(std::move(h2d));
  for (const auto& [tier, bytes] : bytes_by_tier) {
    Location src = tier == report::kTierDisk ? Location::kDisk : Location::kRemote;
    Transfer t = fetch_transfer(src, bytes);
    if (src == Location::kDisk && !disk_objects.empty()) t.objects = std::move(disk_objects);
    ctx_.mover->start(std::move(t), [remaining, after, failed_tier, tier](const TransferResult& r) {
      if (!r.all_ok() && failed_tier) failed_tier(tier);
      if (--*remaining == 0) (*after)();
    });
  }
}

// wait_for_save; an upstream exception (a bug upstream would crash on) drops the step's stores.
void LmcacheConnector::save(lm::WorkerLog* log) {
  try {
    worker_adapter_->wait_for_save(meta_, log);
  } catch (const lm::UpstreamError&) {
    ++stats_.failed_stores;
    log->stored.clear();
  }
  engine_->end_of_operation();
}

void LmcacheConnector::end_step(const SchedulerOutput& /*out*/,
                                std::function<void(const std::set<model::vllm::BlockId>&)> done) {
  catch_up_health();
  step_done_ = std::move(done);
  if (config_.use_layerwise) {
    lm::WorkerLog log;
    save(&log);
    release_writes();
    drain_storage_events();
    // The last layer computes after its load; stores run until they finish.
    auto finish = [this] {
      SimTime earliest = loads_done_ + per_layer_ns_;
      SimTime now = ctx_.sim->now();
      auto fin = [this] { fire_done(); };
      if (earliest > now)
        ctx_.sim->schedule_at(earliest, fin);
      else
        ctx_.sim->schedule_after(0, fin);
    };
    if (pending_ == 0) {
      finish();
    } else {
      on_idle_ = [this, finish] {
        on_idle_ = nullptr;
        finish();
      };
    }
    return;
  }
  store_from(0, /*after_copy=*/false);
}

// Upstream's wait_for_save stores request after request; each store copies its chunks GPU → CPU
// (synchronously: the step waits) and only then queues their disk / remote writes, which run
// off the critical path. An upstream exception (a bug upstream would crash on) drops the step's
// remaining stores.
void LmcacheConnector::store_from(size_t i, bool after_copy) {
  catch_up_health();
  while (i < meta_.requests.size()) {
    lm::ConnectorMetadata one;
    one.requests.push_back(meta_.requests[i++]);
    lm::WorkerLog log;
    bool failed = false;
    try {
      worker_adapter_->wait_for_save(one, &log);
    } catch (const lm::UpstreamError&) {
      // log.stored keeps the chunks copied off the GPU before the raise (the puts raised): the
      // copy is charged, and nothing after it runs.
      ++stats_.failed_stores;
      failed = true;
    }
    engine_->end_of_operation();
    if (prefetch_) prefetch_->memory_changed();  // retrieves and stores released objects
    uint64_t stored = 0;
    for (const lm::TokenRange& r : log.stored) stored += object_bytes(r.end - r.start);
    stats_.stored_chunks += log.stored.size();
    drain_storage_events();
    if (failed) i = meta_.requests.size();  // the step's later stores are dropped
    if (stored == 0) continue;
    Transfer t{Location::kGpu, Location::kCpu, ctx_.instance, "store", {}};
    t.objects.push_back(KvObject{"stored chunks", stored, -1, {}});
    t.host_waits = static_cast<uint32_t>(log.stored.size());  // from_gpu syncs after each chunk
    ctx_.mover->start(std::move(t), [this, i](const TransferResult&) {
      release_writes();
      store_from(i, /*after_copy=*/true);
    });
    return;
  }
  release_writes();
  if (after_copy) {
    fire_done();  // in the last copy's completion event
  } else {
    ctx_.sim->schedule_after(0, [this] { fire_done(); });
  }
}

void LmcacheConnector::release_writes() {
  write_release_mark_ = engine_->storage_manager().next_write_id();
  start_writes();
}

// Queues every released disk / remote write the model submitted and not yet seen, then starts
// queued disk writes while a disk writer worker is free (LMCache's disk writer runs 4, FIFO) and
// hands free Redis workers out (dispatch_remote). A write completes in the model when its bytes
// have moved; only then does its key become visible to lookups.
void LmcacheConnector::start_writes() {
  lm::StorageEvents& events = engine_->storage_manager().events();
  events.disk_writes_submitted = 0;
  events.remote_writes_submitted = 0;
  if (next_unseen_write_ < write_release_mark_) {  // released writes not queued yet
    // Ids are handed out in increasing order: every pending write below next_unseen_write_ was
    // queued by an earlier scan (and leaves the pending lists when done).
    for (lm::PendingWrite& w :
         engine_->storage_manager().pending_writes(next_unseen_write_, keyed_disk_io_)) {
      if (w.id >= write_release_mark_) continue;
      write_queue_[w.tier == lm::Tier::kDisk ? 0 : 1].push_back(std::move(w));
      ++writes_in_flight_;
    }
    next_unseen_write_ = write_release_mark_;
  }
  constexpr int q = 0;  // disk; the Redis workers are dispatch_remote's
  while (start_prefetch_job(q)) {
  }
  while (workers_busy_[q] < kWriteWorkers && !write_queue_[q].empty()) {
    lm::PendingWrite w = std::move(write_queue_[q].front());
    write_queue_[q].pop_front();
    ++workers_busy_[q];
    // The write id and the queue in one word, so that the callback (this + 8 bytes) is stored
    // inline in its std::function instead of allocated.
    const uint64_t id_and_queue = w.id << 1 | static_cast<uint64_t>(q);
    Transfer t{Location::kCpu, Location::kDisk, ctx_.instance, "write", {}};
    t.objects.push_back(
        keyed_disk_io_ ? disk_object(w.keys.at(0), w.bytes)
                       : KvObject{"write", w.bytes * static_cast<uint64_t>(tier_ranks()), -1, {}});
    ctx_.mover->start(std::move(t),
                      [this, id_and_queue](const TransferResult&) { finish_write(id_and_queue); });
  }
  dispatch_remote();
}

void LmcacheConnector::finish_write(uint64_t id_and_queue) {
  engine_->storage_manager().complete_write(id_and_queue >> 1);
  engine_->end_of_operation();
  --workers_busy_[id_and_queue & 1];
  --writes_in_flight_;
  if (prefetch_) prefetch_->memory_changed();
  drain_storage_events();
  start_writes();  // a freed Redis worker goes to a waiting EXISTS or GET before a queued put
}

void LmcacheConnector::dispatch_remote() {
  constexpr int q = 1;
  while (workers_busy_[q] < kWriteWorkers) {
    if (exists_waiting_ > 0) {
      run_exists(std::exchange(exists_waiting_, 0));  // takes a worker
      continue;
    }
    if (start_prefetch_job(q)) continue;
    if (!get_queue_.empty()) {
      // The fetch's keys leave the queue in order: the front is key size - queued.
      const size_t key = get_finish_.size() - get_queue_.size();
      const uint64_t bytes = get_queue_.front();
      get_queue_.pop_front();
      ++workers_busy_[q];
      // GET "<key>metadata" (one round trip), then GET "<key>kv_bytes" (a transfer: its round
      // trip and the bytes).
      ctx_.sim->schedule_after(
          from_seconds(s_.links.network_latency_us * 1e-6), [this, bytes, key] {
            ctx_.mover->start(fetch_transfer(Location::kRemote, bytes),
                              [this, key](const TransferResult& r) {
                                if (!r.all_ok())
                                  first_failed_get_ = std::min(first_failed_get_, key);
                                finish_get(key);
                              });
          });
      continue;
    }
    if (write_queue_[q].empty()) break;
    lm::PendingWrite w = std::move(write_queue_[q].front());
    write_queue_[q].pop_front();
    ++workers_busy_[q];
    const uint64_t id_and_queue = w.id << 1 | static_cast<uint64_t>(q);
    if (w.bytes == 0) {
      // Every object fails to serialize (a remote write of layerwise objects under
      // Quirks::remote_metadata_requires_4d_shapes): the job fails before sending anything.
      ctx_.sim->schedule_after(0, [this, id_and_queue] { finish_write(id_and_queue); });
      continue;
    }
    // SET "<key>kv_bytes" (a transfer: its round trip and the bytes), then SET "<key>metadata"
    // (one round trip): the key is visible, and the worker free, after the second.
    Transfer t{Location::kCpu, Location::kRemote, ctx_.instance, "write", {}};
    t.objects.push_back(
        KvObject{"write", w.bytes * static_cast<uint64_t>(remote_writer_ranks()), -1, {}});
    ctx_.mover->start(std::move(t), [this, id_and_queue](const TransferResult&) {
      ctx_.sim->schedule_after(from_seconds(s_.links.network_latency_us * 1e-6),
                               [this, id_and_queue] { finish_write(id_and_queue); });
    });
  }
}

// A retrieve's GET of key `key` (its index in the fetch) is done: its worker is free.
void LmcacheConnector::finish_get(size_t key) {
  --workers_busy_[1];
  get_finish_[key] = ctx_.sim->now();
  if (--gets_left_ == 0) {
    count_blocking_get_timeout();
    if (first_failed_get_ < get_finish_.size()) {
      // batched_get_blocking found a value missing: one failed blocking read for the monitor.
      if (health_remote_) health_remote_->add_failed_reads(1);
      fail_stage_read(*gets_stage_, first_failed_get_);
    }
    gets_stage_ = nullptr;
    std::exchange(gets_done_, nullptr)();
  }
  start_writes();
}

void LmcacheConnector::count_blocking_get_timeout() {
  const size_t first = first_blocking_get_timeout(
      gets_start_, get_finish_,
      from_seconds(static_cast<double>(s_.lmcache.blocking_timeout_secs)));
  if (first == get_finish_.size()) return;
  ++stats_.blocking_get_timeouts;
  stats_.blocking_get_timeout_chunks += get_finish_.size() - first;
}

void LmcacheConnector::run_prefetch_job(int q, std::function<void()> job) {
  prefetch_jobs_[q].push_back(std::move(job));
  start_writes();  // dispatches it at once when a worker is free
}

bool LmcacheConnector::start_prefetch_job(int q) {
  if (workers_busy_[q] >= kWriteWorkers || prefetch_jobs_[q].empty()) return false;
  ++workers_busy_[q];
  std::function<void()> job = std::move(prefetch_jobs_[q].front());
  prefetch_jobs_[q].pop_front();
  job();
  return true;
}

void LmcacheConnector::prefetch_job_done(int q) {
  --workers_busy_[q];
  start_writes();
}

void LmcacheConnector::drain_storage_events() {
  auto& events = engine_->storage_manager().events();
  for (const auto& r : events.removed) {
    stats_.evictions[r.tier == lm::Tier::kDisk     ? report::kTierDisk
                     : r.tier == lm::Tier::kRemote ? report::kTierRemote
                                                   : report::kTierCpu] += 1;
    // LMCache deleted the chunk's file: the page cache drops it.
    if (keyed_disk_io_ && r.tier == lm::Tier::kDisk)
      ctx_.mover->discard(Location::kDisk, ctx_.instance, r.key.to_string());
  }
  events.removed.clear();  // the write counters are start_writes' signal
  stats_.failed_remote_writes += std::exchange(events.remote_write_errors, 0);
}

// save_only_first_rank: rank 0's loads reach the other ranks by one NCCL broadcast over NVLink
// after the CPU → GPU copy. A pipelined broadcast moves each byte once over each link: bytes over
// the bus bandwidth (gpu.allreduce_gbps), rounded up to the ns as the modelled links round a
// transfer, plus one latency (converted as the links convert theirs).
SimDuration LmcacheConnector::broadcast_ns(uint64_t bytes) const {
  if (tier_ranks() == ctx_.geometry->tp) return 0;  // every rank loads its own
  const double ns = std::ceil(static_cast<double>(bytes) / s_.gpu.allreduce_gbps);  // GB/s = B/ns
  return static_cast<SimDuration>(ns) + from_seconds(s_.gpu.allreduce_latency_us * 1e-6);
}

int LmcacheConnector::tier_ranks() const {
  if (engine_->save_only_first_rank() && !config_.use_layerwise) return 1;
  return ctx_.geometry->tp;
}

int LmcacheConnector::remote_writer_ranks() const {
  return lm::mla_worker_id_as0(config_, metadata_) ? 1 : tier_ranks();
}

double LmcacheConnector::cpu_bytes() const {
  return static_cast<double>(engine_->storage_manager().allocator().total_allocated_size());
}

double LmcacheConnector::disk_bytes() const {
  const lm::LocalDiskBackend* d = engine_->storage_manager().local_disk();
  return d ? static_cast<double>(d->current_cache_size()) : 0;
}

double LmcacheConnector::disk_leaked_bytes() const {
  const lm::LocalDiskBackend* d = engine_->storage_manager().local_disk();
  if (d == nullptr) return 0;
  const int64_t leaked =
      d->current_cache_size() - static_cast<int64_t>(d->resident_bytes() + d->in_flight_bytes());
  return leaked > 0 ? static_cast<double>(leaked) : 0;
}

double LmcacheConnector::remote_bytes() const {
  if (!config_.remote) return 0;
  return static_cast<double>(ctx_.shared.remote->kv_bytes_total());
}

const LmcacheTierStats& LmcacheConnector::stats() {
  catch_up_health();
  if (const lm::RemoteBackend* remote = engine_->storage_manager().remote())
    stats_.failed_remote_gets = remote->get_blocking_failed_total();
  if (health_) {
    stats_.unhealthy_periods = health_->unhealthy_periods();
    stats_.unhealthy_ns = health_->unhealthy_ns(ctx_.sim->now());
  }
  drain_storage_events();
  if (prefetch_) {
    stats_.prefetch_bytes = prefetch_->stats().bytes;
    stats_.prefetch_busy_waits = prefetch_->stats().busy_wait_retries;
  }
  return stats_;
}

}  // namespace kvtwin::sim::engine
