#include "cuda/layerwise_pipeline.h"

#include <string>
#include <utility>

namespace kvtwin::cuda {
namespace {

Status make_events(int n, bool timing, std::vector<Event>* out) {
  out->clear();
  for (int i = 0; i < n; ++i) {
    Event e;
    KVTWIN_RETURN_IF_ERROR(Event::create(&e, timing));
    out->push_back(std::move(e));
  }
  return Status();
}

Status check_request(const LayerwiseRequest& r, int num_layers) {
  if (static_cast<int>(r.layers.size()) != num_layers) {
    return Status::error("layerwise request has " + std::to_string(r.layers.size()) +
                         " layers, pipeline has " + std::to_string(num_layers));
  }
  if (r.format == ChunkFormat::kKV_2LTD) {
    return Status::error("layerwise objects hold one layer: KV_T2D, KV_2TD or KV_MLA");
  }
  return Status();
}

HostChunkBatch layer_batch(const LayerwiseRequest& r, int layer) {
  HostChunkBatch b;
  b.format = r.format;
  b.first_layer = layer;
  b.num_layers = 1;
  b.device_slots = r.device_slots;
  b.num_tokens = r.num_tokens;
  b.tokens_per_chunk = r.tokens_per_chunk;
  b.chunks = r.layers[layer];
  return b;
}

}  // namespace

// --- LayerwiseStore ----------------------------------------------------------------------------

Status LayerwiseStore::create(KvTransferEngine* engine, int num_layers, LayerwiseStore* out) {
  LayerwiseStore s;
  s.engine_ = engine;
  KVTWIN_RETURN_IF_ERROR(make_events(num_layers, /*timing=*/false, &s.compute_ready_));
  KVTWIN_RETURN_IF_ERROR(make_events(num_layers, /*timing=*/true, &s.stored_));
  *out = std::move(s);
  return Status();
}

Status LayerwiseStore::begin(const LayerwiseRequest& request) {
  if (!engine_) return Status::error("LayerwiseStore not created");
  KVTWIN_RETURN_IF_ERROR(check_request(request, static_cast<int>(stored_.size())));
  request_ = request;
  next_layer_ = 0;
  return Status();
}

Status LayerwiseStore::store_layer(int layer, cudaStream_t compute) {
  if (layer != next_layer_ || layer >= static_cast<int>(stored_.size())) {
    return Status::error("store_layer(" + std::to_string(layer) + ") out of order; expected " +
                         std::to_string(next_layer_));
  }
  KVTWIN_RETURN_IF_ERROR(compute_ready_[layer].record(compute));
  KVTWIN_RETURN_IF_ERROR(
      engine_->store(layer_batch(request_, layer), request_.path, compute_ready_[layer].get()));
  KVTWIN_RETURN_IF_ERROR(engine_->record_completion(stored_[layer].get()));
  ++next_layer_;
  return Status();
}

Status LayerwiseStore::finish() {
  if (next_layer_ > 0) KVTWIN_RETURN_IF_ERROR(stored_[next_layer_ - 1].synchronize());
  return engine_->synchronize();
}

// --- LayerwiseRetrieve -------------------------------------------------------------------------

Status LayerwiseRetrieve::create(KvTransferEngine* engine, int num_layers, LayerwiseRetrieve* out) {
  LayerwiseRetrieve r;
  r.engine_ = engine;
  KVTWIN_RETURN_IF_ERROR(make_events(num_layers, /*timing=*/true, &r.loaded_));
  *out = std::move(r);
  return Status();
}

Status LayerwiseRetrieve::load(int layer) {
  KVTWIN_RETURN_IF_ERROR(engine_->retrieve(layer_batch(request_, layer), request_.path));
  return engine_->record_completion(loaded_[layer].get());
}

Status LayerwiseRetrieve::begin(const LayerwiseRequest& request) {
  if (!engine_) return Status::error("LayerwiseRetrieve not created");
  const int num_layers = static_cast<int>(loaded_.size());
  KVTWIN_RETURN_IF_ERROR(check_request(request, num_layers));
  request_ = request;
  next_wait_ = 0;
  next_load_ = 0;
  while (next_load_ < num_layers && next_load_ < kLayersInFlight) {
    KVTWIN_RETURN_IF_ERROR(load(next_load_++));
  }
  return Status();
}

Status LayerwiseRetrieve::wait_layer(int layer, cudaStream_t compute) {
  const int num_layers = static_cast<int>(loaded_.size());
  if (layer != next_wait_ || layer >= num_layers) {
    return Status::error("wait_layer(" + std::to_string(layer) + ") out of order; expected " +
                         std::to_string(next_wait_));
  }
  KVTWIN_RETURN_IF_ERROR(loaded_[layer].wait_on(compute));
  ++next_wait_;
  if (next_load_ < num_layers) KVTWIN_RETURN_IF_ERROR(load(next_load_++));
  return Status();
}

Status LayerwiseRetrieve::finish() {
  return engine_->synchronize();
}

}  // namespace kvtwin::cuda
