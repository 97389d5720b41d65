// Cluster: one whole simulation — the workload, the router, the serving instances, the shared
// remote tier, the modeled transfer links and the run recorder, on one Simulator.
//
// Requests stream in: the next trace row is read only when the previous one has arrived, so
// memory follows the requests in flight, not the trace. On arrival a request gets its token ids
// (TokenSynthesizer) and its vLLM Request (block hashes computed once, shared by router and
// instance), is routed, and leaves through the recorder when it finishes or is rejected (prompt
// not shorter than max_model_len, or larger than a whole KV pool, or tokens that outgrow the whole
// pool while it runs: vLLM would stall or preempt and recompute it forever).
//
// A sample of queues and occupancy is taken every output.timeseries_interval_s of virtual time
// while work remains. State changes only at events, so the samples that fall before the next
// pending event repeat the current one; when more than kMaxRepeatedSamples of them would (an idle
// gap in the trace), they are counted by the recorder without being taken or written, and the
// next sample taken is the last one before that event. Output stays proportional to the busy
// time, not to the span of the trace. run() returns when every request is done and no event is
// left.
//
// A warm-up (workload.warmup_s): the window starts at Workload::measure_from() or at the arrival of
// its first request, whichever comes first. There the recorder starts reporting and the cluster's
// counters (evictions, link bytes and busy time, page-cache and LMCache figures) are read, so that
// the summary gives what happened from there on; page-cache peaks start again. Warm-up requests
// run to their end like any other but are not reported.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "model/vllm/request_block_hasher.h"
#include "sim/engine/engine_request.h"
#include "sim/engine/instance.h"
#include "sim/engine/kv_cache_layout.h"
#include "sim/engine/lmcache_connector.h"
#include "sim/engine/prompt_hash_memo.h"
#include "sim/engine/router.h"
#include "sim/hw/model_geometry.h"
#include "sim/hw/modeled_mover.h"
#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario.h"
#include "sim/simulator.h"
#include "sim/workload/token_synth.h"
#include "sim/workload/workload.h"

namespace kvtwin::sim::engine {

class Cluster {
 public:
  // Longest run of repeated samples written out in full (see the header comment).
  static constexpr int64_t kMaxRepeatedSamples = 1000;

  // Builds the Mover the connectors use from the cluster's Simulator and its modeled mover (which
  // the returned one may wrap: kvtwin validate). Without one, the modeled mover is used.
  using MoverFactory = std::function<std::unique_ptr<Mover>(Simulator& sim, Mover& modeled)>;

  Cluster(const scenario::Scenario& s, workload::Workload* workload, report::RunRecorder* recorder,
          const MoverFactory& mover_factory = {});
  ~Cluster();

  // Called with each request's record as it leaves (tests, sweeps).
  void set_request_observer(std::function<void(const report::RequestRecord&)> f) {
    observer_ = std::move(f);
  }

  // Runs to completion. `progress(requests_done)` is called now and then.
  void run(const std::function<void(uint64_t)>& progress);

  const KvCacheLayout& layout() const { return layout_; }
  const hw::ModelGeometry& geometry() const { return geometry_; }
  uint64_t requests_done() const { return done_; }
  uint64_t events_executed() const { return sim_.num_executed(); }
  SimTime now() const { return sim_.now(); }

 private:
  void pump();
  void arrive();
  void on_done(EngineRequest* r);
  void sample();
  void report_links();
  // The counters the summary reports, summed over instances, as they stand now.
  struct Counters {
    uint64_t gpu_evictions = 0;
    std::array<uint64_t, report::kNumTiers> evicted{};
    uint64_t stalled = 0, failed_stores = 0, failed_remote_writes = 0;
    uint64_t failed_remote_gets = 0, unhealthy_periods = 0;
    SimDuration unhealthy_ns = 0;
    uint64_t blocking_get_timeouts = 0, blocking_get_timeout_chunks = 0;
    uint64_t memory_waits = 0;
    SimDuration memory_wait_ns = 0;
    report::Summary::AsyncLoading async;
    hw::ModeledMover::PageCacheTotals page_cache;
    std::vector<hw::ModeledMover::LinkReport> links;
  };
  Counters counters();
  void begin_measurement();
  bool all_done() const { return reading_done_ && live_.empty(); }
  std::string stall_message() const;  // the one-line error when no event can finish live_

  const scenario::Scenario& s_;
  workload::Workload* workload_;
  report::RunRecorder* recorder_;
  Simulator sim_;
  hw::ModelGeometry geometry_;
  KvCacheLayout layout_;
  std::unique_ptr<hw::StepModel> step_model_;
  workload::TokenSynthesizer tokens_;
  std::unique_ptr<model::vllm::RequestBlockHasher> hasher_;
  std::unique_ptr<PromptHashMemo> prompt_hashes_;  // with hasher_: prompt hashes per trace block
  hw::ModeledMover mover_;
  std::unique_ptr<Mover> mover_override_;  // from the MoverFactory, or null
  Router router_;
  std::shared_ptr<model::lmcache::KeyScopeRegistry> lmcache_registry_;
  std::shared_ptr<model::lmcache::RemoteKvStore> lmcache_remote_;
  std::vector<std::unique_ptr<LmcacheConnector>> connectors_;  // one per instance, or none
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<Instance*> instance_ptrs_;
  std::map<uint64_t, std::unique_ptr<EngineRequest>> live_;  // by trace index
  workload::TraceRequest next_;
  bool reading_done_ = false;
  uint64_t done_ = 0;
  uint64_t finished_ = 0;  // of the window's requests
  Counters baseline_;      // counters() at the window's start (the recorder's measure_from())
  std::function<void(uint64_t)> progress_;
  std::function<void(const report::RequestRecord&)> observer_;
};

}  // namespace kvtwin::sim::engine
