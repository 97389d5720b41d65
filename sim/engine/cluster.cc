#include "sim/engine/cluster.h"

#include <cstdio>
#include <stdexcept>

#include "model/check.h"
#include "model/vllm/hashing.h"
#include "sim/hw/profile_step_model.h"
#include "sim/hw/roofline.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::engine {
namespace {

std::unique_ptr<hw::StepModel> make_step_model(const scenario::Scenario& s,
                                               const hw::ModelGeometry& g) {
  if (s.step.model == "profile") {
    auto p =
        std::make_unique<hw::ProfileStepModel>(scenario::scenario_relative_path(s, s.step.profile));
    p->num_layers_hint = g.num_layers;
    return p;
  }
  return std::make_unique<hw::RooflineStepModel>(g, s.gpu);
}

std::unique_ptr<model::vllm::RequestBlockHasher> make_hasher(const scenario::Scenario& s,
                                                             const KvCacheLayout& layout) {
  if (!layout.enable_caching) return nullptr;
  auto fn = *model::vllm::hash_fn_from_name(s.vllm.prefix_caching_hash_algo);
  // NONE_HASH as vLLM derives it with PYTHONHASHSEED set to the run seed.
  model::vllm::BlockHasher hasher(fn, model::vllm::none_hash(fn, std::to_string(s.run.seed)));
  return std::make_unique<model::vllm::RequestBlockHasher>(layout.hash_block_size,
                                                           std::move(hasher));
}

}  // namespace

Cluster::Cluster(const scenario::Scenario& s, workload::Workload* workload,
                 report::RunRecorder* recorder, const MoverFactory& mover_factory)
    : s_(s),
      workload_(workload),
      recorder_(recorder),
      geometry_(hw::derive_geometry(s)),
      layout_(derive_kv_cache_layout(s, geometry_)),
      step_model_(make_step_model(s, geometry_)),
      tokens_(s.run.seed, s.model.vocab_size),
      hasher_(make_hasher(s, layout_)),
      prompt_hashes_(
          hasher_ ? std::make_unique<PromptHashMemo>(hasher_->hasher(), layout_.hash_block_size)
                  : nullptr),
      mover_(&sim_, s.links, s.cluster.instances),
      router_(Router::policy_from_name(s.cluster.router), layout_.hash_block_size) {
  if (layout_.num_blocks() * s.cluster.instances > kMaxGpuBlocksTotal)
    scenario::scenario_error(s, "cluster.instances",
                             std::to_string(s.cluster.instances) + " instances of " +
                                 std::to_string(layout_.num_blocks()) +
                                 " GPU blocks; the simulator holds at most " +
                                 std::to_string(kMaxGpuBlocksTotal) + " blocks in all");
  InstanceContext ctx;
  ctx.sim = &sim_;
  ctx.step_model = step_model_.get();
  ctx.tokens = &tokens_;
  ctx.recorder = recorder_;
  ctx.on_done = [this](EngineRequest* r) { on_done(r); };
  ctx.track_prefix_index = router_.needs_prefix_index();
  if (mover_factory) mover_override_ = mover_factory(sim_, mover_);
  Mover* mover = mover_override_ ? mover_override_.get() : &mover_;
  if (s.lmcache.enabled) {
    lmcache_registry_ = std::make_shared<model::lmcache::KeyScopeRegistry>();
    lmcache_remote_ = std::make_shared<model::lmcache::RemoteKvStore>();
  }
  for (int i = 0; i < s.cluster.instances; ++i) {
    LmcacheConnector* connector = nullptr;
    if (s.lmcache.enabled) {
      LmcacheConnector::Context c;
      c.sim = &sim_;
      c.mover = mover;
      c.instance = i;
      c.geometry = &geometry_;
      c.layout = &layout_;
      c.shared.disk = std::make_shared<model::lmcache::DiskDirectory>();  // per node
      c.shared.remote = lmcache_remote_;                                  // one for all
      c.registry = lmcache_registry_;
      c.recorder = recorder_;
      connectors_.push_back(std::make_unique<LmcacheConnector>(s, std::move(c)));
      connector = connectors_.back().get();
    }
    instances_.push_back(std::make_unique<Instance>(i, s, layout_, ctx, connector));
    instance_ptrs_.push_back(instances_.back().get());
    if (connector) {
      connector->attach(instances_.back().get());
      instances_.back()->set_hooks(connector);
    }
  }
  if (recorder_) {
    recorder_->set_prefix_caching(layout_.enable_caching);
    recorder_->set_gpu_kv_pool(layout_.num_blocks(),
                               static_cast<int64_t>(layout_.config.kv_cache_groups.size()),
                               layout_.kv_cache_tokens(), layout_.available_bytes / scenario::kGiB);
    recorder_->set_link_kinds(mover_.link_kinds());
    mover_.set_observer(
        [this](const Transfer& t, const TransferResult& r) { recorder_->on_transfer(t, r); });
  }
}

