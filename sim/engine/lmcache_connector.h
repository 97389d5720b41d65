// LmcacheConnector: LMCache inside one simulated vLLM instance — the scheduler side
// (KvConnector) and the worker side (StepHooks) of LMCache's vLLM v1 connector, driving
// model/lmcache's adapters, engine and tiers, and charging every byte to the transfer links.
//
// One LMCacheEngine models rank 0 of the instance's tensor-parallel group: ranks are symmetric
// (same tokens, same chunk keys, same object sizes per rank), so their decisions agree. Tier
// sizes (lmcache.max_local_*_size_gb) are per rank, as LMCache configures them per worker. PCIe
// is per GPU, so one rank's bytes are the step's critical path; node-wide links (disk, NIC,
// remote store) carry the bytes of every rank that holds tiers (tier_ranks()). With MLA, LMCache
// by default (save_only_first_rank, bulk mode) keeps tiers on rank 0 only, and the forward pass
// also waits for rank 0's NCCL broadcast of what it loaded (bytes over gpu.allreduce_gbps plus
// gpu.allreduce_latency_us; NVLink is not a modelled link); Redis gets rank 0's writes only
// (remote_enable_mla_worker_id_as0: the other ranks read rank 0's keys).
//
// Scheduler side: a synchronous lookup (get_num_new_matched_tokens) blocks vLLM's scheduler while
// every rank asks its tiers; the remote tier answers one EXISTS per chunk (until the first miss),
// each a round trip of links.network_latency_us on one of the Redis connector's kWriteWorkers
// workers, which its puts share (an EXISTS waits for a free one; between two EXISTS calls a queued
// put takes the worker). Async loading's lookups sleep one backoff per lookup sent and per check
// of a pending one. run_lookups charges a schedule's sleeps and EXISTS calls right after it: they
// block the engine core, and the batch the schedule built starts after them.
//
// Per step, bulk mode (use_layerwise = false), as vLLM's model runner calls the connector:
//
//   begin_step   start_load_kv: per request with a LoadSpec, in metadata order, retrieve
//                  (chunk-granular): its disk chunks → CPU, then its remote chunks → CPU (one
//                  tier after the other, as get_block_mapping orders them), then (MLA
//                  save_only_first_rank) rank 0's broadcast, then one CPU → GPU transfer of its
//                  chunks; the next request's retrieve starts after that; the forward pass waits
//                  for the last; a disk get that finds no evictable CPU memory sleeps 0.1 s at a
//                  time, as upstream's engine thread does, while disk / Redis writes are in
//                  flight (the retrieves run on a fiber; sleep()), and the step waits with it;
//                load errors → Scheduler::handle_invalid_blocks (kv_load_failure_policy)
//   forward      step model time
//   end_step     wait_for_save: store → one GPU → CPU transfer of the stored chunks (blocks the
//                  step, as LMCache's synchronous copy does; from_gpu synchronises its stream
//                  after each chunk, so the PCIe latency is paid per chunk, host_waits); the disk /
//                  remote writes it queued
//                  run asynchronously afterwards, each completing its write in the model
//                  (a key becomes visible to lookups only then)
//
// Async loading (lmcache.enable_async_loading): the scheduler-side lookup is LMCache's async
// lookup-and-prefetch. get_num_new_matched_tokens answers nullopt (vLLM skips the request this
// step and it holds no budget) until every rank answered; meanwhile LmcachePrefetchDriver moves the
// disk / remote chunks into the CPU pool through the mover, and the answer kicks the instance. The
// load then copies the prefetched objects CPU → GPU only. A prefetch job runs on its tier's
// workers, as upstream submits it: on the disk worker at priority 0 (before queued writes), on
// the Redis executor at PREFETCH priority (after the lookups' EXISTS, before GETs and puts; its
// GETs ask for the metadata first, one round trip); it waits while all four are busy.
//
// Layerwise mode: loads start with the step and stores one layer after it; the forward pass runs
// concurrently, and the step ends when the compute, the last layer's load + one layer of compute,
// and the stores have all finished.
//
// Threading: the simulation thread only.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/lmcache/cache_engine.h"
#include "model/lmcache/lookup_client.h"
#include "model/lmcache/vllm_scheduler_adapter.h"
#include "model/lmcache/vllm_worker_adapter.h"
#include "sim/engine/instance.h"
#include "sim/engine/kv_connector.h"
#include "sim/engine/lmcache_health.h"
#include "sim/engine/lmcache_prefetch.h"
#include "sim/fiber.h"
#include "sim/mover.h"
#include "sim/random.h"

