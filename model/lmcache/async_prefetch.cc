#include "model/lmcache/async_prefetch.h"

#include <algorithm>
#include <utility>

#include "model/check.h"
#include "model/lmcache/storage_manager.h"
#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {
namespace {

Tier tier_of(std::string_view name) {
  if (name == "LocalDiskBackend") return Tier::kDisk;
  if (name == "RemoteBackend") return Tier::kRemote;
  return Tier::kCpu;
}

}  // namespace

AsyncPrefetcher::AsyncPrefetcher(StorageManager* storage, const Quirks& quirks)
    : storage_(storage), quirks_(quirks) {}

void AsyncPrefetcher::release(PyRef& obj) {
  if (obj) storage_->allocator().ref_count_down(obj.id());
  obj.reset();
}

void AsyncPrefetcher::release_objects(std::vector<PyRef>& objs, bool pinned) {
  for (PyRef& o : objs) {
    if (pinned && o) storage_->allocator().unpin(o.id());
    release(o);
  }
  objs.clear();
}

void AsyncPrefetcher::release_event(LoadingEvent& ev) {
  for (PrefetchedTier& t : ev.tiers) release_objects(t.objs, t.pinned);
}

void AsyncPrefetcher::submit(const std::string& lookup_id, const std::vector<CacheEngineKey>& keys,
                             const std::vector<int64_t>& cum_lengths,
                             const std::vector<std::string>* search_range, bool pin) {
  KVTWIN_CHECK(cum_lengths.size() == keys.size() + 1) << "cum_lengths must have len(keys) + 1";
  ++stats_.lookups;
  LoadingEvent ev;
  ev.lookup_id = lookup_id;
  ev.generation = next_generation_++;
  ev.cum_lengths = cum_lengths;
  std::vector<Job> jobs;
  size_t matched = 0;
  for (StorageBackendInterface* b : storage_->active_backends(search_range)) {
    if (matched == keys.size()) break;
    std::span<const CacheEngineKey> rest(keys.data() + matched, keys.size() - matched);
    int hits = b->batched_contains(rest, pin);  // batched_async_contains: the same prefix rule
    if (hits == 0) continue;
    PrefetchedTier t;
    t.location = std::string(b->name());
    t.keys.assign(rest.begin(), rest.begin() + hits);
    t.pinned = pin && t.location == "LocalCPUBackend";
    Job j;
    j.id = next_job_id_++;
    j.lookup_id = lookup_id;
    j.generation = ev.generation;
    j.tier_index = ev.tiers.size();
    j.tier = tier_of(t.location);
    j.keys = t.keys;
    j.limit = j.keys.size();
    j.pinned = t.pinned;
    if (t.pinned && !quirks_.async_loading_leaks) {
      for (const CacheEngineKey& k : j.keys)
        j.pinned_objs.push_back(storage_->local_cpu().entry(k));
    }
    jobs.push_back(std::move(j));
    ev.tiers.push_back(std::move(t));
    matched += static_cast<size_t>(hits);
  }
  if (matched == 0) {
    responses_.push_back({lookup_id, 0});
    return;
  }
  ev.jobs_left = static_cast<int>(jobs.size());
  stats_.jobs += jobs.size();
  const uint64_t generation = ev.generation;
  futures_.emplace(generation, std::move(ev));
  // add_event: an earlier ONGOING future of the id leaves the dict (it runs on, unfinished).
  ongoing_[lookup_id] = generation;
  for (Job& j : jobs) queue_.push_back(std::move(j));
}

LoadingEvent& AsyncPrefetcher::event_of(const Job& j) {
  auto it = futures_.find(j.generation);
  KVTWIN_CHECK(it != futures_.end()) << "job " << j.id << " has no future";
  return it->second;
}

void AsyncPrefetcher::drop_if_unreachable(uint64_t generation) {
  auto it = futures_.find(generation);
  if (it == futures_.end()) return;
  LoadingEvent& ev = it->second;
  if (!ev.finished || ev.jobs_left > 0) return;
  auto in = [&](const std::map<std::string, uint64_t>& dict) {
    auto d = dict.find(ev.lookup_id);
    return d != dict.end() && d->second == generation;
  };
  if (in(ongoing_) || in(done_)) return;
  if (!quirks_.async_loading_leaks) release_event(ev);
  futures_.erase(it);  // the leak: only the Python references go
}

