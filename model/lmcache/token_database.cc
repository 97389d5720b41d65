#include "model/lmcache/token_database.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cstring>

#include "model/check.h"
#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {
namespace {

// The builtin-hash stand-in: an opaque, deterministic 64-bit chain (see the header).
int64_t builtin_hash_bytes(const void* data, size_t n, uint64_t seed) {
  return static_cast<int64_t>(XXH3_64bits_withSeed(data, n, seed));
}

}  // namespace

ChunkedTokenDatabase::ChunkedTokenDatabase(const TokenDatabaseConfig& config,
                                           const LMCacheMetadata& metadata,
                                           bool save_only_first_rank, KeyScopeRegistry* registry)
    : chunk_size_(config.chunk_size),
      save_unfull_chunk_(config.save_unfull_chunk),
      metadata_(metadata),
      key_world_size_(save_only_first_rank ? 1 : metadata.world_size),
      registry_(registry) {
  KVTWIN_CHECK(chunk_size_ >= 1) << "chunk_size " << chunk_size_;
  KVTWIN_CHECK(registry_ != nullptr) << "no key scope registry";
  const std::string& algo = config.pre_caching_hash_algorithm;
  if (algo == "builtin") {
    const std::string& seed = config.python_hash_seed;
    none_hash_ = ChunkHash::from_int(builtin_hash_bytes(seed.data(), seed.size(), 0));
  } else {
    // LMCache maps the old name sha256_cbor_64bit to sha256_cbor.
    std::string name = algo == "sha256_cbor_64bit" ? "sha256_cbor" : algo;
    hash_fn_ = vllm::hash_fn_from_name(name);
    KVTWIN_CHECK(hash_fn_.has_value()) << "unknown pre_caching_hash_algorithm " << algo;
    vllm::BlockHash none = vllm::none_hash(*hash_fn_, config.python_hash_seed);
    hasher_.emplace(*hash_fn_, none);
    none_hash_ = ChunkHash::from_digest(none);
  }
  plain_scope_ = registry_->intern(metadata_.model_name, key_world_size_, metadata_.worker_id,
                                   metadata_.kv_dtype, {});
}

ChunkHash ChunkedTokenDatabase::hash_chunk(const ChunkHash& prefix,
                                           std::span<const TokenId> tokens) {
  if (hasher_)
    return ChunkHash::from_digest(hasher_->hash_block_tokens(prefix.digest(), tokens, nullptr));
  // Builtin stand-in: hash (prefix, tokens) as little-endian int64s, streamed (XXH3's streaming
  // digest equals the one-shot digest of the concatenation) so no buffer is built per chunk.
  static_assert(sizeof(TokenId) == sizeof(int64_t));
  // A state on the stack must be initialised before the reset: with a seed, the reset reads the
  // state's previous seed and keeps its derived secret when they match, so stack garbage left by
  // an earlier call could keep a half-overwritten secret (runs then differed with ASLR).
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, 0x6c6d6361636865ULL);
  int64_t p = prefix.int_value();
  XXH3_64bits_update(&state, &p, sizeof p);
  XXH3_64bits_update(&state, tokens.data(), tokens.size() * sizeof(TokenId));
  return ChunkHash::from_int(static_cast<int64_t>(XXH3_64bits_digest(&state)));
}

std::vector<ChunkSpan> ChunkedTokenDatabase::process_tokens(std::span<const TokenId> tokens,
                                                            int64_t num_masked,
                                                            ChunkHashChain* chain) {
  if (num_masked % chunk_size_ != 0)
    raise(PyError::kValueError,
          "The number of Falses in the mask is not a multiple of the chunk size.");
  if (chain != nullptr && (chain->chunk_size != chunk_size_ || !(chain->none_hash == none_hash_))) {
    chain->hashes.clear();
    chain->chunk_size = chunk_size_;
    chain->none_hash = none_hash_;
  }
  int64_t total = static_cast<int64_t>(tokens.size());
  int64_t end_all = save_unfull_chunk_ ? total : total - total % chunk_size_;
  std::vector<ChunkSpan> out;
  out.reserve(static_cast<size_t>((end_all + chunk_size_ - 1) / chunk_size_));
  ChunkHash prefix = none_hash_;
  size_t index = 0;
  for (int64_t start = 0; start < end_all; start += chunk_size_, ++index) {
    int64_t end = std::min<int64_t>(start + chunk_size_, total);
    const bool full = end - start == chunk_size_;
    // The memo holds full chunks only: a trailing partial chunk at an index it covers (a store
    // of a shorter prefix than the lookups saw) is hashed from its own tokens, as upstream does.
    if (chain != nullptr && full && index < chain->hashes.size()) {
      prefix = chain->hashes[index];
    } else {
      prefix = hash_chunk(prefix, tokens.subspan(start, end - start));
      if (chain != nullptr && full && index == chain->hashes.size())
        chain->hashes.push_back(prefix);
    }
    if (start < num_masked) continue;
    out.push_back({start, end, prefix});
  }
  return out;
}

std::vector<ChunkSpan> ChunkedTokenDatabase::process_hashes(
    std::span<const ChunkHash> hashes, std::span<const int64_t> offsets) const {
  std::vector<ChunkSpan> out;
  size_t n = std::min(hashes.size(), offsets.size());
  out.reserve(n);
  int64_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t end = start + offsets[i];
    out.push_back({start, end, hashes[i]});
    start = end;
  }
  return out;
}

const KeyScope* ChunkedTokenDatabase::key_scope(const RequestConfigs* configs) {
  std::vector<KeyTag> tags = tags_of(configs);
  if (tags.empty()) return plain_scope_;
  return registry_->intern(metadata_.model_name, key_world_size_, metadata_.worker_id,
                           metadata_.kv_dtype, std::move(tags));
}

}  // namespace kvtwin::model::lmcache