namespace kvtwin::sim::engine {

struct LmcacheTierStats {
  std::array<uint64_t, report::kNumTiers> evictions{};
  uint64_t stored_chunks = 0;
  uint64_t stalled_loads = 0;          // loads upstream would wait on or raise in, recomputed
  uint64_t failed_stores = 0;          // steps whose store raised upstream (stores dropped)
  uint64_t failed_remote_writes = 0;   // chunk / layer objects the Redis writer could not send
  uint64_t async_lookups = 0;          // async lookups sent
  uint64_t async_lookup_timeouts = 0;  // answered 0 after lmcache.lookup_timeout_ms
  uint64_t prefetch_bytes = 0;         // disk / remote → CPU prefetch bytes (per rank)
  uint64_t prefetch_busy_waits = 0;    // prefetch retries for want of evictable CPU memory
  uint64_t wrong_kv_chunks = 0;        // loaded chunks holding another chunk's KV
  // The health monitor (lmcache.health_monitor, remote tier): failed blocking Redis reads (the
  // count it watches), times it turned LMCache off, and for how long in all (to now).
  uint64_t failed_remote_gets = 0;
  uint64_t unhealthy_periods = 0;
  SimDuration unhealthy_ns = 0;
  // Bulk remote fetches that upstream's blocking GET would have cut short (blocking_get.h), and
  // the chunks from the first timed-out GET on. Counted, not modelled: the chunks are loaded.
  uint64_t blocking_get_timeouts = 0;
  uint64_t blocking_get_timeout_chunks = 0;
  // Bulk loads whose disk get waited for CPU memory in upstream's busy loop (0.1-s sleeps until
  // in-flight writes free some), and the time they slept.
  uint64_t memory_waits = 0;
  SimDuration memory_wait_ns = 0;
};

class LmcacheConnector final : public KvConnector,
                               public StepHooks,
                               private model::lmcache::BusyLoopSleeper {
 public:
  struct Context {
    Simulator* sim = nullptr;
    Mover* mover = nullptr;
    int instance = 0;
    const hw::ModelGeometry* geometry = nullptr;
    const KvCacheLayout* layout = nullptr;
    model::lmcache::SharedStorage shared;  // disk directory (per instance) + remote (shared)
    std::shared_ptr<model::lmcache::KeyScopeRegistry> registry;
    report::RunRecorder* recorder = nullptr;  // the timeline's memory waits (optional)
  };
  LmcacheConnector(const scenario::Scenario& s, Context ctx);
  ~LmcacheConnector() override;

  // The instance whose scheduler this connector serves (set once, before any request).
  void attach(Instance* instance) { instance_ = instance; }

  // KvConnector.
  std::optional<Match> get_num_new_matched_tokens(EngineRequest& r,
                                                  int64_t num_local_computed) override;
  void update_state_after_alloc(EngineRequest& r, const model::vllm::KVCacheBlocks& blocks,
                                int64_t num_external_tokens) override;
  void build_connector_meta(const SchedulerOutput& output) override;
  void request_finished(EngineRequest& r) override;

  // StepHooks.
  void begin_step(const SchedulerOutput& out, const hw::StepTime& compute,
                  std::function<void()> ready) override;
  void end_step(const SchedulerOutput& out,
                std::function<void(const std::set<model::vllm::BlockId>&)> done) override;
  void run_lookups(std::function<void()> done) override;
  Blocking newest_blocking() const override;

  // Occupancy in bytes of the modelled rank (the cluster multiplies CPU and disk by tier_ranks(),
  // Redis by remote_writer_ranks()), and counters.
  double cpu_bytes() const;
  double disk_bytes() const;
  // The disk tier's reservation that neither an entry nor an in-flight write holds (LMCache's
  // disk accounting quirks; 0 with them fixed), per rank that holds tiers.
  double disk_leaked_bytes() const;
  double remote_bytes() const;
  // Ranks of the instance that hold CPU / disk tiers and read from disk and Redis: every rank, or
  // rank 0 alone under MLA's save_only_first_rank (bulk mode; layerwise stores on every rank).
  int tier_ranks() const;
  // Ranks whose writes reach Redis: tier_ranks(), or rank 0 alone for MLA (ranks other than 0 skip
  // their puts: model::lmcache::mla_worker_id_as0).
  int remote_writer_ranks() const;
  const LmcacheTierStats& stats();
  model::lmcache::LMCacheEngine& engine() { return *engine_; }

 private:
  struct RequestState {
    std::unique_ptr<model::lmcache::VllmRequest> mirror;  // the request as the adapters see it
    EngineRequest* live = nullptr;  // set once the scheduler asked for its matched tokens
    bool seen = false;              // scheduled at least once (new vs cached request data)
    // The memo of the request's chunk hashes (a vLLM request's tokens only grow), filled by its
    // lookups and used by its stores (the adapter's metadata points at it).
    model::lmcache::ChunkHashChain chunk_hashes;
  };
  RequestState& state_of(const EngineRequest& r);
  model::lmcache::VllmRequest& mirror(const EngineRequest& r) { return *state_of(r).mirror; }
  static void sync(model::lmcache::VllmRequest& m, const EngineRequest& r,
                   int64_t num_computed_tokens);
  // The synchronous lookups' EXISTS calls on the Redis workers, one after the other, then
  // exists_done_.
  void run_exists(uint64_t remaining);
  // Hands free Redis workers to waiting jobs by upstream's priorities: the lookup's EXISTS, then
  // a prefetch job, then the retrieve's GETs, then queued puts.
  void dispatch_remote();
  // Runs `job` on a worker of tier q (0 disk, 1 Redis) ahead of the tier's queued writes (and, on
  // Redis, its GETs); the job calls prefetch_job_done(q) when its transfer ends.
  void run_prefetch_job(int q, std::function<void()> job);
  // Gives a free worker of tier q to the oldest waiting prefetch job; false when none waits or
  // every worker is busy.
  bool start_prefetch_job(int q);
  void prefetch_job_done(int q);
  // The rest of begin_step: loads (bulk) or the layerwise pipeline; step_ready_ holds `ready`.
  void start_step_transfers();
  // Bulk mode: every load of the step, request after request from meta_.requests[index]
  // (load_from): the model's retrieve (retrieve_request, which leaves the request's stages in
  // load_stages_), then its stages (charge_request: false when it has none), then the next
  // request; after the last, fire_ready(). With a disk tier and writes in flight a retrieve runs
  // on load_fiber_: a disk get that finds no CPU memory sleeps in upstream's busy loop (sleep()),
  // and resume_load continues it 0.1 s later, while the simulation goes on.
  void load_bulk();
  void load_from(size_t index);
  void retrieve_request();
  bool charge_request();
  void resume_load();
  // BusyLoopSleeper, for the disk tier's get_blocking: inside a bulk load's retrieves and with
  // writes in flight (they free memory as they finish), suspends the load for `seconds` and
  // returns true; otherwise (nothing can free memory: upstream waits for ever) false.
  bool sleep(double seconds) override;
  // One stage of a bulk load. Upstream's start_load_kv retrieves request after request; each
  // retrieve reads its chunks tier after tier (disk, then remote: get_block_mapping's backend
  // order; the CPU tier needs no read), then rank 0 broadcasts them (MLA save_only_first_rank),
  // then they are copied to the GPU — each stage waiting for the one before.
  //
  // A read that the Mover reports failed (a real tier's fault under kvtwin validate
  // --timing=measured; modelled movers never fail) is a miss, as upstream's retrieve stopping at
  // a chunk it could not read: the request's blocks from that chunk on become load errors
  // (fail_load_from), and a failed Redis GET counts one failed blocking read for the health
  // monitor.
  struct LoadStage {
    enum Kind { kFetchDisk, kFetchRemote, kBroadcast, kToGpu } kind;
    uint64_t bytes;  // per rank that holds tiers (disk fetch), or per GPU; kFetchRemote: unused
    std::vector<uint64_t> chunks = {};  // kFetchRemote: each chunk's bytes (one GET job each)
    // kFetchDisk with a modelled page cache: one object per chunk, keyed (bytes of every rank).
    std::vector<KvObject> objects = {};
    // kFetchDisk, kFetchRemote: the request (meta_.requests[request]) and each read chunk's
    // first token, in read order (one per GET job, or per disk object when keyed).
    size_t request = 0;
    std::vector<int64_t> starts = {};
  };
  void run_load_stages(std::shared_ptr<const std::vector<LoadStage>> stages, size_t next);
  // A disk / Redis → CPU read of `bytes` per rank that holds tiers (node-wide links carry every
  // such rank's bytes), and the CPU → GPU copy of loaded chunks (PCIe: one GPU's bytes).
  Transfer fetch_transfer(Location src, uint64_t bytes) const;
  // keyed_disk_io_: the disk file of `key`, `bytes` per rank that holds tiers (the page cache's
  // unit).
  KvObject disk_object(const model::lmcache::CacheEngineKey& key, uint64_t bytes) const;
  Transfer to_gpu_transfer(uint64_t bytes) const;
  // Layerwise loads' reads; disk_objects (keyed_disk_io_): the disk read's objects, one per layer
  // file, replacing the aggregate. A tier's read that the Mover reports failed calls
  // failed_tier(tier) before the copy to the GPU.
  void start_fetches(const std::map<int, uint64_t>& bytes_by_tier,
                     std::vector<KvObject> disk_objects, uint64_t to_gpu_bytes,
                     std::function<void()> done, std::function<void(int)> failed_tier);
  // Starts queued writes while fewer than kWriteWorkers per tier are in flight; only writes below
  // the release mark (whose bytes reached CPU memory) start.
  void start_writes();
  // Everything queued so far may start: the copies that fill its objects are done.
  void release_writes();
  // Bulk mode: the step's stores from meta_.requests[i] on, one after the other (after_copy: called
  // from the previous store's copy completion).
  void store_from(size_t i, bool after_copy);
  SimDuration broadcast_ns(uint64_t bytes) const;  // rank 0's loads to the other ranks (MLA)
  void finish_write(uint64_t id_and_queue);        // a disk / remote write completed
  void drain_storage_events();
  uint64_t object_bytes(int64_t tokens) const;
  void inject_remote_faults();
  void fail_whole_load(const model::lmcache::ReqMeta& m);
  // The vLLM blocks of m's LMCache-loaded tokens from `token` on become load errors.
  void fail_load_from(const model::lmcache::ReqMeta& m, int64_t token);
  // A failed read of `stage`: chunk `first_failed` (in stage.starts) on is a miss.
  void fail_stage_read(const LoadStage& stage, size_t first_failed);
  void save(model::lmcache::WorkerLog* log);
  void inject_faults_into(const std::vector<model::lmcache::CacheEngineKey>& keys);

  const scenario::Scenario& s_;
  Context ctx_;
  // links.page_cache_gb > 0: disk transfers carry one object per chunk, keyed by its
  // CacheEngineKey string, and LMCache's disk deletions reach the mover (Mover::discard), so the
  // modelled page cache follows the files. Off: one aggregate object per disk transfer.
  bool keyed_disk_io_ = false;
  Instance* instance_ = nullptr;
  model::lmcache::LMCacheEngineConfig config_;
  model::lmcache::LMCacheMetadata metadata_;
  model::lmcache::AdapterConfig adapter_config_;
  std::unique_ptr<model::lmcache::LMCacheEngine> engine_;
  std::unique_ptr<model::lmcache::LMCacheLookupClient> lookup_client_;
  std::unique_ptr<model::lmcache::LMCacheSchedulerAdapter> scheduler_adapter_;
  std::unique_ptr<model::lmcache::LMCacheWorkerAdapter> worker_adapter_;

  // Per unfinished request, by request id (one look-up per scheduled request and step).
  std::unordered_map<std::string, RequestState> requests_;
  std::vector<std::string> finished_since_meta_;
  // Batches' metadata, built and not begun (one per batch in flight at most).
  std::deque<model::lmcache::ConnectorMetadata> built_;
  model::lmcache::ConnectorMetadata meta_;  // the batch the worker runs
  uint64_t metas_built_ = 0;                // batches built so far (non-empty schedules)
  uint64_t metas_ended_ = 0;                // batches whose end_step finished
  // Requests that finished while a batch holding their metadata was in flight (async
  // scheduling): their state stays until the batch numbered `first` has ended.
  std::deque<std::pair<uint64_t, std::string>> retiring_;
  void retire(const std::string& id);
  // build_connector_meta's input, kept between steps so its buffers are reused.
  model::lmcache::SchedulerOutput sched_out_;
  std::unordered_map<std::string, const model::lmcache::VllmRequest*> new_requests_;

  // The step in flight.
  std::set<model::vllm::BlockId> invalid_;  // blocks whose load failed in this step
  SimTime loads_done_ = -1;                 // layerwise: when the loads finished
  int pending_ = 0;                         // layerwise: transfers still running
  std::function<void()> on_idle_;
  SimDuration per_layer_ns_ = 0;
  // The instance's callbacks for the step in flight (ready: bulk mode; done: both modes), kept
  // here so that the events which fire them capture only `this` (no std::function is wrapped,
  // so none is allocated per step). fire_ready / fire_done take the callback out, then call it.
  std::function<void()> step_ready_;
  std::function<void(const std::set<model::vllm::BlockId>&)> step_done_;
  std::function<void()> exists_done_;   // run_exists' continuation
  std::function<void()> lookups_done_;  // run_lookups' callback
  void fire_ready();
  void fire_done();

  static constexpr int kWriteWorkers = 4;
  uint64_t writes_in_flight_ = 0;    // released disk / remote writes not finished
  uint64_t next_unseen_write_ = 0;   // pending writes with a smaller id are queued or in flight
  uint64_t write_release_mark_ = 0;  // pending writes with a smaller id may start
  std::array<std::deque<model::lmcache::PendingWrite>, 2> write_queue_;  // disk, remote
  // Workers in use: [0] the disk worker's (writes, prefetch reads), [1] the Redis connector's
  // (puts, lookups' EXISTS, prefetch jobs, retrieves' GETs); kWriteWorkers each.
  std::array<int, 2> workers_busy_{};
  std::array<std::deque<std::function<void()>>, 2> prefetch_jobs_;  // waiting for a worker

  std::unique_ptr<LmcachePrefetchDriver> prefetch_;  // async loading only
  // The lookups of the schedule under way (since the last build_connector_meta), which
  // run_lookups charges: backoff sleeps, EXISTS calls of the synchronous lookups.
  SimDuration sleep_ns_ = 0;
  uint64_t lookup_exists_ = 0;
  uint64_t exists_waiting_ = 0;      // EXISTS calls left, waiting for a Redis worker
  std::deque<uint64_t> get_queue_;   // GET jobs (chunk bytes) waiting for a Redis worker
  size_t gets_left_ = 0;             // GET jobs of the current fetch not finished
  std::function<void()> gets_done_;  // continues the bulk load after the last GET
  // The current fetch's start and each GET's finish, in key order (dispatch order), for the
  // blocking-timeout count.
  SimTime gets_start_ = 0;
  std::vector<SimTime> get_finish_;
  const LoadStage* gets_stage_ = nullptr;  // the current fetch's stage
  size_t first_failed_get_ = 0;            // its first GET the Mover reported failed (or size)
  void finish_get(size_t key);
  void count_blocking_get_timeout();

  // LMCache's health monitor (lmcache.health_monitor, with the remote tier): run before every
  // entry point touches the engine.
  class HealthRemote;
  void apply_health(bool healthy);
  bool original_use_hot_ = true;  // local_cpu fallback: use_hot before it
  void catch_up_health() {
    if (health_) health_->catch_up(ctx_.sim->now());
  }

  LmcacheTierStats stats_;
  Rng faults_;
  std::unique_ptr<HealthRemote> health_remote_;
  std::unique_ptr<LmcacheHealthMonitor> health_;

  // The bulk load under way: the request (index in meta_.requests), its stages (built by
  // retrieve_request), how often its retrieve slept and since when.
  size_t load_index_ = 0;
  std::shared_ptr<std::vector<LoadStage>> load_stages_;
  int64_t wait_sleeps_ = 0;
  SimTime wait_start_ = 0;
  // Last member: a load suspended at the end of a run is unwound before what it uses goes.
  Fiber load_fiber_;
};

}  // namespace kvtwin::sim::engine
