#include "sim/engine/router.h"

#include "model/check.h"
#include "sim/engine/instance.h"

namespace kvtwin::sim::engine {

Router::Policy Router::policy_from_name(const std::string& name) {
  if (name == "least_loaded") return Policy::kLeastLoaded;
  if (name == "prefix_aware") return Policy::kPrefixAware;
  KVTWIN_CHECK(name == "round_robin") << "router " << name;
  return Policy::kRoundRobin;
}

int Router::route(const std::vector<Instance*>& instances,
                  const std::vector<model::vllm::BlockHash>& block_hashes) {
  KVTWIN_CHECK(!instances.empty());
  const int n = static_cast<int>(instances.size());
  if (n == 1) return 0;
  switch (policy_) {
    case Policy::kRoundRobin:
      return static_cast<int>(next_++ % static_cast<uint64_t>(n));
    case Policy::kLeastLoaded: {
      int best = 0;
      int64_t best_load = instances[0]->queued_tokens();
      for (int i = 1; i < n; ++i) {
        int64_t load = instances[static_cast<size_t>(i)]->queued_tokens();
        if (load < best_load) {
          best = i;
          best_load = load;
        }
      }
      return best;
    }
    case Policy::kPrefixAware: {
      int best = 0;
      int64_t best_score = INT64_MIN;
      for (int i = 0; i < n; ++i) {
        const Instance* inst = instances[static_cast<size_t>(i)];
        int64_t score =
            inst->cached_prefix_blocks(block_hashes) * block_size_ - inst->queued_tokens();
        if (score > best_score) {
          best = i;
          best_score = score;
        }
      }
      return best;
    }
  }
  return 0;
}

}  // namespace kvtwin::sim::engine
