// LMCacheEngine's async-loading parts (enable_async_loading): async_lookup_and_prefetch,
// _async_process_tokens_internal (retrieve's async branch) and cleanup_memory_objs.
//
// Who releases a prefetched object (Quirks::async_loading_leaks):
//   f4261ef6  retrieve pops the event: used objects lose their reference after the load, unused
//             ones at once; the CPU objects keep the lookup's pin. Nothing else releases an event:
//             a request that never retrieves leaves it (and its objects) forever;
//             cleanup_memory_objs (aborted lookups) pops it and then fails on the (key, obj)
//             tuples, so only the Python references go.
//   fixed     each object is released exactly once (CPU objects also unpinned): by the retrieve
//             (also of a failed event: the objects of the tiers that finished), or by
//             lookup_unpin after the request's first step, or by the cleanup.
#include <unordered_map>

#include "model/check.h"
#include "model/lmcache/cache_engine.h"

namespace kvtwin::model::lmcache {

void LMCacheEngine::async_lookup_and_prefetch(const LookupRequest& req) {
  AsyncPrefetcher* p = storage_manager_->async_prefetcher();
  KVTWIN_CHECK(p != nullptr) << "async_lookup_and_prefetch needs enable_async_loading";
  KVTWIN_CHECK(req.lookup_id.has_value()) << "async_lookup_and_prefetch needs a lookup id";
  const KeyScope* scope = token_database_->key_scope(req.request_configs);
  std::vector<CacheEngineKey> keys;
  std::vector<int64_t> cum_lengths{0};
  for (const ChunkSpan& s : spans_of(req.input, 0)) {
    keys.push_back(ChunkedTokenDatabase::make_key(s.hash, scope));
    cum_lengths.push_back(s.end);
  }
  p->submit(*req.lookup_id, keys, cum_lengths, req.search_range, req.pin);
}

void LMCacheEngine::cleanup_memory_objs(const std::string& lookup_id) {
  AsyncPrefetcher* p = storage_manager_->async_prefetcher();
  if (p == nullptr) return;
  // Upstream asks the status first: a later lookup's ONGOING future hides a DONE one.
  if (p->event_status(lookup_id) != EventStatus::kDone) return;
  std::optional<LoadingEvent> ev = p->pop_event(lookup_id);
  if (!ev) return;
  if (config_.quirks.async_loading_leaks) return;  // AttributeError per object: nothing released
  p->release_event(*ev);
}

std::vector<LMCacheEngine::ProcessedChunk> LMCacheEngine::async_process_tokens_internal(
    const RetrieveRequest& req, std::vector<char>& ret_mask) {
  if (!req.req_id) raise(PyError::kAssertionError, "req_id is required for async loading");
  AsyncPrefetcher* p = storage_manager_->async_prefetcher();
  std::optional<LoadingEvent> ev = p->pop_event(*req.req_id);
  if (!ev) raise(PyError::kAssertionError, "Event " + *req.req_id + " is not done or not found.");
  const bool fixed = !config_.quirks.async_loading_leaks;
  if (ev->failed || !ev->finished) {  // future.result() raises: logged, nothing loaded
    // The tiers that finished keep their objects (and the CPU tier its pins); f4261ef6 drops
    // them with the event, the fix releases them.
    if (fixed) p->release_event(*ev);
    return {};
  }
  struct Entry {
    PyRef obj;
    const PrefetchedTier* tier;
    bool used;
  };
  std::unordered_map<CacheEngineKey, Entry, CacheEngineKeyHash> by_key;
  for (const PrefetchedTier& t : ev->tiers) {
    for (size_t i = 0; i < t.objs.size(); ++i) by_key[t.keys[i]] = Entry{t.objs[i], &t, false};
  }
  const KeyScope* scope = token_database_->key_scope(req.request_configs);
  std::vector<ProcessedChunk> chunks;
  for (const ChunkSpan& s : token_database_->process_tokens(req.tokens, req.num_masked)) {
    CacheEngineKey key = ChunkedTokenDatabase::make_key(s.hash, scope);
    auto it = by_key.find(key);
    if (it == by_key.end()) break;  // the returned chunks are contiguous
    it->second.used = true;
    const PrefetchedTier& t = *it->second.tier;
    chunks.push_back({key, it->second.obj, s.start, s.end, t.location, fixed && t.pinned});
    std::fill(ret_mask.begin() + s.start, ret_mask.begin() + s.end, 1);
  }
  // Unused objects are released now (in the event's tier and key order).
  for (const PrefetchedTier& t : ev->tiers) {
    for (size_t i = 0; i < t.objs.size(); ++i) {
      if (by_key.at(t.keys[i]).used) continue;
      if (fixed && t.pinned) storage_manager_->allocator().unpin(t.objs[i].id());
      storage_manager_->allocator().ref_count_down(t.objs[i].id());
    }
  }
  return chunks;
}

}  // namespace kvtwin::model::lmcache
