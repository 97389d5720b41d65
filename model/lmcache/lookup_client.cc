#include "model/lmcache/lookup_client.h"

#include <algorithm>
#include <cmath>

namespace kvtwin::model::lmcache {
namespace {

TokenDatabaseConfig tdb_config(const LMCacheEngineConfig& c) {
  return {c.chunk_size, c.save_unfull_chunk, c.pre_caching_hash_algorithm, c.python_hash_seed};
}

// What every rank is asked, sync or async: the prompt's chunk hashes and chunk lengths, pinned.
// The request views the vectors, so it must not outlive this object.
struct HashedPrompt {
  std::vector<ChunkHash> hashes;
  std::vector<int64_t> lengths;

  explicit HashedPrompt(const std::vector<ChunkSpan>& spans) {
    hashes.reserve(spans.size());
    lengths.reserve(spans.size());
    for (const ChunkSpan& s : spans) {
      hashes.push_back(s.hash);
      lengths.push_back(s.end - s.start);
    }
  }
  LookupRequest pinned_request(const std::string& lookup_id,
                               const RequestConfigs* request_configs) const {
    LookupRequest req;
    req.input = TokenInput::of_hashes(hashes, lengths);
    req.lookup_id = lookup_id;
    req.pin = true;
    req.request_configs = request_configs;
    return req;
  }
};

}  // namespace

LMCacheLookupClient::LMCacheLookupClient(const LMCacheEngineConfig& config,
                                         const LMCacheMetadata& metadata,
                                         std::vector<LMCacheEngine*> engines)
    : token_database_(tdb_config(config), metadata, false, &registry_),
      engines_(std::move(engines)),
      async_(config.enable_async_loading),
      timeout_ns_(config.lookup_timeout_ms * 1'000'000),
      backoff_ns_(std::llround(config.lookup_backoff_time_s * 1e9)),
      cancel_on_timeout_(!config.quirks.async_loading_leaks) {}

bool LMCacheLookupClient::is_pending(const std::string& lookup_id) const {
  auto it = async_status_.find(lookup_id);
  return it != async_status_.end() && !it->second.has_value();
}

std::optional<int64_t> LMCacheLookupClient::times_out_from(const std::string& lookup_id) const {
  if (!is_pending(lookup_id)) return std::nullopt;
  auto first = first_lookup_ns_.find(lookup_id);
  if (first == first_lookup_ns_.end()) return std::nullopt;
  return first->second + timeout_ns_ - backoff_ns_ + 1;
}

void LMCacheLookupClient::cleanup_finished_aborted_lookups() {
  std::vector<std::string> finished;
  for (const std::string& id : aborted_) {
    auto it = async_status_.find(id);
    if (it != async_status_.end() && it->second.has_value()) finished.push_back(id);
  }
  for (const std::string& id : finished) {
    aborted_.erase(id);
    for (LMCacheEngine* engine : engines_) engine->cleanup_memory_objs(id);
    clear_lookup_status(id);
  }
}

LMCacheLookupClient::AsyncStatus LMCacheLookupClient::lookup_cache_async(
    const std::string& lookup_id, int64_t now_ns) {
  cleanup_finished_aborted_lookups();
  AsyncStatus out;
  auto it = async_status_.find(lookup_id);
  if (it == async_status_.end()) {
    async_status_.emplace(lookup_id, std::nullopt);
    first_lookup_ns_[lookup_id] = now_ns;
    return out;
  }
  if (it->second.has_value()) {
    out.kind = AsyncStatus::kHit;
    out.hit_tokens = *it->second;
    return out;
  }
  ++backoff_sleeps_;
  out.kind = AsyncStatus::kPending;
  // Upstream reads the clock after the backoff sleep.
  auto first = first_lookup_ns_.find(lookup_id);
  if (first == first_lookup_ns_.end() || now_ns + backoff_ns_ - first->second > timeout_ns_) {
    if (first != first_lookup_ns_.end()) {  // the first time only
      first_lookup_ns_.erase(first);
      ++num_timeouts_;
      if (cancel_on_timeout_) cancel_lookup(lookup_id);
    }
    out.kind = AsyncStatus::kHit;
    out.hit_tokens = 0;
    out.timed_out = true;
  }
  return out;
}

void LMCacheLookupClient::lookup_async(std::span<const TokenId> token_ids,
                                       const std::string& lookup_id,
                                       const RequestConfigs* request_configs,
                                       ChunkHashChain* chain) {
  const HashedPrompt prompt(token_database_.process_tokens(token_ids, 0, chain));
  const LookupRequest req = prompt.pinned_request(lookup_id, request_configs);
  for (LMCacheEngine* engine : engines_) engine->async_lookup_and_prefetch(req);
  ++backoff_sleeps_;
}

std::vector<std::string> LMCacheLookupClient::process_responses() {
  std::vector<std::string> known;
  for (LMCacheEngine* engine : engines_) {
    AsyncPrefetcher* p = engine->storage_manager().async_prefetcher();
    if (p == nullptr) continue;
    for (const LookupResponse& r : p->take_responses()) {
      std::vector<int64_t>& all = res_for_each_worker_[r.lookup_id];
      all.push_back(r.hit_tokens);
      if (all.size() < engines_.size()) continue;
      async_status_[r.lookup_id] = *std::min_element(all.begin(), all.end());
      res_for_each_worker_.erase(r.lookup_id);
      known.push_back(r.lookup_id);
    }
  }
  return known;
}

int64_t LMCacheLookupClient::lookup_cache(const std::string& lookup_id) const {
  auto it = reqs_status_.find(lookup_id);
  return it == reqs_status_.end() ? -1 : it->second;
}

LMCacheLookupClient::Result LMCacheLookupClient::lookup(std::span<const TokenId> token_ids,
                                                        const std::string& lookup_id,
                                                        const RequestConfigs* request_configs,
                                                        ChunkHashChain* chain) {
  Result out;
  std::vector<ChunkSpan> spans = token_database_.process_tokens(token_ids, 0, chain);
  if (spans.empty()) return out;
  const HashedPrompt prompt(spans);
  const LookupRequest req = prompt.pinned_request(lookup_id, request_configs);
  bool failed = false;
  for (LMCacheEngine* engine : engines_) {
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
