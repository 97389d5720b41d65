// The layerwise pipeline: LMCache's store_layer / retrieve_layer protocols on real bytes.
//
// Store. As the forward pass finishes layer l, that layer's K/V for the request's tokens is
// stored into one object per chunk (KV_T2D; KV_MLA with one layer for MLA), on the transfer
// engine's streams, while layer l+1 computes:
//
//   compute stream:  [layer 0][layer 1][layer 2][layer 3]
//   engine streams:           [store 0][store 1][store 2][store 3]
//
// Retrieve. Layer l must be in the paged cache before layer l computes; the load of layer l+1
// (and l+2) runs while layer l computes, two layers in flight (double buffering):
//
//   engine streams:  [load 0][load 1][load 2][load 3]
//   compute stream:          [layer 0][layer 1][layer 2][layer 3]
//
// model/lmcache's store_layer / retrieve_layer generators decide which objects and when; this
// class performs the bytes for one request at a time, driven one layer at a time.
//
// Ownership: the objects in the request belong to the caller and must outlive finish().
// Threading: one host thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/kv_transfer.h"
#include "cuda/status.h"

namespace kvtwin::cuda {

struct LayerwiseRequest {
  ChunkFormat format = ChunkFormat::kKV_T2D;  // one-layer format: KV_T2D, KV_2TD or KV_MLA
  const int64_t* device_slots = nullptr;      // [num_tokens], device memory
  int64_t num_tokens = 0;
  int64_t tokens_per_chunk = 0;
  std::vector<std::vector<HostChunk>> layers;  // [layer][chunk]: the objects of each layer
  HostPath path = HostPath::kStaged;
};

// Store side. Usage: begin(req); store_layer(0, s); ...; store_layer(L-1, s); finish().
class LayerwiseStore {
 public:
  LayerwiseStore() = default;
  // `engine` must outlive this object. Creates one timing event per layer.
  static Status create(KvTransferEngine* engine, int num_layers, LayerwiseStore* out);

  Status begin(const LayerwiseRequest& request);
  // Layer `layer`'s KV is complete once the work enqueued so far on `compute` has run: enqueues
  // its store behind that point and returns. REQUIRES: layers stored in order 0, 1, 2, ...
  Status store_layer(int layer, cudaStream_t compute);
  // Completes when layer `layer` is in its host objects (timing-enabled; for overlap checks).
  const Event& stored(int layer) const { return stored_[layer]; }
  // Waits until every layer stored so far is in host memory.
  Status finish();

 private:
  KvTransferEngine* engine_ = nullptr;
  LayerwiseRequest request_;
  std::vector<Event> compute_ready_;
  std::vector<Event> stored_;
  int next_layer_ = 0;
};

// Retrieve side. Usage: begin(req); wait_layer(0, s); <layer 0>; wait_layer(1, s); ...; finish().
class LayerwiseRetrieve {
 public:
  static constexpr int kLayersInFlight = 2;

  LayerwiseRetrieve() = default;
  static Status create(KvTransferEngine* engine, int num_layers, LayerwiseRetrieve* out);

  // Enqueues the loads of the first kLayersInFlight layers.
  Status begin(const LayerwiseRequest& request);
  // Makes `compute` wait (on the device) until layer `layer` is in the paged cache, then enqueues
  // the load of layer + kLayersInFlight. REQUIRES: layers waited for in order.
  Status wait_layer(int layer, cudaStream_t compute);
  const Event& loaded(int layer) const { return loaded_[layer]; }
  Status finish();

 private:
  Status load(int layer);

  KvTransferEngine* engine_ = nullptr;
  LayerwiseRequest request_;
  std::vector<Event> loaded_;
  int next_wait_ = 0;
  int next_load_ = 0;
};

}  // namespace kvtwin::cuda
