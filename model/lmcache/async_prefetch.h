// AsyncPrefetcher: LMCache's async lookup-and-prefetch (enable_async_loading) for one rank —
// StorageManager.async_lookup_and_prefetch, its AsyncSingleSerializer, the EventManager's LOADING
// events and the done callbacks — as pure logic whose I/O completes through explicit calls.
//
//   submit(id, keys, cum)  per active tier in order, batched_async_contains over the keys not yet
//                          matched: a leading-prefix count (CPU objects and disk entries pinned
//                          when `pin`; Redis checks "<key>metadata"); a tier with no hit is
//                          skipped, so the prefix may be split across tiers (as batched_contains).
//                          Each hit tier queues one get job on the serializer. No hit at all: the
//                          answer 0 is sent at once and no event is registered. Otherwise a new
//                          future is registered under (LOADING, id) as ONGOING.
//
//   EventManager           upstream keeps one dict of futures per status, keyed by id:
//     add_event            ONGOING[id] = the new future; an earlier ONGOING future of the id
//                          leaves the dict but runs on, and a DONE one stays.
//     done callback        of any future of the id: moves whatever ONGOING[id] holds (not
//                          necessarily this future) to DONE[id], replacing the DONE one; with
//                          nothing ONGOING and nothing DONE it raises KeyError before answering.
//                          It then answers with this future's own result.
//     pop_event(id)        takes DONE[id], which may be a future still running (moved there by an
//                          earlier future's callback): its result() raises, nothing is loaded.
//   A future in neither dict whose jobs are all over is gone: its objects lose their Python
//   references (Quirks::async_loading_leaks off: released once each).
//
//   serializer             one job at a time over all requests, FIFO (an asyncio.Lock):
//     CPU job              ref_count_up each hot-cache object; takes no time.
//     disk job             per chunk: allocate a CPU buffer (evicting), pin the entry, update its
//                          recency; then the read (timed by the owner) and one unpin.
//     remote job           per chunk: GET metadata, allocate a CPU buffer; then GET kv_bytes
//                          (timed by the owner); chunks not read are dropped from the list.
//     No evictable memory: with Quirks::async_prefetch_busy_waits_for_memory the job stalls
//     (advance() answers kBlocked; upstream sleeps 0.1 s and retries, holding the serializer),
//     else the tier returns the chunks it could allocate.
//
//   advance()              runs queued jobs until one needs time (kRunning: in_flight() says
//                          which bytes move; the owner calls complete(job) when they have moved),
//                          cannot allocate (kBlocked: call advance() again later) or none is left
//                          (kIdle).
//   done callback          after a lookup's last job, or at once when a job raises (asyncio.gather
//                          fails at the first exception; the later jobs run on, their objects
//                          held by the future as its exception's traceback holds them): the answer
//                          is the cumulative length of the returned chunks, stopping at the first
//                          tier that returned fewer than its count
//                          (Quirks::async_done_callback_tuple_error); a raised job: no answer.
//   take_responses()       the answers sent to the scheduler's lookup client, in order.
//   pop_event(id)          a DONE event's objects per tier, for retrieve and cleanup
//   (cache_engine).
//
// Ownership: the StorageManager owns the prefetcher; events and the job in flight hold Python
// references (PyRef) to their objects, so held_objects() lists them.
//
// Invariant: a queued job's future exists with jobs_left >= 1; a future is in at most one dict;
// ONGOING holds only futures not finished; a future in no dict exists only while it has jobs.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/lmcache/memory_obj.h"
#include "model/lmcache/quirks.h"
#include "model/lmcache/storage_backend.h"

namespace kvtwin::model::lmcache {

class StorageManager;

enum class EventStatus { kOngoing, kDone, kNotFound };

// One tier's part of a prefetch: the keys its contains-check counted and the objects its get
// returned, paired with keys[0 .. objs.size()) (upstream zips them).
struct PrefetchedTier {
  std::string location;
  std::vector<CacheEngineKey> keys;
  std::vector<PyRef> objs;
  bool pinned = false;  // the contains-check pinned these CPU objects
};

// One future (all_done) of async_lookup_and_prefetch.
struct LoadingEvent {
  std::string lookup_id;
  bool finished = false;  // its done callback ran (every job over, or one raised)
  uint64_t generation = 0;
  std::vector<int64_t> cum_lengths;  // cum_lengths[i]: tokens of chunks [0, i)
  std::vector<PrefetchedTier> tiers;
  int jobs_left = 0;
  bool failed = false;  // a job raised: the future's result raises
};

// The bytes one running job moves into the CPU pool.
struct PrefetchTransfer {
  uint64_t job_id = 0;
  std::string lookup_id;
  Tier tier = Tier::kDisk;
  int num_chunks = 0;
  uint64_t bytes = 0;
  std::vector<CacheEngineKey> keys;  // the chunks with a buffer
  std::vector<uint64_t> key_bytes;   // each such chunk's bytes
};

struct LookupResponse {
  std::string lookup_id;
  int64_t hit_tokens = 0;
  uint64_t generation = 0;  // the future that answered (0: a zero-hit lookup, none registered)
};

struct PrefetchStats {
  uint64_t lookups = 0;
  uint64_t jobs = 0;
  uint64_t blocked = 0;         // advance() calls that found the head job without memory
  uint64_t lost_responses = 0;  // done callbacks that raised before answering
  uint64_t short_tiers = 0;     // tiers that returned fewer chunks than counted
  uint64_t prefetched_chunks = 0;
};

class AsyncPrefetcher {
 public:
  AsyncPrefetcher(StorageManager* storage, const Quirks& quirks);

