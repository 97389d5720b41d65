#include "model/lmcache/cache_engine.h"

#include <algorithm>

#include "model/check.h"
#include "model/lmcache/layerwise_tasks.h"

namespace kvtwin::model::lmcache {
namespace {

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

std::vector<TokenRange> mask_runs(const std::vector<char>& mask) {
  std::vector<TokenRange> runs;
  int64_t n = static_cast<int64_t>(mask.size());
  for (int64_t i = 0; i < n;) {
    if (!mask[i]) {
      ++i;
      continue;
    }
    int64_t j = i;
    while (j < n && mask[j]) ++j;
    runs.push_back({i, j});
    i = j;
  }
  return runs;
}

LMCacheEngine::LMCacheEngine(const LMCacheEngineConfig& config, const LMCacheMetadata& metadata,
                             const SharedStorage& shared,
                             std::shared_ptr<KeyScopeRegistry> registry)
    : config_(config),
      metadata_(metadata),
      save_only_first_rank_(config.save_only_first_rank.value_or(metadata.use_mla) &&
                            metadata.use_mla),
      registry_(registry ? std::move(registry) : std::make_shared<KeyScopeRegistry>()) {
  metadata_.chunk_size = config.chunk_size;
  if (config_.use_layerwise) {
    fmt_ = metadata_.use_mla ? MemoryFormat::kKvMlaFmt : MemoryFormat::kKvT2D;
  }
  if (metadata_.use_mla) fmt_ = MemoryFormat::kKvMlaFmt;
  TokenDatabaseConfig tdc{config.chunk_size, config.save_unfull_chunk,
                          config.pre_caching_hash_algorithm, config.python_hash_seed};
  token_database_ = std::make_unique<ChunkedTokenDatabase>(tdc, metadata_, save_only_first_rank_,
                                                           registry_.get());
  storage_manager_ = std::make_unique<StorageManager>(config_, metadata_, shared, registry_.get());
}

LMCacheEngine::~LMCacheEngine() = default;

uint64_t LMCacheEngine::expected_content(const CacheEngineKey& key) const {
  return mix64(key.chunk_hash.fingerprint() ^ mix64(static_cast<uint64_t>(metadata_.worker_id)) ^
               (static_cast<uint64_t>(key.layer_id + 1) << 1));
}

std::vector<ChunkSpan> LMCacheEngine::spans_of(const TokenInput& input, int64_t num_masked) {
  if (input.use_hashes) {
    // process_tokens(hashes=..., offsets=...) still checks the mask's False count.
    if (num_masked % token_database_->chunk_size() != 0)
      raise(PyError::kValueError,
            "The number of Falses in the mask is not a multiple of the chunk size.");
    return token_database_->process_hashes(input.hashes, input.offsets);
  }
  return token_database_->process_tokens(input.tokens, num_masked, input.chain);
}

std::vector<ChunkInfo> LMCacheEngine::chunk_infos(std::span<const TokenId> tokens,
                                                  const RequestConfigs* request_configs) {
  const KeyScope* scope = token_database_->key_scope(request_configs);
  std::vector<ChunkInfo> out;
  for (const ChunkSpan& s : token_database_->process_tokens(tokens, 0))
    out.push_back({ChunkedTokenDatabase::make_key(s.hash, scope), s.start, s.end});
  return out;
}

// ----------------------------------------------------------------------------- store

StoreResult LMCacheEngine::store(const StoreRequest& req) {
  StoreResult out;
  try {
    store_impl(req, out);
  } catch (const UpstreamError& e) {
    out.error = e.kind();
  }
  return out;
}

void LMCacheEngine::store_impl(const StoreRequest& req, StoreResult& out) {
  if (!healthy_ || is_passive() || is_frozen()) return;
  const KeyScope* scope = token_database_->key_scope(req.request_configs);
  std::vector<ChunkSpan> spans = spans_of(req.input, req.num_masked);
  std::vector<CacheEngineKey> keys;
  std::vector<PyRef> objs;
  for (const ChunkSpan& s : spans) {
    PyRef obj = storage_manager_->allocate(metadata_.get_shape(s.end - s.start), metadata_.kv_dtype,
                                           fmt_, true, config_.force_store_wait);
    if (!obj) break;  // "store only N chunks"
    keys.push_back(ChunkedTokenDatabase::make_key(s.hash, scope));
    out.stored.push_back({s.start, s.end});
    objs.push_back(std::move(obj));
  }
  if (objs.empty()) return;
  for (size_t i = 0; i < objs.size(); ++i) objs[i]->content = expected_content(keys[i]);
  out.copied = true;
  storage_manager_->batched_put(keys, objs);
}

// ----------------------------------------------------------------------------- retrieve

RetrieveResult LMCacheEngine::retrieve(const RetrieveRequest& req) {
  RetrieveResult out;
  try {
    if (!healthy_) return out;
    std::vector<char> ret_mask(req.tokens.size(), 0);
    std::vector<ProcessedChunk> chunks;
    const bool async = config_.enable_async_loading;
    if (!is_passive())
      chunks = async ? async_process_tokens_internal(req, ret_mask)
                     : process_tokens_internal(req, ret_mask, out);
    for (const ProcessedChunk& c : chunks) {
      const MemoryObj& o = *c.obj;
      bool bad = !o.valid || o.content != expected_content(c.key);
      out.loaded.push_back({c.start, c.end, c.location, bad, async, c.key});
    }
    for (const ProcessedChunk& c : chunks) {
      if (c.unpin) storage_manager_->allocator().unpin(c.obj.id());
      storage_manager_->allocator().ref_count_down(c.obj.id());
    }
    out.ret_mask = mask_runs(ret_mask);
    for (const TokenRange& r : out.ret_mask) out.ret_tokens += r.end - r.start;
  } catch (const UpstreamError& e) {
    out.error = e.kind();
  }
  return out;
}

std::vector<LMCacheEngine::ProcessedChunk> LMCacheEngine::process_tokens_internal(
    const RetrieveRequest& req, std::vector<char>& ret_mask, RetrieveResult& out) {
  const KeyScope* scope = token_database_->key_scope(req.request_configs);
  std::vector<ChunkInfo> infos;
  for (const ChunkSpan& s : token_database_->process_tokens(req.tokens, req.num_masked))
    infos.push_back({ChunkedTokenDatabase::make_key(s.hash, scope), s.start, s.end});
  ChunkMapping mapping;
  const PinMap* pins = req.req_id ? lookup_pins_of(*req.req_id) : nullptr;
  if (pins != nullptr && pins->size() == 1) {
    mapping.emplace_back(pins->front().first, infos);
  } else {
    mapping = storage_manager_->get_block_mapping(infos);
  }
  const bool quirk = config_.quirks.partial_retrieve_bookkeeping;
  std::vector<ProcessedChunk> chunks;
  std::optional<int64_t> failed_start;
  std::vector<PyRef> memory_objs;  // the Python local rebinds per tier
  for (const auto& [location, blocks] : mapping) {
    std::vector<CacheEngineKey> keys;
    keys.reserve(blocks.size());
    for (const ChunkInfo& b : blocks) keys.push_back(b.key);
    memory_objs = storage_manager_->batched_get(keys, location).second;
    GetCall call{location, static_cast<int>(keys.size()), 0, 0, false};
    bool leading = true;
    for (const PyRef& r : memory_objs) {
      if (r) ++call.non_null;
      leading = leading && static_cast<bool>(r);
      if (leading) ++call.leading_non_null;
    }
    out.gets.push_back(call);
    size_t n = std::min(blocks.size(), memory_objs.size());
    for (size_t i = 0; i < n; ++i) {
      if (!memory_objs[i]) {
        int64_t start = blocks[i].start;
        if (!failed_start || (quirk ? *failed_start < start : start < *failed_start))
          failed_start = start;
        if (!quirk) {  // the fix releases the objects returned after the miss
          for (size_t j = i + 1; j < n; ++j) {
            if (memory_objs[j]) storage_manager_->allocator().ref_count_down(memory_objs[j].id());
          }
        }
        break;
      }
      chunks.push_back({blocks[i].key, memory_objs[i], blocks[i].start, blocks[i].end, location});
      std::fill(ret_mask.begin() + blocks[i].start, ret_mask.begin() + blocks[i].end, 1);
    }
  }
  if (failed_start) {
    std::fill(ret_mask.begin() + std::min<int64_t>(*failed_start, ret_mask.size()), ret_mask.end(),
              0);
    std::vector<ProcessedChunk> kept;
    for (ProcessedChunk& c : chunks) {
      bool keep = quirk ? c.end < *failed_start : c.end <= *failed_start;
      if (keep) {
        kept.push_back(std::move(c));
      } else if (!quirk) {
        storage_manager_->allocator().ref_count_down(c.obj.id());
      }
    }
    chunks = std::move(kept);
  }
  return chunks;
}

// ----------------------------------------------------------------------------- lookup

const PinMap* LMCacheEngine::lookup_pins_of(const std::string& lookup_id) const {
  auto it = lookup_pin_index_.find(lookup_id);
  return it == lookup_pin_index_.end() ? nullptr : &it->second->second;
}

PinMap& LMCacheEngine::pins_for(const std::string& lookup_id) {
  auto it = lookup_pin_index_.find(lookup_id);
  if (it != lookup_pin_index_.end()) return it->second->second;
  lookup_pins_.emplace_back(lookup_id, PinMap{});
  auto pos = std::prev(lookup_pins_.end());
  lookup_pin_index_.emplace(lookup_id, pos);
  return pos->second;
}

LookupResult LMCacheEngine::lookup(const LookupRequest& req) {
  LookupResult out;
  if (!healthy_) return out;
  try {
    try {
      out.hit_tokens = lookup_impl(req);
    } catch (...) {
      if (req.pin) storage_manager_->touch_cache();  // `finally`
      throw;
    }
    if (req.pin) storage_manager_->touch_cache();
  } catch (const UpstreamError& e) {
    out.error = e.kind();
    out.hit_tokens = 0;
  }
  return out;
}

int64_t LMCacheEngine::lookup_impl(const LookupRequest& req) {
  if (req.pin && !req.lookup_id && !config_.quirks.pinned_lookup_without_id_leaks_pins)
    raise(PyError::kAssertionError, "lookup_id is required when pin is True");
  const KeyScope* scope = token_database_->key_scope(req.request_configs);
  std::vector<ChunkSpan> spans = spans_of(req.input, 0);
  int64_t res = 0;
  if (config_.use_layerwise) {
    for (const ChunkSpan& s : spans) {
      std::vector<CacheEngineKey> layers =
          ChunkedTokenDatabase::make_key(s.hash, scope).split_layers(num_layers());
      auto [hits, mapping] = storage_manager_->batched_contains(layers, req.search_range, req.pin);
      if (hits == num_layers() && mapping.size() == 1) {
        if (req.pin) {
          if (!req.lookup_id) raise(PyError::kAssertionError, "lookup_id is required");
          PinMap& pins = pins_for(*req.lookup_id);
          const std::string& location = mapping.front().first;
          auto it = std::find_if(pins.begin(), pins.end(),
                                 [&](const auto& p) { return p.first == location; });
          if (it == pins.end()) {
            pins.emplace_back(location, std::vector<CacheEngineKey>{});
            it = std::prev(pins.end());
          }
          it->second.insert(it->second.end(), layers.begin(), layers.end());
        }
        res = s.end;
        continue;
      }
      return res;
    }
    return res;
  }
  std::vector<CacheEngineKey> keys;
  keys.reserve(spans.size());
  for (const ChunkSpan& s : spans) keys.push_back(ChunkedTokenDatabase::make_key(s.hash, scope));
  auto [hits, mapping] = storage_manager_->batched_contains(keys, req.search_range, req.pin);
  if (req.pin && !mapping.empty()) {
    if (!req.lookup_id) raise(PyError::kAssertionError, "lookup_id is required when pin is True");
    pins_for(*req.lookup_id) = std::move(mapping);
  }
  if (hits > 0) res = spans[static_cast<size_t>(hits) - 1].end;
  return res;
}

PinMap LMCacheEngine::lookup_unpin(const std::string& lookup_id) {
  auto it = lookup_pin_index_.find(lookup_id);
  if (it == lookup_pin_index_.end()) {
    // #2559: an async lookup's prefetch that no retrieve took is released here.
    const AsyncPrefetcher* p = storage_manager_->async_prefetcher();
    if (p != nullptr && !config_.quirks.async_loading_leaks &&
        p->event_status(lookup_id) != EventStatus::kNotFound)
      cleanup_memory_objs(lookup_id);
    return {};
  }
  PinMap pins = std::move(it->second->second);
  lookup_pins_.erase(it->second);
  lookup_pin_index_.erase(it);
  for (const auto& [location, keys] : pins) {
    std::vector<std::string> locations{location};
    storage_manager_->batched_unpin(keys, &locations);
  }
  return pins;
}

// ----------------------------------------------------------------------------- clear

LMCacheEngine::ClearResult LMCacheEngine::clear(std::optional<std::span<const TokenId>> tokens,
                                                const std::vector<std::string>* locations,
                                                const RequestConfigs* request_configs) {
  ClearResult out;
  try {
    if (save_only_first_rank_ && !metadata_.is_first_rank()) return out;
    if (!tokens || tokens->empty()) {
      out.count = storage_manager_->clear(locations);
      return out;
    }
    for (const ChunkInfo& c : chunk_infos(*tokens, request_configs))
      out.count += storage_manager_->remove(c.key, locations);
  } catch (const UpstreamError& e) {
    out.error = e.kind();
  }
  return out;
}

// ----------------------------------------------------------------------------- layerwise

std::unique_ptr<StoreLayerTask> LMCacheEngine::store_layer(const StoreRequest& req) {
  return std::make_unique<StoreLayerTask>(this, req);
}

std::unique_ptr<RetrieveLayerTask> LMCacheEngine::retrieve_layer(const RetrieveRequest& req) {
  return std::make_unique<RetrieveLayerTask>(this, req);
}

}  // namespace kvtwin::model::lmcache
