// PrefixCacheStats (vllm/v1/metrics/stats.py): prefix-cache hit counters between two calls of
// KVCacheManager::make_prefix_cache_stats. Every get_computed_blocks call of a request that may
// read the cache is recorded (a retried request again); requests that were preempted before go
// to the preempted_* counters.
#pragma once

#include <cstdint>

namespace kvtwin::model::vllm {

struct PrefixCacheStats {
  bool reset = false;    // reset_prefix_cache succeeded since the last snapshot
  int64_t requests = 0;  // new requests looked up
  int64_t queries = 0;   // their tokens
  int64_t hits = 0;      // their hit tokens
  int64_t preempted_requests = 0;
  int64_t preempted_queries = 0;
  int64_t preempted_hits = 0;

  void record(int64_t num_tokens, int64_t num_hits, bool preempted) {
    if (preempted) {
      ++preempted_requests;
      preempted_queries += num_tokens;
      preempted_hits += num_hits;
    } else {
      ++requests;
      queries += num_tokens;
      hits += num_hits;
    }
  }
  friend bool operator==(const PrefixCacheStats&, const PrefixCacheStats&) = default;
};

}  // namespace kvtwin::model::vllm
