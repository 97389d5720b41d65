// Request: the part of vLLM's v1 Request that KV-cache management reads and writes
// (vllm/v1/request.py): the token ids, the block hashes of every full block, the number of
// computed tokens, the preemption count, LoRA / multimodal / cache-salt identity.
//
// Block hashes are computed eagerly, as upstream does: at construction for every full block of
// the prompt and after every append_output_token_ids for the blocks the new tokens completed.
// A request built without a block hasher (prefix caching off) has no hashes.
//
// Ownership: the caller owns requests; the RequestBlockHasher passed in must outlive the
// request (one hasher serves many requests). KVCacheManager keeps a private handle in the
// request (kv_slot_) to find its per-request state without a string lookup.
//
// Threading: none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/vllm/block_hash.h"
#include "model/vllm/hashing.h"

namespace kvtwin::model::vllm {

class RequestBlockHasher;

// vLLM's LoRARequest: the name goes into block hashes, the int id into KV events (lora_id).
struct LoRARequest {
  std::string lora_name;
  int64_t lora_int_id = 0;
  int64_t adapter_id() const { return lora_int_id; }
};

// A multimodal input of the prompt (MultiModalFeatureSpec): its identifier (mm hash) and its
// placeholder range [offset, offset + length) in the token ids.
struct MultiModalFeatureSpec {
  std::string identifier;
  int64_t offset = 0;
  int64_t length = 0;
};

struct RequestOptions {
  int64_t max_tokens = 0;
  std::optional<LoRARequest> lora_request;
  std::vector<MultiModalFeatureSpec> mm_features;  // sorted by offset, as vLLM assumes
  std::optional<std::string> cache_salt;
  bool skip_reading_prefix_cache = false;  // sampling_params.skip_reading_prefix_cache
};

class Request {
 public:
  // Hashes every full block of the prompt when block_hasher is non-null.
  Request(std::string request_id, std::vector<TokenId> prompt_token_ids, RequestOptions options,
          RequestBlockHasher* block_hasher);
  // As above, with the first known_block_hashes.size() prompt block hashes given by the caller
  // (e.g. memoised per shared prefix); block_hasher hashes the blocks after them.
  // REQUIRES: they are exactly what block_hasher would give for these tokens with this request's
  // LoRA name and cache salt, and the request has no multimodal inputs (the mm walk of blocks
  // hashed after creation differs from that of the prompt's, quirk 19).
  Request(std::string request_id, std::vector<TokenId> prompt_token_ids, RequestOptions options,
          RequestBlockHasher* block_hasher, std::vector<BlockHash> known_block_hashes);

  // The capacity the constructor gives the token ids (prompt plus room for decoding); a caller
  // that builds the prompt with this capacity spares the constructor a reallocation.
  static size_t token_capacity(size_t num_prompt_tokens, int64_t max_tokens) {
    return num_prompt_tokens + static_cast<size_t>(std::clamp<int64_t>(max_tokens, 0, 4096));
  }

  const std::string& request_id() const { return request_id_; }
  int64_t max_tokens() const { return options_.max_tokens; }
  const std::optional<LoRARequest>& lora_request() const { return options_.lora_request; }
  const std::vector<MultiModalFeatureSpec>& mm_features() const { return options_.mm_features; }
  const std::optional<std::string>& cache_salt() const { return options_.cache_salt; }
  bool skip_reading_prefix_cache() const { return options_.skip_reading_prefix_cache; }

  std::span<const TokenId> all_token_ids() const { return all_token_ids_; }
  int64_t num_prompt_tokens() const { return num_prompt_tokens_; }
  int64_t num_tokens() const { return static_cast<int64_t>(all_token_ids_.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens_; }
  const std::vector<BlockHash>& block_hashes() const { return block_hashes_; }

  // Move the token ids / block hashes out, for a caller about to destroy the request.
  std::vector<TokenId> release_token_ids() && { return std::move(all_token_ids_); }
  std::vector<BlockHash> release_block_hashes() && { return std::move(block_hashes_); }

  // Appends output tokens and hashes the blocks they completed; returns how many block hashes
  // were added (they are the last ones of block_hashes()).
  size_t append_output_token_ids(std::span<const TokenId> token_ids);

  // Scheduler-owned counters, public as upstream's attributes.
  int64_t num_computed_tokens = 0;
  int64_t num_preemptions = 0;

 private:
  friend class KVCacheManager;
  void update_block_hashes();

  std::string request_id_;
  RequestOptions options_;
  std::vector<TokenId> all_token_ids_;
  int64_t num_prompt_tokens_;
  std::vector<BlockHash> block_hashes_;
  RequestBlockHasher* block_hasher_;
  // KVCacheManager's handle: its slot, valid while the manager's slot carries the same stamp
  // (stamps are unique per process, so a handle of another manager or of a reused slot fails).
  int32_t kv_slot_ = -1;
  uint64_t kv_stamp_ = 0;
};

}  // namespace kvtwin::model::vllm
