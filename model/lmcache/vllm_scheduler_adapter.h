// The scheduler side of LMCache's vLLM v1 connector (LMCacheConnectorV1Impl, scheduler role) as
// pure decisions.
//
//   get_num_new_matched_tokens(req, n_vllm)
//       first call per request: look up request.all_token_ids (minus skip_last_n_tokens) on every
//       rank (pinning there) and cache the minimum; later calls reuse it until
//       update_state_after_alloc. need = hit - n_vllm, minus 1 when the whole request hit (vLLM
//       must recompute the last token); below min_retrieve_tokens -> 0 but the hit is remembered
//       (it becomes skip_leading_tokens). Records LoadSpec(n_vllm, hit, can_load=false).
//   update_state_after_alloc(req, n_external)
//       forgets the cached lookup; can_load = (n_external > 0), asserting n_external equals
//       hit - n_vllm - recompute_last.
//   build_connector_meta(output)
//       RequestTrackers for new and running requests (decode phase when a step schedules one
//       token; a resumed request rebuilds its tokens from all_token_ids), then ReqMeta per request
//       (request_tracker.h). Finished requests are forgotten first.
//   request_finished -> (false, nullopt): vLLM may free the blocks at once.
//
// Requests are vLLM's: the caller owns them and keeps them alive while they are unfinished (the
// adapter keeps pointers, as upstream keeps references). Disaggregation, multimodal hashes and
// mock DP requests are not modelled.
#pragma once

#include <list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/lmcache/lookup_client.h"
#include "model/lmcache/request_tracker.h"

namespace kvtwin::model::lmcache {

// What the adapter reads from a vLLM Request. The tokens are a view, of storage the struct owns
// (own_tokens / append_tokens: tests and the golden replay) or of the caller's own vLLM Request
// (view_tokens: the simulator, which re-points the view before every adapter call, since a token
// vector that grew may have moved). Moving keeps owned storage in place; copying is not allowed.
struct VllmRequest {
  std::string request_id;
  std::span<const TokenId> all_token_ids;
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;
  int64_t priority = 0;
  std::optional<RequestConfigs> request_configs;  // extract_request_configs(sampling_params)
  // Not upstream state: an optional memo of all_token_ids' chunk hashes for lookups, owned by the
  // caller, who guarantees (ChunkHashChain's contract) that the tokens only grow at the end.
  ChunkHashChain* chunk_hashes = nullptr;
  // Not upstream state: how many tokens the request may reach (prompt + outputs), when the caller
  // knows; the tracker reserves that much so that decoding does not move its tokens. 0: unknown.
  size_t token_capacity_hint = 0;

  VllmRequest() = default;
  VllmRequest(VllmRequest&&) = default;
  VllmRequest& operator=(VllmRequest&&) = default;
  VllmRequest(const VllmRequest&) = delete;
  VllmRequest& operator=(const VllmRequest&) = delete;

  int64_t num_tokens() const { return static_cast<int64_t>(all_token_ids.size()); }
  std::span<const TokenId> prompt_token_ids() const {
    return all_token_ids.first(static_cast<size_t>(num_prompt_tokens));
  }
  // Owned tokens: the prompt, then appended output tokens.
  void own_tokens(std::vector<TokenId> prompt) {
    owned_ = std::move(prompt);
    num_prompt_tokens = static_cast<int64_t>(owned_.size());
    all_token_ids = owned_;
  }
  void append_tokens(std::span<const TokenId> tokens) {
    owned_.insert(owned_.end(), tokens.begin(), tokens.end());
    all_token_ids = owned_;
  }
  // A view of tokens owned elsewhere; REQUIRES: num_prompt <= all.size().
  void view_tokens(std::span<const TokenId> all, int64_t num_prompt) {
    all_token_ids = all;
    num_prompt_tokens = num_prompt;
  }

 private:
  std::vector<TokenId> owned_;
};

// num_scheduled_tokens, when set, is the request's entry of SchedulerOutput.num_scheduled_tokens
// given inline (the simulator's per-step path: no string-keyed map to build); unset, the adapter
// looks the id up in the map, as upstream does.
struct NewRequestData {
  std::string req_id;
  std::vector<int64_t> block_ids;
  int64_t num_computed_tokens = 0;
  std::optional<int64_t> num_scheduled_tokens{};
};

struct CachedRequestData {
  std::string req_id;
  std::optional<std::vector<int64_t>> new_block_ids;
  int64_t num_computed_tokens = 0;  // already set on the request by the caller
  bool resumed = false;
  std::optional<int64_t> num_scheduled_tokens{};  // as in NewRequestData
};

struct SchedulerOutput {
  std::vector<std::string> finished_req_ids;
  std::vector<NewRequestData> scheduled_new_reqs;
  std::vector<CachedRequestData> scheduled_cached_reqs;
  std::map<std::string, int64_t> num_scheduled_tokens;
};

struct ConnectorMetadata {
  std::vector<ReqMeta> requests;
};

struct AdapterConfig {
  int vllm_block_size = 16;
  bool discard_partial_chunks_extra = false;  // kv_connector_extra_config discard_partial_chunks
  int skip_last_n_tokens = 0;
  bool kv_consumer = false;      // kv_role == "kv_consumer"
  bool force_skip_save = false;  // LMCACHE_FORCE_SKIP_SAVE
};

class LMCacheSchedulerAdapter {
 public:
  LMCacheSchedulerAdapter(const LMCacheEngineConfig& config, const AdapterConfig& adapter,
                          LMCacheLookupClient* lookup_client);

  struct MatchResult {
    std::optional<int64_t> ret;
    std::vector<std::pair<int, int64_t>> rank_hits;  // empty when the cached result was used
  };
  // With async loading the answer is nullopt ("try again next step") until the lookup client has
  // every rank's answer; `now_ns` drives the client's timeout.
  MatchResult get_num_new_matched_tokens(const VllmRequest& request, int64_t num_computed_tokens,
                                         int64_t now_ns = 0);
  // Throws UpstreamError(kAssertionError) on a token-count mismatch.
  void update_state_after_alloc(const VllmRequest& request, int64_t num_external_tokens);
  // `requests` maps request ids to the caller's requests (read for new requests only: their
  // prompts and configs).
  // Throws UpstreamError where upstream raises (unknown tracker, preemption asserts).
  ConnectorMetadata build_connector_meta(
      const SchedulerOutput& output,
      const std::unordered_map<std::string, const VllmRequest*>& requests);

  const std::optional<LoadSpec> load_spec(const std::string& req_id) const;
  // Trackers in insertion order.
  const std::list<RequestTracker>& request_trackers() const { return trackers_; }

 private:
  RequestTracker* tracker(const std::string& req_id);
  void put_tracker(RequestTracker t);
  ReqMetaOptions meta_options() const;

  LMCacheEngineConfig config_;
  AdapterConfig adapter_;
  LMCacheLookupClient* lookup_client_;
  std::unordered_map<std::string, LoadSpec> load_specs_;
  std::unordered_map<std::string, int64_t> requests_priority_;
  std::unordered_map<std::string, const VllmRequest*> unfinished_requests_;
  std::list<RequestTracker> trackers_;
  std::unordered_map<std::string, std::list<RequestTracker>::iterator> tracker_index_;
};

}  // namespace kvtwin::model::lmcache
