#include "model/lmcache/layerwise_tasks.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::model::lmcache {

// ----------------------------------------------------------------------------- store_layer

StoreLayerTask::StoreLayerTask(LMCacheEngine* engine, const StoreRequest& req)
    : engine_(engine),
      tokens_(req.input.tokens.begin(), req.input.tokens.end()),
      num_masked_(req.num_masked),
      has_configs_(req.request_configs != nullptr) {
  KVTWIN_CHECK(!req.input.use_hashes) << "store_layer takes tokens";
  if (req.request_configs != nullptr) configs_ = *req.request_configs;
}

void StoreLayerTask::start() {
  LMCacheEngine& e = *engine_;
  if (!e.is_healthy()) {
    phase_ = Phase::kDone;
    return;
  }
  if (e.is_frozen()) {
    phase_ = Phase::kFrozen;
    return;
  }
  const int L = e.num_layers();
  const KeyScope* scope = e.token_database().key_scope(has_configs_ ? &configs_ : nullptr);
  std::vector<std::vector<CacheEngineKey>> chunk_keys;
  std::vector<std::vector<PyRef>> chunk_objs;
  for (const ChunkSpan& s : e.token_database().process_tokens(tokens_, num_masked_)) {
    std::vector<CacheEngineKey> layers =
        ChunkedTokenDatabase::make_key(s.hash, scope).split_layers(L);
    if (!e.storage_manager().contains(layers[0], nullptr, false).empty()) continue;
    MemoryFormat fmt = e.fmt().value_or(MemoryFormat::kKvT2D);
    std::vector<PyRef> objs = e.storage_manager().batched_allocate(
        e.metadata().layer_shape(s.end - s.start, fmt), e.metadata().kv_dtype, L, e.fmt(), true,
        e.config().force_store_wait);
    if (objs.empty()) break;
    stored_.push_back({s.start, s.end});
    for (int l = 0; l < L; ++l) objs[l]->content = e.expected_content(layers[l]);
    chunk_keys.push_back(std::move(layers));
    chunk_objs.push_back(std::move(objs));
  }
  if (chunk_keys.empty()) {
    phase_ = Phase::kEmpty;
    return;
  }
  keys_.assign(L, {});
  objs_.assign(L, {});
  for (size_t c = 0; c < chunk_keys.size(); ++c) {
    for (int l = 0; l < L; ++l) {
      keys_[l].push_back(chunk_keys[c][l]);
      objs_[l].push_back(std::move(chunk_objs[c][l]));
    }
  }
  phase_ = Phase::kKeys;
  layer_ = 0;
}

bool StoreLayerTask::next() {
  const int L = engine_->num_layers();
  try {
    switch (phase_) {
      case Phase::kStart:
        start();
        if (phase_ == Phase::kDone) return false;
        ++yields_;
        return true;
      case Phase::kKeys:
        copied_ = layer_ + 1;
        engine_->storage_manager().batched_put(keys_[layer_], objs_[layer_]);
        ++layer_;
        if (layer_ >= L) phase_ = Phase::kFinal;
        ++yields_;
        return true;
      case Phase::kEmpty:
        if (yields_ >= L) phase_ = Phase::kFinal;
        ++yields_;
        return true;
      case Phase::kFrozen:
        if (yields_ >= L) {
          phase_ = Phase::kDone;
          return false;
        }
        ++yields_;
        return true;
      case Phase::kFinal:
        phase_ = Phase::kDone;
        objs_.clear();
        return false;
      case Phase::kDone:
        return false;
    }
  } catch (...) {
    phase_ = Phase::kDone;
    objs_.clear();
    throw;
  }
  return false;
}

// ----------------------------------------------------------------------------- retrieve_layer

RetrieveLayerTask::RetrieveLayerTask(LMCacheEngine* engine, const RetrieveRequest& req)
    : engine_(engine),
      tokens_(req.tokens.begin(), req.tokens.end()),
      num_masked_(req.num_masked),
      has_configs_(req.request_configs != nullptr) {
  if (req.request_configs != nullptr) configs_ = *req.request_configs;
}

