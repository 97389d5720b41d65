// Test helper: random KVCacheManager configurations (every manager kind and the hybrids vLLM
// supports) and a small vLLM-style scheduler that drives a manager with random but valid calls
// (prefill chunks with prefix hits, decode with lookahead, preemption on allocation failure,
// finish/abort, evict_blocks, reset_prefix_cache, new steps). Choices are drawn from rapidcheck
// generators inside a property, so failing cases shrink.
#pragma once

#include <rapidcheck.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/vllm/kv_cache_manager.h"
#include "model/vllm/request_block_hasher.h"

namespace kvtwin::model::vllm::testing {

// A value drawn uniformly from [lo, hi) whatever rapidcheck's current size (inRange alone favours
// small values in early cases); it still shrinks towards lo.
template <typename T = int>
T pick(T lo, T hi) {
  return *rc::gen::resize(100, rc::gen::inRange<T>(lo, hi));
}

struct RandomConfig {
  KVCacheManagerOptions options;
  std::string label;                 // layout, for failure messages
  bool full_attention_only = false;  // one full-attention group (hits are a prefix scan)
};

// Any layout; with full_attention_with_caching, one full-attention (or MLA) group with prefix
// caching on.
rc::Gen<RandomConfig> gen_config(bool full_attention_with_caching = false);

// One simulated request of the driver.
struct SimRequest {
  std::unique_ptr<Request> request;
  int64_t prompt_len = 0;
  int64_t max_tokens = 0;
  bool running = false;  // holds blocks (num_cached_block entries exist)
  bool encoder_done = false;
};

class RandomScheduler {
 public:
  explicit RandomScheduler(const RandomConfig& config);

  KVCacheManager& manager() { return *manager_; }
  const RandomConfig& config() const { return config_; }
  std::vector<SimRequest>& requests() { return requests_; }

  struct Stats {
    int64_t allocations = 0;
    int64_t failed_allocations = 0;
    int64_t preemptions = 0;
    int64_t hit_tokens = 0;
  };
  const Stats& stats() const { return stats_; }

  // Performs one random operation (drawn with rapidcheck) and returns its name.
  std::string step();

  // Hooks the properties use to observe single calls.
  std::function<void(const Request&, const KVCacheManager::ComputedBlocks&)> on_hit;
  std::function<void(SimRequest&)> before_free;
  std::function<void(SimRequest&)> after_free;

 private:
  void add_request();
  void schedule(SimRequest& r);
  void finish(size_t index);
  void preempt(SimRequest& r);
  std::vector<TokenId> random_prompt();

  RandomConfig config_;
  std::unique_ptr<RequestBlockHasher> hasher_;
  std::unique_ptr<KVCacheManager> manager_;
  std::vector<SimRequest> requests_;
  std::vector<std::vector<TokenId>> bases_;  // shared prefixes
  int next_id_ = 0;
  Stats stats_;
  int64_t block_size_ = 1;
  std::vector<KvHashEvent> hash_events_;  // what the "take_events" op drains
};

}  // namespace kvtwin::model::vllm::testing
