#include "sim/engine/lmcache_prefetch.h"

namespace kvtwin::sim::engine {
namespace lm = model::lmcache;

void LmcachePrefetchDriver::on_lookup_sent() {
  poke();
}

void LmcachePrefetchDriver::memory_changed() {
  if (!blocked_ || retry_scheduled_) return;
  retry_scheduled_ = true;
  ++stats_.busy_wait_retries;
  SimDuration since = ctx_.sim->now() - blocked_since_;
  SimDuration wait = kBusyWaitRetry - since % kBusyWaitRetry;  // the next tick of the sleep loop
  ctx_.sim->schedule_after(wait, [this] {
    retry_scheduled_ = false;
    pump();
  });
}

void LmcachePrefetchDriver::poke() {
  if (pump_scheduled_) return;
  pump_scheduled_ = true;
  ctx_.sim->schedule_after(0, [this] {
    pump_scheduled_ = false;
    pump();
  });
}

void LmcachePrefetchDriver::deliver() {
  if (ctx_.client->process_responses().empty()) return;
  // The scheduler sees the answer at its next check (its backoff sleeps block the engine core:
  // Instance / LmcacheConnector::run_lookups charge them).
  ctx_.sim->schedule_after(0, [this] { ctx_.kick(); });
}

void LmcachePrefetchDriver::pump() {
  if (transfer_running_) return;
  lm::AsyncPrefetcher* p = ctx_.engine->storage_manager().async_prefetcher();
  lm::AsyncPrefetcher::State st = p->advance();
  ctx_.engine->end_of_operation();
  deliver();
  if (st == lm::AsyncPrefetcher::State::kBlocked) {
    if (!blocked_) blocked_since_ = ctx_.sim->now();
    blocked_ = true;
    return;  // memory_changed() retries
  }
  blocked_ = false;
  if (st != lm::AsyncPrefetcher::State::kRunning) return;
  lm::PrefetchTransfer t = *p->in_flight();
  if (t.tier == lm::Tier::kRemote && ctx_.before_remote_read) ctx_.before_remote_read(t.keys);
  transfer_running_ = true;
  ++stats_.transfers;
  stats_.bytes += t.bytes;
  Transfer tr{t.tier == lm::Tier::kDisk ? Location::kDisk : Location::kRemote,
              Location::kCpu,
              ctx_.instance,
              "prefetch",
              {}};
  if (ctx_.keyed_disk_io && t.tier == lm::Tier::kDisk) {
    for (size_t i = 0; i < t.keys.size(); ++i)
      tr.objects.push_back(
          KvObject{t.keys[i].to_string(), t.key_bytes[i] * static_cast<uint64_t>(ctx_.tp), -1, {}});
  } else {
    tr.objects.push_back(
        KvObject{"prefetched chunks", t.bytes * static_cast<uint64_t>(ctx_.tp), -1, {}});
  }
  const uint64_t job = t.job_id;
  const lm::Tier tier = t.tier;
  auto move = [this, tr = std::move(tr), job, tier]() mutable {
    ctx_.mover->start(std::move(tr), [this, job, tier](const TransferResult&) {
      if (ctx_.worker_done) ctx_.worker_done(tier);
      transfer_running_ = false;
      ctx_.engine->storage_manager().async_prefetcher()->complete(job);
      ctx_.engine->end_of_operation();
      pump();
    });
  };
  auto run = [this, tier, move = std::move(move)]() mutable {
    if (tier == lm::Tier::kRemote && ctx_.metadata_round_trip_ns > 0) {
      ctx_.sim->schedule_after(ctx_.metadata_round_trip_ns, std::move(move));
    } else {
      move();
    }
  };
  if (ctx_.run_on_worker) {
    ctx_.run_on_worker(tier, std::move(run));
  } else {
    run();
  }
}

}  // namespace kvtwin::sim::engine
