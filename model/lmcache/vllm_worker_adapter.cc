#include "model/lmcache/vllm_worker_adapter.h"

#include <algorithm>

#include "model/lmcache/upstream_error.h"

namespace kvtwin::model::lmcache {
namespace {

AdapterCall make_call(AdapterCall::Kind kind, std::optional<std::string> req_id, int64_t num_tokens,
                      int64_t num_masked) {
  AdapterCall c;
  c.kind = kind;
  c.req_id = std::move(req_id);
  c.num_tokens = num_tokens;
  c.num_masked = num_masked;
  return c;
}

// Upstream's worker asserts len(slot_mapping) == len(token_ids) before it loads or saves a
// request. from_request_tracker cuts the slot mapping to the allocated blocks and only logs when
// the tokens outrun them (a tracker that re-appended recomputed tokens, say): the worker raises.
void check_slots(const ReqMeta& r) {
  if (r.num_slots() != r.token_ids.size())
    raise(PyError::kAssertionError, "len(slot_mapping) == len(token_ids) for request " + r.req_id);
}

}  // namespace

LMCacheWorkerAdapter::LMCacheWorkerAdapter(LMCacheEngine* engine, const AdapterConfig& adapter)
    : engine_(engine), adapter_(adapter), chunk_size_(engine->config().chunk_size) {}

void LMCacheWorkerAdapter::start_load_kv(ConnectorMetadata& meta, WorkerLog* log) {
  current_layer_ = 0;
  retrievers_.clear();
  const bool layerwise = engine_->use_layerwise();
  for (ReqMeta& r : meta.requests) {
    if (!r.load_spec) continue;
    check_slots(r);
    const LoadSpec& ls = *r.load_spec;
    int64_t masked = ls.vllm_cached_tokens / chunk_size_ * chunk_size_;
    int64_t n = std::min<int64_t>(static_cast<int64_t>(r.token_ids.size()),
                                  std::max<int64_t>(ls.lmcache_cached_tokens, 0));
    int64_t num_masked = std::min(masked, n);
    std::span<const TokenId> tokens(r.token_ids.data(), static_cast<size_t>(n));
    if (layerwise) {
      RetrieveRequest req{tokens, num_masked, std::nullopt, nullptr};
      auto task = engine_->retrieve_layer(req);
      log->calls.push_back(
          make_call(AdapterCall::Kind::kRetrieveLayer, std::nullopt, n, num_masked));
      task->next();
      log->loaded.insert(log->loaded.end(), task->loaded().begin(), task->loaded().end());
      log->calls.back().num_loaded = task->loaded().size();
      task->next();
      retrievers_.push_back(std::move(task));
      continue;
    }
    RetrieveRequest req{tokens, num_masked, r.req_id,
                        r.request_configs ? &*r.request_configs : nullptr};
    RetrieveResult res = engine_->retrieve(req);
    if (res.error) raise(*res.error, "retrieve");
    AdapterCall call = make_call(AdapterCall::Kind::kRetrieve, r.req_id, n, num_masked);
    call.ret_tokens = res.ret_tokens;
    call.num_loaded = res.loaded.size();
    log->calls.push_back(std::move(call));
    log->loaded.insert(log->loaded.end(), res.loaded.begin(), res.loaded.end());
    if (res.ret_tokens < ls.lmcache_cached_tokens - ls.vllm_cached_tokens && n > 0) {
      // record_failed_blocks: expected (unmasked) positions that did not come back.
      std::vector<char> ret(static_cast<size_t>(n), 0);
      for (const TokenRange& tr : res.ret_mask)
        std::fill(ret.begin() + tr.start, ret.begin() + std::min(tr.end, n), 1);
      for (int64_t i = num_masked; i < n; ++i) {
        if (!ret[i] && i < static_cast<int64_t>(r.num_slots()))
          invalid_block_ids_.insert(r.slot(static_cast<size_t>(i)) / adapter_.vllm_block_size);
      }
    }
  }
}

void LMCacheWorkerAdapter::wait_for_layer_load(WorkerLog* /*log*/) {
  for (auto& task : retrievers_) {
    if (!task->next()) raise(PyError::kStopIteration, "retrieve_layer exhausted");
  }
}

void LMCacheWorkerAdapter::save_kv_layer(ConnectorMetadata& meta, WorkerLog* log) {
  if (!engine_->use_layerwise()) return;
  if (current_layer_ == 0) {
    storers_.clear();
    for (ReqMeta& r : meta.requests) {
      if (!r.save_spec || !r.save_spec->can_save) continue;
      check_slots(r);
      int64_t len = static_cast<int64_t>(r.token_ids.size());
      int64_t skip = r.save_spec->skip_leading_tokens;
      if (skip == len) continue;
      skip = skip / chunk_size_ * chunk_size_;
      int64_t num_masked = std::min(skip, len);
      StoreRequest req{TokenInput::of_tokens(r.token_ids), num_masked, nullptr};
      storers_.push_back(engine_->store_layer(req));
      log->calls.push_back(make_call(AdapterCall::Kind::kStoreLayer, r.req_id, len, num_masked));
    }
  }
  for (size_t i = 0; i < storers_.size(); ++i) {
    StoreLayerTask& task = *storers_[i];
    bool first = task.yields() == 0;
    if (!task.next()) raise(PyError::kStopIteration, "store_layer exhausted");
    if (first) log->stored.insert(log->stored.end(), task.stored().begin(), task.stored().end());
  }
  ++current_layer_;
}

void LMCacheWorkerAdapter::unpin(const std::string& req_id, WorkerLog* log) {
  bool existed = engine_->lookup_pins_of(req_id) != nullptr;
  PinMap pins = engine_->lookup_unpin(req_id);
  if (existed) {
    AdapterCall call = make_call(AdapterCall::Kind::kUnpin, req_id, 0, 0);
    call.unpinned = std::move(pins);
    log->calls.push_back(std::move(call));
  }
}

std::vector<std::pair<TokenRange, int>> LMCacheWorkerAdapter::abandon_stores() {
  std::vector<std::pair<TokenRange, int>> put;
  for (const auto& task : storers_)
    if (task->layers_copied() > 0)
      for (const TokenRange& r : task->stored()) put.emplace_back(r, task->layers_copied());
  storers_.clear();
  return put;
}

void LMCacheWorkerAdapter::wait_for_save(ConnectorMetadata& meta, WorkerLog* log) {
  if (adapter_.kv_consumer) return;
  if (engine_->use_layerwise()) {
    for (auto& task : storers_) {
      if (!task->next()) raise(PyError::kStopIteration, "store_layer exhausted");
    }
    for (const ReqMeta& r : meta.requests) unpin(r.req_id, log);
    return;
  }
  for (ReqMeta& r : meta.requests) {
    unpin(r.req_id, log);
    if (!r.save_spec || !r.save_spec->can_save) continue;
    check_slots(r);
    int64_t len = static_cast<int64_t>(r.token_ids.size());
    int64_t skip = r.save_spec->skip_leading_tokens;
    if (skip == len) continue;
    skip = skip / chunk_size_ * chunk_size_;
    if (!r.is_last_prefill) len = len / chunk_size_ * chunk_size_;
    int64_t num_masked = std::min(skip, len);
    std::span<const TokenId> tokens(r.token_ids.data(), static_cast<size_t>(len));
    StoreRequest req{TokenInput::of_tokens(tokens, r.chunk_hashes), num_masked,
                     r.request_configs ? &*r.request_configs : nullptr};
    StoreResult res = engine_->store(req);
    if (res.error) {
      // Not upstream (its engine stops here): chunks copied off the GPU before the raise are
      // logged, so that the caller charges the copy.
      if (res.copied) log->stored.insert(log->stored.end(), res.stored.begin(), res.stored.end());
      raise(*res.error, "store");
    }
    AdapterCall call = make_call(AdapterCall::Kind::kStore, r.req_id, len, num_masked);
    call.stored = res.stored;
    log->calls.push_back(std::move(call));
    log->stored.insert(log->stored.end(), res.stored.begin(), res.stored.end());
    r.save_spec->skip_leading_tokens = len;
  }
}

std::vector<int64_t> LMCacheWorkerAdapter::get_block_ids_with_load_errors() {
  std::vector<int64_t> out(invalid_block_ids_.begin(), invalid_block_ids_.end());
  invalid_block_ids_.clear();
  return out;
}

}  // namespace kvtwin::model::lmcache