  void submit(const std::string& lookup_id, const std::vector<CacheEngineKey>& keys,
              const std::vector<int64_t>& cum_lengths, const std::vector<std::string>* search_range,
              bool pin);

  enum class State { kIdle, kRunning, kBlocked };
  State advance();
  // advance() one job at a time, for observers that check invariants between jobs (a job may
  // release pins that the next job's allocation then evicts): nullopt when the head job finished
  // (or raised) without needing time, else what advance() would answer now. advance() is
  // advance_one() repeated until it answers.
  std::optional<State> advance_one();
  // The running job's transfer (State kRunning), else nullopt.
  std::optional<PrefetchTransfer> in_flight() const;
  // The running job's bytes have moved. REQUIRES: job_id == in_flight()->job_id.
  void complete(uint64_t job_id);

  std::vector<LookupResponse> take_responses();
  EventStatus event_status(const std::string& lookup_id) const;
  // The future DONE holds for `lookup_id` (whatever ONGOING holds), 0 when none.
  uint64_t done_generation(const std::string& lookup_id) const {
    auto d = done_.find(lookup_id);
    return d == done_.end() ? 0 : d->second;
  }
  // DONE[lookup_id], removed from the dict; nullopt when there is none. A future still running
  // (moved early) or with jobs still queued (one raised) is returned as an empty stub with
  // `finished` or `failed` saying why its result() raises; it stays here until its jobs end.
  std::optional<LoadingEvent> pop_event(const std::string& lookup_id);

  // Releases an event's objects once each (CPU objects the lookup pinned are also unpinned): the
  // fixed behaviour (Quirks::async_loading_leaks off) of every path that drops an event.
  void release_event(LoadingEvent& ev);

  size_t num_queued_jobs() const { return queue_.size(); }
  // Futures held: in a dict, or running.
  size_t num_events() const { return futures_.size(); }
  const PrefetchStats& stats() const { return stats_; }
  // Objects referenced by events and jobs (unsorted, may repeat).
  void append_held_objects(std::vector<MemObjId>* out) const;

 private:
  struct Job {
    uint64_t id = 0;
    std::string lookup_id;
    uint64_t generation = 0;
    size_t tier_index = 0;
    Tier tier = Tier::kCpu;
    std::vector<CacheEngineKey> keys;
    size_t next = 0;                 // first key not yet allocated
    size_t limit = 0;                // keys the job fetches (fewer when allocation stopped)
    std::vector<PyRef> bufs;         // per allocated key (remote: empty when no metadata)
    std::vector<std::string> paths;  // disk
    bool allocated = false;
    bool needs_time = false;
    bool pinned = false;  // CPU objects the contains-check pinned
    // Fixed behaviour only: the objects the contains-check pinned, so that exactly those are
    // unpinned whatever happens to their keys meanwhile.
    std::vector<PyRef> pinned_objs;
  };
  bool allocate_cpu(Job& j);
  void unpin_not_returned(Job& j, size_t returned);
  // The first half (allocations). False when blocked on memory.
  bool allocate(Job& j);
  bool allocate_disk(Job& j);
  bool allocate_remote(Job& j);
  // The second half (reads) and the tier's result.
  void finish(Job& j);
  std::vector<PyRef> finish_disk(Job& j);
  std::vector<PyRef> finish_remote(Job& j);
  void fail(Job& j);
  void done_callback(uint64_t generation);
  // The rest of the done callback: this future's answer to the scheduler (none when it raised).
  void answer(LoadingEvent& ev, bool raised);
  LoadingEvent& event_of(const Job& j);
  // Erases a future that is in no dict, finished, and without jobs (releasing its objects when
  // the leak is fixed).
  void drop_if_unreachable(uint64_t generation);
  void release(PyRef& obj);
  void release_objects(std::vector<PyRef>& objs, bool pinned);

  StorageManager* storage_;
  Quirks quirks_;
  std::deque<Job> queue_;
  std::map<uint64_t, LoadingEvent> futures_;  // by generation
  std::map<std::string, uint64_t> ongoing_;   // EventManager's ONGOING dict: id -> generation
  std::map<std::string, uint64_t> done_;      // its DONE dict
  std::vector<LookupResponse> responses_;
  uint64_t next_job_id_ = 1;
  uint64_t next_generation_ = 1;
  PrefetchStats stats_;
};

}  // namespace kvtwin::model::lmcache