void RetrieveLayerTask::start() {
  LMCacheEngine& e = *engine_;
  ret_mask_.assign(tokens_.size(), 0);
  if (!e.is_healthy()) {
    phase_ = Phase::kUnhealthy;
    return;
  }
  const int L = e.num_layers();
  const KeyScope* scope = e.token_database().key_scope(has_configs_ ? &configs_ : nullptr);
  std::vector<std::vector<CacheEngineKey>> chunk_keys;
  for (const ChunkSpan& s : e.token_database().process_tokens(tokens_, num_masked_)) {
    const CacheEngineKey chunk = ChunkedTokenDatabase::make_key(s.hash, scope);
    std::vector<CacheEngineKey> layers = chunk.split_layers(L);
    std::string current = e.storage_manager().contains(layers[0], nullptr, false);
    if (current.empty()) break;
    if (location_.empty()) {
      location_ = current;
    } else if (location_ != current) {
      raise(PyError::kAssertionError,
            "All retrieved keys should be from the same location when use layerwise retrieval.");
    }
    ranges_.push_back({s.start, s.end});
    loaded_.push_back({s.start, s.end, location_, false, false, chunk});
    chunk_keys.push_back(std::move(layers));
    std::fill(ret_mask_.begin() + s.start, ret_mask_.begin() + s.end, 1);
  }
  if (chunk_keys.empty()) {
    phase_ = Phase::kEmpty;
    return;
  }
  keys_.assign(L, {});
  for (const auto& layers : chunk_keys) {
    for (int l = 0; l < L; ++l) keys_[l].push_back(layers[l]);
  }
  gets_.push_back({location_, static_cast<int>(chunk_keys.size()), 0, 0, true});
  for (char c : ret_mask_) first_yield_ += c;
  layer_ = 0;
  pending_ = e.storage_manager().layerwise_get_layer(keys_[0], location_);
  phase_ = Phase::kKeys;
}

void RetrieveLayerTask::truncate(size_t first_missing) {
  if (first_missing >= ranges_.size()) return;
  std::fill(ret_mask_.begin() + ranges_[first_missing].start, ret_mask_.end(), 0);
  ranges_.resize(first_missing);
  loaded_.resize(first_missing);
  for (auto& layer_keys : keys_) {
    if (layer_keys.size() > first_missing) layer_keys.resize(first_missing);
  }
}

void RetrieveLayerTask::load_layer(std::vector<PyRef>& objs, int layer) {
  for (size_t c = 0; c < objs.size() && c < loaded_.size(); ++c) {
    if (objs[c]) continue;
    truncate(c);
    // Objects of the dropped chunks go back (their loads will not be used).
    TensorMemoryAllocator& a = engine_->storage_manager().allocator();
    for (size_t d = c; d < objs.size(); ++d) {
      if (objs[d]) a.ref_count_down(objs[d].id());
    }
    objs.resize(c);
    break;
  }
  // Redis's non-blocking get returns only what it read (no None in place): upstream zips those
  // objects with the leading keys, and the chunks past the end keep their mask bits without being
  // written (bad). With Quirks::remote_prefetch_drops_missing_chunks fixed the get returns the
  // leading run, and the chunks past it are a miss like a None.
  if (objs.size() < loaded_.size() &&
      !engine_->config().quirks.remote_prefetch_drops_missing_chunks)
    truncate(objs.size());
  for (size_t c = 0; c < objs.size() && c < loaded_.size(); ++c) {
    const MemoryObj& o = *objs[c];
    if (!o.valid || o.content != engine_->expected_content(keys_[layer][c])) loaded_[c].bad = true;
  }
  if (objs.size() < loaded_.size()) {
    for (size_t c = objs.size(); c < loaded_.size(); ++c) loaded_[c].bad = true;
  }
}

void RetrieveLayerTask::yield_mask() {
  ret_mask_runs_ = mask_runs(ret_mask_);
  ret_tokens_ = 0;
  for (const TokenRange& r : ret_mask_runs_) ret_tokens_ += r.end - r.start;
  mask_yielded_ = true;
}

bool RetrieveLayerTask::next() {
  const int L = engine_->num_layers();
  try {
    switch (phase_) {
      case Phase::kStart:
        start();
        if (phase_ == Phase::kUnhealthy) yield_mask();
        ++yields_;
        return true;
      case Phase::kUnhealthy:
        phase_ = Phase::kDone;
        return false;
      case Phase::kKeys: {
        load_layer(pending_, layer_);
        for (PyRef& r : pending_) to_count_down_.push_back(std::move(r));
        pending_.clear();
        ++layer_;
        if (layer_ < L) {
          pending_ = engine_->storage_manager().layerwise_get_layer(keys_[layer_], location_);
        } else {
          TensorMemoryAllocator& a = engine_->storage_manager().allocator();
          for (const PyRef& r : to_count_down_) a.ref_count_down(r.id());
          to_count_down_.clear();
          phase_ = Phase::kSync;
        }
        ++yields_;
        return true;
      }
      case Phase::kSync:
        yield_mask();
        phase_ = Phase::kMask;
        ++yields_;
        return true;
      case Phase::kMask:
        phase_ = Phase::kDone;
        return false;
      case Phase::kEmpty:
        if (yields_ >= L) phase_ = Phase::kEmptyTail;
        ++yields_;
        return true;
      case Phase::kEmptyTail:
        if (engine_->config().quirks.retrieve_layer_zero_hits_unbound) {
          phase_ = Phase::kDone;
          raise(PyError::kUnboundLocalError, "mem_obj_consumer");
        }
        yield_mask();
        phase_ = Phase::kMask;
        ++yields_;
        return true;
      case Phase::kDone:
        return false;
    }
  } catch (...) {
    phase_ = Phase::kDone;
    throw;
  }
  return false;
}

}  // namespace kvtwin::model::lmcache
