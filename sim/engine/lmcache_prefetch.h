// LmcachePrefetchDriver: runs LMCache's async lookup-and-prefetch (model/lmcache/async_prefetch.h)
// in simulated time for one instance, as LMCache's storage-manager event loop and the lookup
// client's receiver thread do upstream.
//
//   scheduler lookup ──▶ poke() ──(same time, own event)──▶ pump():
//     advance the serializer: CPU jobs finish at once; a disk / remote job waits for a worker of
//       its tier (run_on_worker: the owner's pools, shared with writes), (remote) asks for the
//       chunks' metadata (one round trip), moves its bytes into the CPU pool through the mover
//       (tier → CPU, node-wide links carry every rank's bytes), frees the worker, then
//       complete(job) and pump again;
//     a job without evictable memory retries on the first 0.1 s tick (upstream's sleep) after
//       something that may free CPU memory (a step's end, a write's completion: memory_changed()),
//       so that a prefetch blocked for good does not keep the simulation alive;
//     answers the prefetcher produced go to the lookup client, and the instance is kicked (the
//       scheduler notices at its next poll; the lookups' backoff sleeps block it meanwhile).
//   The connector kicks the instance (kick_at) for the first poll at which a pending lookup's
//   check would time out, so an idle instance re-checks it.
//
// Threading: the simulation thread only.
#pragma once

#include <functional>
#include <vector>

#include "model/lmcache/cache_engine.h"
#include "model/lmcache/lookup_client.h"
#include "sim/mover.h"
#include "sim/simulator.h"

namespace kvtwin::sim::engine {

class LmcachePrefetchDriver {
 public:
  struct Context {
    Simulator* sim = nullptr;
    Mover* mover = nullptr;
    int instance = 0;
    int tp = 1;  // ranks whose bytes cross the node-wide links
    model::lmcache::LMCacheEngine* engine = nullptr;
    model::lmcache::LMCacheLookupClient* client = nullptr;
    std::function<void()> kick;  // wakes the instance (a no-op while it is busy)
    // Called with the keys of a remote job just before its GETs (fault injection).
    std::function<void(const std::vector<model::lmcache::CacheEngineKey>&)> before_remote_read;
    // Runs the job once a worker of the tier is free (at once when unset); worker_done frees it.
    std::function<void(model::lmcache::Tier, std::function<void()>)> run_on_worker;
    std::function<void(model::lmcache::Tier)> worker_done;
    SimDuration metadata_round_trip_ns = 0;  // a remote job's metadata GETs (run concurrently)
    // A disk job's transfer carries one object per chunk, keyed (the modelled page cache).
    bool keyed_disk_io = false;
  };
  static constexpr SimDuration kBusyWaitRetry = 100'000'000;  // time.sleep(0.1)

  explicit LmcachePrefetchDriver(Context ctx) : ctx_(std::move(ctx)) {}

  // A lookup was sent at now(): pump at once (in its own event).
  void on_lookup_sent();
  // Kicks the instance at `t` (a pending lookup's check beginning then would time out).
  void kick_at(SimTime t) {
    ctx_.sim->schedule_at(t, [this] { ctx_.kick(); });
  }
  // CPU memory may have been freed: a blocked prefetch retries at its next 0.1 s tick.
  void memory_changed();

  struct Stats {
    uint64_t transfers = 0;
    uint64_t bytes = 0;  // per rank
    uint64_t busy_wait_retries = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  void poke();
  void pump();
  void deliver();

  Context ctx_;
  bool pump_scheduled_ = false;
  bool transfer_running_ = false;
  bool retry_scheduled_ = false;
  bool blocked_ = false;
  SimTime blocked_since_ = 0;
  Stats stats_;
};

}  // namespace kvtwin::sim::engine