AsyncPrefetcher::State AsyncPrefetcher::advance() {
  for (;;) {
    if (std::optional<State> st = advance_one()) return *st;
  }
}

std::optional<AsyncPrefetcher::State> AsyncPrefetcher::advance_one() {
  if (queue_.empty()) return State::kIdle;
  Job& j = queue_.front();
  if (!j.allocated) {
    try {
      if (!allocate(j)) {
        ++stats_.blocked;
        return State::kBlocked;
      }
    } catch (const UpstreamError&) {
      fail(j);
      queue_.pop_front();
      return std::nullopt;
    }
  }
  if (j.needs_time) return State::kRunning;
  finish(j);
  queue_.pop_front();
  return std::nullopt;
}

std::optional<PrefetchTransfer> AsyncPrefetcher::in_flight() const {
  if (queue_.empty() || !queue_.front().allocated || !queue_.front().needs_time)
    return std::nullopt;
  const Job& j = queue_.front();
  PrefetchTransfer t{j.id, j.lookup_id, j.tier, 0, 0, {}, {}};
  for (size_t i = 0; i < j.bufs.size(); ++i) {
    if (!j.bufs[i]) continue;
    ++t.num_chunks;
    t.bytes += j.bufs[i]->byte_len;
    t.keys.push_back(j.keys[i]);
    t.key_bytes.push_back(j.bufs[i]->byte_len);
  }
  return t;
}

void AsyncPrefetcher::complete(uint64_t job_id) {
  KVTWIN_CHECK(!queue_.empty() && queue_.front().id == job_id && queue_.front().needs_time)
      << "job " << job_id << " is not the one in flight";
  Job& j = queue_.front();
  try {
    finish(j);
  } catch (const UpstreamError&) {
    fail(j);
  }
  queue_.pop_front();
}

bool AsyncPrefetcher::allocate(Job& j) {
  switch (j.tier) {
    case Tier::kCpu:
      return allocate_cpu(j);
    case Tier::kDisk:
      return allocate_disk(j);
    case Tier::kRemote:
      return allocate_remote(j);
  }
  return true;
}

// batched_get_non_blocking: the pinned objects, one reference each; upstream raises KeyError for
// a key removed meanwhile. The fix stops at the first key whose pinned object left the cache.
bool AsyncPrefetcher::allocate_cpu(Job& j) {
  j.allocated = true;
  j.needs_time = false;
  if (quirks_.async_loading_leaks || !j.pinned) {
    j.bufs = storage_->local_cpu().batched_get_non_blocking(j.keys);
    return true;
  }
  for (size_t i = 0; i < j.keys.size(); ++i) {
    PyRef now = storage_->local_cpu().entry(j.keys[i]);
    if (!now || !(now == j.pinned_objs[i])) break;
    storage_->allocator().ref_count_up(now.id());
    j.bufs.push_back(std::move(now));
  }
  return true;
}

// Fixed behaviour: the contains-check's pins on objects the job did not return.
void AsyncPrefetcher::unpin_not_returned(Job& j, size_t returned) {
  for (size_t i = returned; i < j.pinned_objs.size(); ++i) {
    if (j.pinned_objs[i]) storage_->allocator().unpin(j.pinned_objs[i].id());
  }
  j.pinned_objs.clear();
}

bool AsyncPrefetcher::allocate_disk(Job& j) {
  LocalDiskBackend* disk = storage_->local_disk();
  KVTWIN_CHECK(disk != nullptr);
  while (j.next < j.limit) {
    std::string path;
    PyRef obj = disk->prefetch_allocate(j.keys[j.next], &path);
    if (!obj) {
      if (quirks_.async_prefetch_busy_waits_for_memory) return false;
      j.limit = j.next;  // the fix: the chunks allocated so far
      break;
    }
    j.bufs.push_back(std::move(obj));
    j.paths.push_back(std::move(path));
    ++j.next;
  }
  j.allocated = true;
  j.needs_time = !j.bufs.empty();
  return true;
}

