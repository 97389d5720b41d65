// LMCacheLookupClient / LMCacheLookupServer (v1/lookup_client/lmcache_lookup_client.py): the
// scheduler asks every worker how many prefix tokens LMCache holds.
//
//   lookup(tokens, id):  hash the tokens in the scheduler (make_key=False); no chunk -> 0 (and no
//                        cached result); otherwise every rank runs
//                        engine.lookup(hashes, offsets, id, pin=True, request_configs) and the
//                        answer is the minimum over ranks, cached under id until
//                        clear_lookup_status(id).
//   lookup_cache(id):    the cached answer, or -1.
//
// A rank whose lookup raises stands for the lookup server thread dying: the client times out and
// answers 0 (upstream then also rebuilds its sockets).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/lmcache/cache_engine.h"

namespace kvtwin::model::lmcache {

class LMCacheLookupClient {
 public:
  // `engines` are the lookup servers' engines, in rank order; they must outlive the client.
  LMCacheLookupClient(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata,
                      std::vector<LMCacheEngine*> engines);

  struct Result {
    int64_t hit_tokens = 0;
    std::vector<std::pair<int, int64_t>> rank_hits;  // (worker id, hit tokens) per rank asked
  };
  Result lookup(std::span<const TokenId> token_ids, const std::string& lookup_id,
                const RequestConfigs* request_configs);
  int64_t lookup_cache(const std::string& lookup_id) const;
  void clear_lookup_status(const std::string& lookup_id) { reqs_status_.erase(lookup_id); }

 private:
  KeyScopeRegistry registry_;
  ChunkedTokenDatabase token_database_;
  std::vector<LMCacheEngine*> engines_;
  std::unordered_map<std::string, int64_t> reqs_status_;
};

}  // namespace kvtwin::model::lmcache
