// ChunkedTokenDatabase (v1/token_database.py): turns a token sequence into chunk keys.
//
//   tokens:   t0 ............................................. t(n-1)
//   chunks:   [0, C) [C, 2C) ... [kC, n)      the last one short only if save_unfull_chunk;
//                                             otherwise the sequence is cut to n - n % C first
//   hashes:   h_0 = H((NONE_HASH, tuple(chunk_0), None)),  h_i = H((h_{i-1}, tuple(chunk_i), None))
//
// H is vLLM's hash function named by pre_caching_hash_algorithm; with sha256_cbor this is byte for
// byte vLLM's block hashing with chunks for blocks (model/vllm/hashing.h, NONE_HASH =
// SHA256(CBOR(PYTHONHASHSEED))). LMCache's default "builtin" (Python's hash(), which depends on the
// interpreter and process) is modelled as an opaque, deterministic 64-bit int chain.
//
// Masks: upstream takes a boolean mask whose False entries form a prefix; the model takes their
// count `num_masked`. It must be a multiple of the chunk size (ValueError otherwise). Every chunk
// is still hashed (the chain needs it) but chunks starting before num_masked are not returned.
//
// Hashes + offsets mode (what the scheduler's lookup client sends the workers): the caller gives
// per-chunk hashes and token counts; start/end are running sums.
//
// Keys carry world_size 1 instead of the real one when save_only_first_rank (MLA only), so MLA keys
// are TP-agnostic.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/lmcache/cache_engine_key.h"
#include "model/lmcache/metadata.h"
#include "model/lmcache/request_configs.h"
#include "model/vllm/hashing.h"

namespace kvtwin::model::lmcache {

using TokenId = vllm::TokenId;

struct TokenDatabaseConfig {
  int chunk_size = 256;
  bool save_unfull_chunk = false;
  // "builtin" (LMCache's default), "sha256_cbor", "sha256", "xxhash", "xxhash_cbor".
  std::string pre_caching_hash_algorithm = "builtin";
  std::string python_hash_seed = "0";
};

struct ChunkSpan {
  int64_t start = 0;
  int64_t end = 0;
  ChunkHash hash;
};

// A memo of one growing token sequence's leading full-chunk hashes: hashes[i] is the chain hash of
// chunk i. The holder guarantees that the tokens of those chunks never change while the memo lives
// (a sequence that only grows at its end, e.g. a request's scheduled tokens; clear it otherwise).
// The database that fills it stamps its chunk size and NONE hash, and a memo stamped by another
// configuration is cleared before use, so results never depend on the memo.
struct ChunkHashChain {
  int chunk_size = 0;
  ChunkHash none_hash;
  std::vector<ChunkHash> hashes;
  void clear() {
    chunk_size = 0;
    hashes.clear();
  }
};

class ChunkedTokenDatabase {
 public:
  // `registry` interns key scopes and must outlive the database and its keys.
  // REQUIRES: a known hash algorithm and chunk_size >= 1.
  ChunkedTokenDatabase(const TokenDatabaseConfig& config, const LMCacheMetadata& metadata,
                       bool save_only_first_rank, KeyScopeRegistry* registry);

  int chunk_size() const { return chunk_size_; }
  bool save_unfull_chunk() const { return save_unfull_chunk_; }
  const ChunkHash& none_hash() const { return none_hash_; }
  // The world size written into keys (1 with save_only_first_rank).
  int key_world_size() const { return key_world_size_; }

  // process_tokens(tokens, mask) with make_key=False.
  // Throws UpstreamError(kValueError) when num_masked % chunk_size != 0.
  // With `chain`, chunks it covers are not re-hashed and new full chunks are appended to it.
  std::vector<ChunkSpan> process_tokens(std::span<const TokenId> tokens, int64_t num_masked = 0,
                                        ChunkHashChain* chain = nullptr);
  // process_tokens(hashes=..., offsets=...): pairs up to the shorter list.
  std::vector<ChunkSpan> process_hashes(std::span<const ChunkHash> hashes,
                                        std::span<const int64_t> offsets) const;

  // The key scope (model, key world size, worker, dtype, tags) of a request.
  const KeyScope* key_scope(const RequestConfigs* configs);
  static CacheEngineKey make_key(const ChunkHash& hash, const KeyScope* scope) {
    return {scope, hash, -1};
  }
  KeyScopeRegistry* registry() const { return registry_; }

 private:
  ChunkHash hash_chunk(const ChunkHash& prefix, std::span<const TokenId> tokens);

  int chunk_size_;
  bool save_unfull_chunk_;
  std::optional<vllm::HashFn> hash_fn_;  // nullopt: builtin
  std::optional<vllm::BlockHasher> hasher_;
  ChunkHash none_hash_;
  LMCacheMetadata metadata_;
  int key_world_size_;
  KeyScopeRegistry* registry_;
  const KeyScope* plain_scope_ = nullptr;  // no tags
};

}  // namespace kvtwin::model::lmcache