bool AsyncPrefetcher::allocate_remote(Job& j) {
  RemoteBackend* remote = storage_->remote();
  KVTWIN_CHECK(remote != nullptr);
  while (j.next < j.limit) {
    std::optional<PyRef> obj = remote->prefetch_allocate(j.keys[j.next]);
    if (obj && !*obj) {
      if (quirks_.async_prefetch_busy_waits_for_memory) return false;
      j.limit = j.next;
      break;
    }
    j.bufs.push_back(obj ? std::move(*obj) : PyRef());
    ++j.next;
  }
  j.allocated = true;
  j.needs_time = std::any_of(j.bufs.begin(), j.bufs.end(), [](const PyRef& b) { return !!b; });
  return true;
}

void AsyncPrefetcher::finish(Job& j) {
  std::vector<PyRef> objs;
  switch (j.tier) {
    case Tier::kCpu:
      objs = std::move(j.bufs);
      unpin_not_returned(j, objs.size());
      break;
    case Tier::kDisk:
      objs = finish_disk(j);
      break;
    case Tier::kRemote:
      objs = finish_remote(j);
      break;
  }
  stats_.prefetched_chunks += objs.size();
  LoadingEvent& ev = event_of(j);
  --ev.jobs_left;
  ev.tiers[j.tier_index].objs = std::move(objs);
  if (ev.finished) {
    // An earlier job raised and the future is done: the exception's traceback still reaches
    // these objects (through gather's tasks) as long as the future lives.
    drop_if_unreachable(j.generation);
    return;
  }
  if (ev.jobs_left == 0) done_callback(j.generation);
}

std::vector<PyRef> AsyncPrefetcher::finish_disk(Job& j) {
  LocalDiskBackend* disk = storage_->local_disk();
  std::vector<PyRef> out;
  bool stopped = false;
  for (size_t i = 0; i < j.bufs.size(); ++i) {
    if (!stopped) {
      if (disk->prefetch_read(j.keys[i], j.paths[i], *j.bufs[i])) {
        out.push_back(std::move(j.bufs[i]));
        continue;
      }
      // A missing file: upstream reads the popped entry's metadata -> KeyError, the prefetch
      // task fails (its buffers are dropped; the later entries keep their prefetch pins).
      if (quirks_.disk_missing_file_raises_key_error)
        raise(PyError::kKeyError, "prefetched chunk file missing");
      stopped = true;  // the fix: the chunks read so far
    }
    disk->unpin(j.keys[i]);  // the prefetch pin of a chunk not read
    release(j.bufs[i]);
  }
  // The contains-check's pins (Quirks::async_disk_prefetch_pins_twice): the fix releases them.
  if (!quirks_.async_disk_prefetch_pins_twice) {
    for (const CacheEngineKey& k : j.keys) disk->unpin(k);
  }
  return out;
}

std::vector<PyRef> AsyncPrefetcher::finish_remote(Job& j) {
  RemoteBackend* remote = storage_->remote();
  for (size_t i = 0; i < j.bufs.size(); ++i) {
    if (j.bufs[i] && !remote->prefetch_fill(j.keys[i], *j.bufs[i])) j.bufs[i].reset();
  }
  std::vector<PyRef> out;
  if (quirks_.remote_prefetch_drops_missing_chunks) {
    for (PyRef& b : j.bufs) {
      if (b) out.push_back(std::move(b));
    }
    return out;
  }
  size_t i = 0;
  for (; i < j.bufs.size() && j.bufs[i]; ++i) out.push_back(std::move(j.bufs[i]));
  for (; i < j.bufs.size(); ++i) release(j.bufs[i]);
  return out;
}

// A job raised: asyncio.gather fails, so does the event's future; its done callback raises before
// answering. The job's buffers are dropped (their Python references go).
void AsyncPrefetcher::fail(Job& j) {
  if (j.tier == Tier::kDisk && !quirks_.async_disk_prefetch_pins_twice) {
    // The fix releases the disk pins too: the prefetch's and the contains-check's.
    LocalDiskBackend* disk = storage_->local_disk();
    for (size_t i = 0; i < j.bufs.size(); ++i) disk->unpin(j.keys[i]);
    for (const CacheEngineKey& k : j.keys) disk->unpin(k);
  }
  j.bufs.clear();
  unpin_not_returned(j, 0);
  LoadingEvent& ev = event_of(j);
  --ev.jobs_left;
  if (ev.finished) {
    drop_if_unreachable(j.generation);
    return;
  }
  ev.failed = true;
  done_callback(j.generation);  // gather fails at the first exception
}

