// Router: picks the serving instance of each arriving request.
//
//   round_robin    request i goes to instance i mod n (in arrival order)
//   least_loaded   the instance with the fewest prompt tokens still to compute (waiting and
//                  running), ties to the lowest index
//   prefix_aware   the instance maximising  cached_prefix_tokens − queued_tokens: the GPU prefix
//                  cache (tracked from each instance's KV events, as llm-d's precise prefix
//                  scorer does; read as the block pool's hash stream, KvHashEvent, which carries
//                  what the index uses of them) saves that many prefill tokens, the queue costs
//                  that many; ties to the lowest index
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/vllm/block_hash.h"

namespace kvtwin::sim::engine {

class Instance;

class Router {
 public:
  enum class Policy { kRoundRobin, kLeastLoaded, kPrefixAware };
  static Policy policy_from_name(const std::string& name);

  Router(Policy policy, int block_size) : policy_(policy), block_size_(block_size) {}
  bool needs_prefix_index() const { return policy_ == Policy::kPrefixAware; }

  // REQUIRES: instances non-empty.
  int route(const std::vector<Instance*>& instances,
            const std::vector<model::vllm::BlockHash>& block_hashes);

 private:
  Policy policy_;
  int block_size_;
  uint64_t next_ = 0;
};

}  // namespace kvtwin::sim::engine