Cluster::~Cluster() = default;

void Cluster::run(const std::function<void(uint64_t)>& progress) {
  progress_ = progress;
  // Without a warm-up the window starts with the run and the counters at 0.
  const SimTime from = workload_->measure_from();
  if (from > 0 && from < kSimTimeMax) sim_.schedule_at(from, [this] { begin_measurement(); });
  pump();
  sim_.schedule_at(0, [this] { sample(); });
  sim_.run();
  if (!all_done()) throw std::runtime_error(stall_message());
  report_links();
}

// Nothing is scheduled to happen and requests remain: no event can ever finish them. Exact
// models of vLLM and LMCache can deadlock where upstream would hang; say where, not loop.
std::string Cluster::stall_message() const {
  static constexpr const char* kStatus[] = {"waiting", "waiting for a KV load", "running",
                                            "preempted", "finished"};
  char buf[160];
  std::snprintf(buf, sizeof buf, "the simulation stalled at %.6f s: %zu request%s can never finish",
                to_seconds(sim_.now()), live_.size(), live_.size() == 1 ? "" : "s");
  std::string msg = buf;
  size_t shown = 0;
  for (const auto& [index, r] : live_) {
    if (shown++ == 3) {
      msg += ", ...";
      break;
    }
    const model::vllm::Request* req = r->req.get();
    std::snprintf(buf, sizeof buf, "%s trace request %llu on instance %d (%s, %lld of %lld tokens)",
                  shown == 1 ? ":" : ",", static_cast<unsigned long long>(index), r->instance,
                  kStatus[static_cast<int>(r->status)],
                  static_cast<long long>(req ? req->num_computed_tokens : 0),
                  static_cast<long long>(req ? req->num_tokens() : r->record.prompt_tokens));
    msg += buf;
  }
  return msg;
}

void Cluster::pump() {
  if (!workload_->next(&next_)) {
    reading_done_ = true;
    return;
  }
  sim_.schedule_at(std::max(sim_.now(), next_.arrival), [this] { arrive(); });
}

void Cluster::begin_measurement() {
  if (!recorder_ || recorder_->measuring()) return;
  baseline_ = counters();
  mover_.reset_page_cache_peaks();
  recorder_->begin_measurement(sim_.now());
}

void Cluster::arrive() {
  const workload::TraceRequest& t = next_;
  if (!t.warmup) begin_measurement();
  auto r = std::make_unique<EngineRequest>();
  r->record.index = t.index;
  r->record.warmup = t.warmup;
  r->record.arrival = sim_.now();
  r->record.prompt_tokens = t.prompt_tokens;
  r->num_encoder_tokens = s_.model.encoder_tokens;
  r->priority = t.priority;
  r->record.priority = t.priority;
  EngineRequest* raw = r.get();
  live_.emplace(t.index, std::move(r));
  if (t.prompt_tokens >= s_.vllm.max_model_len) {  // vLLM rejects the prompt at admission
    raw->record.rejected = true;
    raw->record.finish = sim_.now();
    on_done(raw);
  } else {
    std::vector<model::vllm::TokenId> prompt;
    // The capacity the Request gives its tokens, so that moving the prompt in copies nothing.
    prompt.reserve(model::vllm::Request::token_capacity(static_cast<size_t>(t.prompt_tokens),
                                                        t.output_tokens));
    tokens_.prompt_tokens(t, &prompt);
    model::vllm::RequestOptions options;
    options.max_tokens = t.output_tokens;
    std::vector<model::vllm::BlockHash> known;  // the options carry no extra keys
    if (prompt_hashes_) {
      // Room for every block the request's tokens can fill, so that neither the memo's runs nor
      // the request's later blocks move the hashes.
      known.reserve(prompt.capacity() / static_cast<size_t>(layout_.hash_block_size) + 1);
      prompt_hashes_->prompt_hashes(t, prompt, &known);
    }
    raw->req =
        std::make_unique<model::vllm::Request>(std::to_string(t.index), std::move(prompt),
                                               std::move(options), hasher_.get(), std::move(known));
    int target = router_.route(instance_ptrs_, raw->req->block_hashes());
    instances_[static_cast<size_t>(target)]->add_request(raw);
  }
  pump();
}

