// LMCacheLookupClient / LMCacheLookupServer (v1/lookup_client/lmcache_lookup_client.py): the
// scheduler asks every worker how many prefix tokens LMCache holds.
//
//   lookup(tokens, id):  hash the tokens in the scheduler (make_key=False); no chunk -> 0 (and no
//                        cached result); otherwise every rank runs
//                        engine.lookup(hashes, offsets, id, pin=True, request_configs) and the
//                        answer is the minimum over ranks, cached under id until
//                        clear_lookup_status(id).
//   lookup_cache(id):    the cached answer, or -1.
//
// A rank whose lookup raises stands for the lookup server thread dying: the client times out and
// answers 0 (upstream then also rebuilds its sockets).
//
// Async loading (config.enable_async_loading: LMCacheAsyncLookupClient / LMCacheAsyncLookupServer):
//   lookup_cache_async(id, now)  absent: marks id pending (answers kAbsent, the caller sends the
//                        lookup); pending: one backoff sleep, and past lookup_timeout_ms since the
//                        first check (read after the sleep: `now` + backoff) answers 0 (the status
//                        stays pending; fixed #2559: the lookup is also cancelled); else the hit.
//                        First, cancelled lookups whose answer has arrived are cleaned up on every
//                        rank (cleanup_memory_objs).
//   lookup_async(tokens, id)     every rank runs async_lookup_and_prefetch(hashes, id, pin=True);
//                        one backoff sleep; the answer is always "pending".
//   process_responses()  the receiver thread: the ranks' answers (their prefetchers' responses);
//                        once every rank answered, the status is their minimum.
// Deviation: after a timeout upstream forgets the first-lookup time, so a second pending check
// raises KeyError in vLLM's scheduler; the model answers 0 again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/lmcache/cache_engine.h"

namespace kvtwin::model::lmcache {

class LMCacheLookupClient {
 public:
  // `engines` are the lookup servers' engines, in rank order; they must outlive the client.
  LMCacheLookupClient(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata,
                      std::vector<LMCacheEngine*> engines);

  struct Result {
    int64_t hit_tokens = 0;
    std::vector<std::pair<int, int64_t>> rank_hits;  // (worker id, hit tokens) per rank asked
  };
  // `chain`: optional memo of token_ids' chunk hashes (ChunkHashChain's contract).
  Result lookup(std::span<const TokenId> token_ids, const std::string& lookup_id,
                const RequestConfigs* request_configs, ChunkHashChain* chain = nullptr);
  int64_t lookup_cache(const std::string& lookup_id) const;
  void clear_lookup_status(const std::string& lookup_id) {
    reqs_status_.erase(lookup_id);
    async_status_.erase(lookup_id);
    first_lookup_ns_.erase(lookup_id);
  }

  // Async loading.
  bool is_async() const { return async_; }
  struct AsyncStatus {
    enum Kind { kAbsent, kPending, kHit } kind = kAbsent;
    int64_t hit_tokens = 0;
    bool timed_out = false;
  };
  AsyncStatus lookup_cache_async(const std::string& lookup_id, int64_t now_ns);
  void lookup_async(std::span<const TokenId> token_ids, const std::string& lookup_id,
                    const RequestConfigs* request_configs, ChunkHashChain* chain = nullptr);
  // Returns the ids whose status became known.
  std::vector<std::string> process_responses();
  void cancel_lookup(const std::string& lookup_id) { aborted_.insert(lookup_id); }
  bool is_pending(const std::string& lookup_id) const;
  // For a pending lookup not yet timed out, the earliest `now_ns` at which lookup_cache_async
  // answers 0 (first check + lookup_timeout_ms − backoff + 1 ns); nullopt otherwise.
  std::optional<int64_t> times_out_from(const std::string& lookup_id) const;
  // Backoff sleeps (lookup_backoff_time each) taken since the last call.
  int take_backoff_sleeps() {
    int n = backoff_sleeps_;
    backoff_sleeps_ = 0;
    return n;
  }
  // Lookups that timed out (counted once each).
  uint64_t num_timeouts() const { return num_timeouts_; }

 private:
  void cleanup_finished_aborted_lookups();

  KeyScopeRegistry registry_;
  ChunkedTokenDatabase token_database_;
  std::vector<LMCacheEngine*> engines_;
  std::unordered_map<std::string, int64_t> reqs_status_;

  bool async_ = false;
  int64_t timeout_ns_ = 0;
  int64_t backoff_ns_ = 0;                                                // lookup_backoff_time
  bool cancel_on_timeout_ = false;                                        // #2559
  std::unordered_map<std::string, std::optional<int64_t>> async_status_;  // nullopt: pending
  std::unordered_map<std::string, int64_t> first_lookup_ns_;
  std::map<std::string, std::vector<int64_t>> res_for_each_worker_;
  std::set<std::string> aborted_;
  int backoff_sleeps_ = 0;
  uint64_t num_timeouts_ = 0;
};

}  // namespace kvtwin::model::lmcache
