// Helpers shared by the model/lmcache tests: a toy geometry (2 layers, 2 KV heads of 64, fp16:
// 1 KiB per token, 16 KiB per 16-token chunk) and engines over it.
#pragma once

#include <memory>
#include <numeric>
#include <vector>

#include "model/lmcache/cache_engine.h"

namespace kvtwin::model::lmcache::testing {

inline constexpr int kChunk = 16;
inline constexpr uint64_t kChunkBytes = 16 * 1024;

inline LMCacheMetadata toy_metadata(int worker_id = 0, int world_size = 1) {
  LMCacheMetadata m;
  m.model_name = "toy-model";
  m.world_size = world_size;
  m.worker_id = worker_id;
  m.num_layers = 2;
  m.num_kv_heads = 2;
  m.head_size = 64;
  m.kv_dtype = KvDtype::kHalf;
  m.chunk_size = kChunk;
  return m;
}

inline LMCacheEngineConfig toy_config(uint64_t cpu_chunks, uint64_t disk_chunks = 0,
                                      bool remote = false) {
  LMCacheEngineConfig c;
  c.chunk_size = kChunk;
  c.save_unfull_chunk = false;
  c.pre_caching_hash_algorithm = "sha256_cbor";
  c.python_hash_seed = "0";
  c.max_local_cpu_size_bytes = cpu_chunks * kChunkBytes;
  c.local_disk = disk_chunks > 0;
  c.max_local_disk_size_bytes = disk_chunks * kChunkBytes;
  c.remote = remote;
  return c;
}

// Tokens base, base+1, ... (distinct sequences for distinct bases).
inline std::vector<TokenId> seq(int64_t n, int64_t base = 1000) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), base);
  return t;
}

inline StoreResult store(LMCacheEngine& e, const std::vector<TokenId>& tokens,
                         int64_t num_masked = 0) {
  StoreResult r = e.store({TokenInput::of_tokens(tokens), num_masked, nullptr});
  e.end_of_operation();
  return r;
}

inline LookupResult lookup(LMCacheEngine& e, const std::vector<TokenId>& tokens,
                           std::optional<std::string> id = std::nullopt, bool pin = false) {
  LookupRequest req;
  req.input = TokenInput::of_tokens(tokens);
  req.lookup_id = std::move(id);
  req.pin = pin;
  LookupResult r = e.lookup(req);
  e.end_of_operation();
  return r;
}

inline RetrieveResult retrieve(LMCacheEngine& e, const std::vector<TokenId>& tokens,
                               std::optional<std::string> req_id = std::nullopt,
                               int64_t num_masked = 0) {
  RetrieveResult r = e.retrieve({tokens, num_masked, std::move(req_id), nullptr});
  e.end_of_operation();
  return r;
}

inline std::vector<std::string> kids(const std::vector<CacheEngineKey>& keys) {
  std::vector<std::string> out;
  for (const CacheEngineKey& k : keys) out.push_back(k.kid());
  return out;
}

}  // namespace kvtwin::model::lmcache::testing