void Cluster::on_done(EngineRequest* r) {
  if (recorder_) recorder_->on_request_done(r->record, r->itl);
  if (observer_) observer_(r->record);
  ++done_;
  if (!r->record.rejected && !r->record.load_error && !r->record.warmup) ++finished_;
  live_.erase(r->record.index);
  if (progress_ && done_ % 256 == 0) progress_(done_);
}

void Cluster::sample() {
  report::Sample s;
  s.t = sim_.now();
  double usage_sum = 0;
  for (const auto& inst : instances_) {
    s.running += static_cast<int64_t>(inst->num_running());
    s.waiting += static_cast<int64_t>(inst->num_waiting());
    double u = inst->kv_usage();
    usage_sum += u;
    s.gpu_kv_usage_max = std::max(s.gpu_kv_usage_max, u);
    s.computed_tokens += inst->computed_tokens();
  }
  s.gpu_kv_usage_mean = usage_sum / static_cast<double>(instances_.size());
  // LMCache tiers, every rank of every instance that holds them (rank 0 is modelled; ranks are
  // symmetric).
  for (const auto& c : connectors_) {
    s.tier_bytes[report::kTierCpu] += c->cpu_bytes() * c->tier_ranks();
    s.tier_bytes[report::kTierDisk] += c->disk_bytes() * c->tier_ranks();
  }
  if (!connectors_.empty())
    s.tier_bytes[report::kTierRemote] =
        connectors_[0]->remote_bytes() * connectors_[0]->remote_writer_ranks();
  s.finished = finished_;
  if (recorder_) {
    mover_.link_bytes(&s.link_bytes);
    recorder_->on_sample(s);
  }
  if (all_done()) return;
  // Only this sampler is left to run: nothing else will ever happen (the run would sample an
  // unchanging state until the clock ends).
  if (sim_.num_pending() == 0) throw std::runtime_error(stall_message());
  const SimDuration interval = from_seconds(s_.output.timeseries_interval_s);
  if (interval > kSimTimeMax - sim_.now()) return;  // the clock ends before the next sample
  SimTime next = sim_.now() + interval;
  const SimTime next_event = sim_.next_event_time();
  if (next_event > next) {
    // Samples at now + i·interval, i = 1..m, fall strictly before the next event; 1..m-1 repeat s.
    const int64_t m = (next_event - 1 - sim_.now()) / interval;
    if (m - 1 > kMaxRepeatedSamples) {
      if (recorder_) recorder_->on_repeated_samples(s, static_cast<uint64_t>(m - 1));
      next = sim_.now() + m * interval;
    }
  }
  sim_.schedule_at(next, [this] { sample(); });
}

Cluster::Counters Cluster::counters() {
  Counters c;
  for (const auto& inst : instances_) c.gpu_evictions += inst->gpu_evictions();
  for (const auto& conn : connectors_) {
    const LmcacheTierStats& st = conn->stats();
    c.stalled += st.stalled_loads;
    c.failed_stores += st.failed_stores;
    c.failed_remote_writes += st.failed_remote_writes;
    c.failed_remote_gets += st.failed_remote_gets;
    c.unhealthy_periods += st.unhealthy_periods;
    c.unhealthy_ns += st.unhealthy_ns;
    c.blocking_get_timeouts += st.blocking_get_timeouts;
    c.blocking_get_timeout_chunks += st.blocking_get_timeout_chunks;
    c.memory_waits += st.memory_waits;
    c.memory_wait_ns += st.memory_wait_ns;
    c.async.lookups += st.async_lookups;
    c.async.timeouts += st.async_lookup_timeouts;
    c.async.prefetch_bytes += st.prefetch_bytes;
    c.async.busy_waits += st.prefetch_busy_waits;
    c.async.wrong_kv_chunks += st.wrong_kv_chunks;
    for (int t = 0; t < report::kNumTiers; ++t) c.evicted[t] += st.evictions[t];
  }
  c.page_cache = mover_.page_cache_totals();
  c.links = mover_.link_reports();
  return c;
}

