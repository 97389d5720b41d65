// KV cache events (vllm/distributed/kv_events.py): what BlockPool reports to external KV-cache
// consumers when enable_kv_cache_events is on.
//
// - BlockStored: blocks of one request became cached (one event per cache_full_blocks call).
//   token_ids span [num_cached*bs, num_full*bs) including positions of skipped null blocks,
//   while block_hashes / extra_keys skip the null blocks. parent_block_hash is the hash at
//   num_cached-1 even if that block is null.
// - BlockRemoved: a cached block was evicted (lazily, when reused, or by evict_blocks). No
//   group id.
// - AllBlocksCleared: reset_prefix_cache succeeded.
//
// Hashes are ExternalBlockHash: the raw bytes, or with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES the
// integer int.from_bytes(hash, "big") & (2**64-1), i.e. the last 8 bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "model/vllm/hashing.h"

namespace kvtwin::model::vllm {

struct ExternalBlockHash {
  bool is_int = false;
  uint64_t int_value = 0;      // when is_int
  std::vector<uint8_t> bytes;  // when !is_int
  friend bool operator==(const ExternalBlockHash&, const ExternalBlockHash&) = default;
};

inline constexpr const char* kMediumGpu = "GPU";

struct BlockStored {
  std::vector<ExternalBlockHash> block_hashes;
  std::optional<ExternalBlockHash> parent_block_hash;
  std::vector<TokenId> token_ids;
  int64_t block_size = 0;
  std::optional<int64_t> lora_id;
  std::string medium = kMediumGpu;
  std::optional<std::string> lora_name;
  // One entry per stored block (nullopt = None); nullopt as a whole when no block was stored.
  std::optional<std::vector<std::optional<ExtraKeys>>> extra_keys;
  friend bool operator==(const BlockStored&, const BlockStored&) = default;
};

struct BlockRemoved {
  std::vector<ExternalBlockHash> block_hashes;
  std::string medium = kMediumGpu;
  friend bool operator==(const BlockRemoved&, const BlockRemoved&) = default;
};

struct AllBlocksCleared {
  friend bool operator==(const AllBlocksCleared&, const AllBlocksCleared&) = default;
};

using KVCacheEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

// The hash stream (kvtwin's, not upstream's): the events reduced to what a consumer that indexes
// the cached hashes needs (a KV-aware router), one flat entry per hash, recorded without an
// allocation per event. In the order of the full events: each hash of a BlockStored (kStored),
// each hash of a BlockRemoved (kRemoved), and one kCleared for AllBlocksCleared. Hashes are in
// int form (int_block_hash, block_hash.h) whatever kv_events_use_int_block_hashes says.
struct KvHashEvent {
  enum Kind : uint8_t { kStored, kRemoved, kCleared };
  Kind kind = kCleared;
  uint64_t hash = 0;  // 0 for kCleared
  friend bool operator==(const KvHashEvent&, const KvHashEvent&) = default;
};

}  // namespace kvtwin::model::vllm