void AsyncPrefetcher::done_callback(uint64_t generation) {
  LoadingEvent& ev = futures_.at(generation);
  ev.finished = true;
  const std::string& lookup_id = ev.lookup_id;  // ev outlives the call (erased last)
  // update_event_status(id, DONE): whatever ONGOING holds for the id goes to DONE.
  bool raised = false;
  if (auto o = ongoing_.find(lookup_id); o != ongoing_.end()) {
    const uint64_t moved = o->second;
    ongoing_.erase(o);
    auto [d, fresh] = done_.try_emplace(lookup_id, moved);
    if (!fresh) {
      const uint64_t replaced = std::exchange(d->second, moved);
      if (replaced != generation) drop_if_unreachable(replaced);
    }
  } else if (!done_.contains(lookup_id)) {
    raised = true;  // KeyError: neither dict holds the id
  }
  answer(ev, raised);
  drop_if_unreachable(generation);
}

void AsyncPrefetcher::answer(LoadingEvent& ev, bool raised) {
  const std::string& lookup_id = ev.lookup_id;
  if (raised || ev.failed) {
    ++stats_.lost_responses;
    return;
  }
  size_t total = 0;
  for (size_t t = 0; t < ev.tiers.size(); ++t) {
    size_t actual = ev.tiers[t].objs.size();
    total += actual;
    if (actual >= ev.tiers[t].keys.size()) continue;
    ++stats_.short_tiers;
    bool later_objects = false;
    for (size_t u = t + 1; u < ev.tiers.size(); ++u) later_objects |= !ev.tiers[u].objs.empty();
    if (later_objects && quirks_.async_done_callback_tuple_error) {
      ++stats_.lost_responses;  // AttributeError on a (key, obj) tuple: no answer is sent
      return;
    }
    for (size_t u = t + 1; u < ev.tiers.size(); ++u) {
      for (PyRef& o : ev.tiers[u].objs) release(o);
      ev.tiers[u].objs.clear();
    }
    break;
  }
  responses_.push_back({lookup_id, ev.cum_lengths[total], ev.generation});
}

std::vector<LookupResponse> AsyncPrefetcher::take_responses() {
  std::vector<LookupResponse> out = std::move(responses_);
  responses_.clear();
  return out;
}

EventStatus AsyncPrefetcher::event_status(const std::string& lookup_id) const {
  if (ongoing_.contains(lookup_id)) return EventStatus::kOngoing;
  return done_.contains(lookup_id) ? EventStatus::kDone : EventStatus::kNotFound;
}

std::optional<LoadingEvent> AsyncPrefetcher::pop_event(const std::string& lookup_id) {
  auto d = done_.find(lookup_id);
  if (d == done_.end()) return std::nullopt;
  const uint64_t generation = d->second;
  done_.erase(d);
  auto it = futures_.find(generation);
  LoadingEvent& ev = it->second;
  if (!ev.finished || ev.jobs_left > 0) {
    LoadingEvent stub;  // its result() raises (InvalidStateError, or the job's exception)
    stub.lookup_id = lookup_id;
    stub.finished = ev.finished;
    stub.failed = ev.failed;
    stub.generation = generation;
    return stub;
  }
  LoadingEvent out = std::move(ev);
  futures_.erase(it);
  return out;
}

void AsyncPrefetcher::append_held_objects(std::vector<MemObjId>* out) const {
  for (const auto& [id, ev] : futures_) {
    for (const PrefetchedTier& t : ev.tiers) {
      for (const PyRef& o : t.objs) out->push_back(o.id());
    }
  }
  for (const Job& j : queue_) {
    for (const PyRef& b : j.bufs) {
      if (b) out->push_back(b.id());
    }
    for (const PyRef& b : j.pinned_objs) {
      if (b) out->push_back(b.id());
    }
  }
}

}  // namespace kvtwin::model::lmcache
