// The vLLM adapter's per-request bookkeeping (integration/vllm/vllm_v1_adapter.py): LoadSpec,
// SaveSpec, RequestTracker and ReqMeta.from_request_tracker — pure decisions about what to load
// and what to save for one scheduling step.
//
// Save rule (from_request_tracker), with n = tokens scheduled so far, s = num_saved_tokens, C the
// chunk size:
//   skip_save = tracker.skip_save (forced / over priority_limit)
//            or (s > 0 and n < ceil((s+1)/C)*C)     (not yet at the next chunk boundary)
//            or (decode phase and not save_decode_cache)
//            or request config lmcache.skip_save
//   tokens to save = n rounded down to a chunk multiple, unless this is the last prefill step and
//   partial chunks are kept (discard_partial_chunks = extra config or not save_unfull_chunk)
//   SaveSpec(skip_leading_tokens = s before this step, can_save = !skip_save); when saving,
//   num_saved_tokens becomes the tokens to save.
//   A request that skips saving and has no LoadSpec produces no ReqMeta.
//   slot mapping: block_id * block_size + offset over the allocated blocks, cut to the tokens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/lmcache/request_configs.h"
#include "model/lmcache/token_database.h"

namespace kvtwin::model::lmcache {

struct LoadSpec {
  int64_t vllm_cached_tokens = 0;
  int64_t lmcache_cached_tokens = 0;
  bool can_load = false;
};

struct SaveSpec {
  int64_t skip_leading_tokens = 0;
  bool can_save = false;
};

struct RequestTracker {
  std::string req_id;
  int64_t prompt_len = 0;
  std::vector<TokenId> token_ids;  // scheduled so far
  std::vector<int64_t> allocated_block_ids;
  int64_t num_saved_tokens = 0;
  std::optional<RequestConfigs> request_configs;
  bool is_decode_phase = false;
  bool skip_save = false;
  // Not upstream state: the chunk hashes of token_ids' leading full chunks, filled by the stores
  // of this request's metadata (token_ids only grows while the request is not preempted).
  ChunkHashChain chunk_hashes;
  // Not upstream state: token_ids stopped being a prefix of the request's tokens (new tokens that
  // did not start at its end: the tracker_reappends_recomputed_tokens quirk appended recomputed
  // tokens a second time, or a gap); a preemption, which rebuilds token_ids, clears it.
  bool tokens_diverged = false;
  // Not upstream state: buffers that token_ids / allocated_block_ids left behind. A ReqMeta views
  // the tracker's vectors, and under async scheduling a step's metadata is consumed after the
  // next schedule updated the tracker; update() never moves or rewrites what an earlier view
  // sees: a vector that must grow past its capacity, or (preemption) be rewritten, leaves its
  // buffer here, alive as long as the tracker (which outlives the metadata built from it).
  std::vector<std::vector<TokenId>> retired_token_buffers;
  std::vector<std::vector<int64_t>> retired_block_buffers;

  // RequestTracker.update for a running request scheduled again. `all_token_ids` is required when
  // preempted (the tokens are rebuilt from it, up to the request's computed tokens plus the new
  // ones). `num_computed_tokens`: the resumed request's computed tokens; upstream assumes
  // max(lmcache_cached_tokens, vllm_cached_tokens) (the default), which the
  // resumed_request_check_ignores_skipped_loads fix corrects.
  void update(std::span<const TokenId> new_token_ids,
              const std::optional<std::vector<int64_t>>& new_block_ids, bool preempted,
              int64_t lmcache_cached_tokens, int64_t vllm_cached_tokens,
              const std::span<const TokenId>* all_token_ids,
              std::optional<int64_t> num_computed_tokens = std::nullopt);
};

// What the worker does for one request in one step. Upstream snapshots the tracker's tokens and
// computes the slot mapping into new lists; here token_ids and block_ids are views into the
// RequestTracker that produced the metadata, and slots are computed on demand:
//   slot(i) = block_ids[i / block_size] * block_size + i % block_size,  0 <= i < num_slots
// Lifetime: the views stay valid, with the values they had, while that tracker lives: its update()
// retires a buffer rather than move or rewrite it (RequestTracker::retired_*). Trackers are
// dropped by build_connector_meta only; under async scheduling the caller keeps a finished
// request's tracker until the metadata built before it is consumed (sim/engine's connector).
struct ReqMeta {
  std::string req_id;
  std::span<const TokenId> token_ids;
  std::span<const int64_t> block_ids;
  int64_t block_size = 16;  // >= 1
  // Tokens with a slot: those the allocated blocks cover.
  size_t num_slots() const {
    return std::min(token_ids.size(), block_ids.size() * static_cast<size_t>(block_size));
  }
  int64_t slot(size_t i) const {
    const size_t bs = static_cast<size_t>(block_size);
    return block_ids[i / bs] * block_size + static_cast<int64_t>(i % bs);
  }
  bool is_last_prefill = false;
  std::optional<SaveSpec> save_spec;
  std::optional<LoadSpec> load_spec;
  std::optional<RequestConfigs> request_configs;
  // A ChunkHashChain for token_ids (same lifetime as the views): the tracker's, or the request's
  // when the scheduler adapter's caller keeps one; null: none.
  ChunkHashChain* chunk_hashes = nullptr;
};

struct ReqMetaOptions {
  int block_size = 16;
  int chunk_size = 256;
  bool discard_partial_chunks = true;
  bool save_decode_cache = false;
};

// ReqMeta.from_request_tracker; updates tracker.num_saved_tokens when saving.
std::optional<ReqMeta> req_meta_from_tracker(RequestTracker& tracker,
                                             const std::optional<LoadSpec>& load_spec,
                                             const ReqMetaOptions& options);

}  // namespace kvtwin::model::lmcache
