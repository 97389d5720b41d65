// KvConnector: the scheduler-side hooks of a vLLM KV connector (KVConnectorBase_V1, scheduler
// role), as vLLM v0.17.0's scheduler calls them. The LMCache connector (sim/engine/lmcache_*)
// implements it on top of model/lmcache; without a connector the scheduler skips every hook.
//
//   schedule():  for a waiting request with num_computed_tokens == 0
//                  get_num_new_matched_tokens(req, local hits)   → nullopt: not ready, retry
//                  allocate_slots(..., num_external_computed_tokens, delay_cache_blocks = async)
//                  update_state_after_alloc(req, blocks, num_external)
//                end of schedule(): build_connector_meta(output)
//   finish:      request_finished(req) before its blocks are freed
#pragma once

#include <cstdint>
#include <optional>

#include "model/vllm/kv_cache_blocks.h"

namespace kvtwin::sim::engine {

struct EngineRequest;
struct SchedulerOutput;

class KvConnector {
 public:
  virtual ~KvConnector() = default;

  struct Match {
    int64_t num_tokens = 0;   // external tokens beyond the local hits
    bool load_async = false;  // loaded while the request waits (WAITING_FOR_REMOTE_KVS)
  };
  virtual std::optional<Match> get_num_new_matched_tokens(EngineRequest& r,
                                                          int64_t num_local_computed) = 0;
  virtual void update_state_after_alloc(EngineRequest& r, const model::vllm::KVCacheBlocks& blocks,
                                        int64_t num_external_tokens) = 0;
  virtual void build_connector_meta(const SchedulerOutput& output) = 0;
  virtual void request_finished(EngineRequest& r) = 0;
};

}  // namespace kvtwin::sim::engine