void Cluster::report_links() {
  if (!recorder_) return;
  // What happened in the window: the counters now less those at its start (zero without a
  // warm-up). Links are listed in the same order every time.
  const Counters now = counters();
  const Counters& base = baseline_;
  recorder_->set_gpu_evictions(static_cast<int64_t>(now.gpu_evictions - base.gpu_evictions));
  if (!connectors_.empty()) {
    using scenario::kGiB;
    const double ranks =
        static_cast<double>(connectors_.front()->tier_ranks()) * s_.cluster.instances;
    recorder_->set_tier_capacity(report::kTierCpu, s_.lmcache.max_local_cpu_size_gb * kGiB * ranks);
    recorder_->set_tier_capacity(report::kTierDisk,
                                 s_.lmcache.max_local_disk_size_gb * kGiB * ranks);
    double leaked = 0;
    for (const auto& conn : connectors_) leaked += conn->disk_leaked_bytes() * conn->tier_ranks();
    recorder_->set_disk_leaked_bytes(leaked);
    recorder_->set_lmcache_failures(now.stalled - base.stalled,
                                    now.failed_stores - base.failed_stores,
                                    now.failed_remote_writes - base.failed_remote_writes);
    report::Summary::AsyncLoading async;
    async.lookups = now.async.lookups - base.async.lookups;
    async.timeouts = now.async.timeouts - base.async.timeouts;
    async.prefetch_bytes = now.async.prefetch_bytes - base.async.prefetch_bytes;
    async.busy_waits = now.async.busy_waits - base.async.busy_waits;
    async.wrong_kv_chunks = now.async.wrong_kv_chunks - base.async.wrong_kv_chunks;
    recorder_->set_lmcache_async(async);
    report::Summary::Health health;
    health.failed_remote_gets = now.failed_remote_gets - base.failed_remote_gets;
    health.unhealthy_periods = now.unhealthy_periods - base.unhealthy_periods;
    health.unhealthy_s = to_seconds(now.unhealthy_ns - base.unhealthy_ns);
    recorder_->set_lmcache_health(health);
    recorder_->set_lmcache_memory_waits(now.memory_waits - base.memory_waits,
                                        to_seconds(now.memory_wait_ns - base.memory_wait_ns));
    recorder_->set_lmcache_blocking_get_timeouts(
        now.blocking_get_timeouts - base.blocking_get_timeouts,
        now.blocking_get_timeout_chunks - base.blocking_get_timeout_chunks);
    for (int t = 0; t < report::kNumTiers; ++t)
      recorder_->set_tier_evictions(t, now.evicted[t] - base.evicted[t]);
  }
  if (mover_.page_cache(0) != nullptr) {
    report::Summary::PageCache p;
    for (int i = 0; i < s_.cluster.instances; ++i) {
      p.capacity_bytes += static_cast<double>(mover_.page_cache(i)->capacity_bytes());
      p.peak_bytes += static_cast<double>(mover_.page_cache(i)->peak_bytes());
    }
    p.hit_bytes = now.page_cache.hit_bytes - base.page_cache.hit_bytes;
    p.miss_bytes = now.page_cache.miss_bytes - base.page_cache.miss_bytes;
    p.buffered_write_bytes =
        now.page_cache.buffered_write_bytes - base.page_cache.buffered_write_bytes;
    recorder_->set_page_cache(p);
  }
  const SimTime span = std::max<SimTime>(sim_.now() - recorder_->measure_from(), 1);
  for (size_t i = 0; i < now.links.size(); ++i) {
    const hw::ModeledMover::LinkReport& l = now.links[i];
    const double bytes = l.bytes - (i < base.links.size() ? base.links[i].bytes : 0);
    const SimDuration busy = l.busy_ns - (i < base.links.size() ? base.links[i].busy_ns : 0);
    recorder_->set_link_stats(l.kind, bytes, static_cast<double>(busy) / span, l.capacity);
  }
}

}  // namespace kvtwin::sim::engine
