#include "model/lmcache/lookup_client.h"

#include <algorithm>

namespace kvtwin::model::lmcache {
namespace {

TokenDatabaseConfig tdb_config(const LMCacheEngineConfig& c) {
  return {c.chunk_size, c.save_unfull_chunk, c.pre_caching_hash_algorithm, c.python_hash_seed};
}

}  // namespace

LMCacheLookupClient::LMCacheLookupClient(const LMCacheEngineConfig& config,
                                         const LMCacheMetadata& metadata,
                                         std::vector<LMCacheEngine*> engines)
    : token_database_(tdb_config(config), metadata, false, &registry_),
      engines_(std::move(engines)) {}

int64_t LMCacheLookupClient::lookup_cache(const std::string& lookup_id) const {
  auto it = reqs_status_.find(lookup_id);
  return it == reqs_status_.end() ? -1 : it->second;
}

LMCacheLookupClient::Result LMCacheLookupClient::lookup(std::span<const TokenId> token_ids,
                                                        const std::string& lookup_id,
                                                        const RequestConfigs* request_configs) {
  Result out;
  std::vector<ChunkSpan> spans = token_database_.process_tokens(token_ids, 0);
  if (spans.empty()) return out;
  std::vector<ChunkHash> hashes;
  std::vector<int64_t> offsets;
  for (const ChunkSpan& s : spans) {
    hashes.push_back(s.hash);
    offsets.push_back(s.end - s.start);
  }
  bool failed = false;
  for (LMCacheEngine* engine : engines_) {
    LookupRequest req;
    req.input = TokenInput::of_hashes(hashes, offsets);
    req.lookup_id = lookup_id;
    req.pin = true;
    req.request_configs = request_configs;
    LookupResult r = engine->lookup(req);
    if (r.error) failed = true;
    out.rank_hits.emplace_back(engine->metadata().worker_id, r.hit_tokens);
  }
  if (failed) {
    out.hit_tokens = 0;
    return out;
  }
  int64_t hit = out.rank_hits.front().second;
  for (const auto& [rank, h] : out.rank_hits) hit = std::min(hit, h);
  reqs_status_[lookup_id] = hit;
  out.hit_tokens = hit;
  return out;
}

}  // namespace kvtwin::model::lmcache
