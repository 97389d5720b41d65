// PagedKvCache: a GPU paged KV cache in vLLM's layout, one buffer per layer, plus the device
// array of layer pointers that the copy kernels index (uploaded once, at creation, so no launch
// ever races with an upload).
//
// In a real deployment vLLM owns these buffers; here the twin owns them, standing in for the
// serving engine's KV cache, so the real Mover and the benchmarks have something to copy to and
// from. DeviceLayerTable is the part that would wrap vLLM's own pointers.
//
// Threading: immutable after creation except for the bytes, which belong to the streams using
// them.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/kv_layout.h"
#include "cuda/status.h"

namespace kvtwin::cuda {

// A device array of layer base pointers, with their host copy and the OR of their addresses
// (the alignment that kv_copy_vector_bytes needs and cannot read from the device).
class DeviceLayerTable {
 public:
  DeviceLayerTable() = default;
  // Uploads `layers` (device pointers) synchronously.
  static Status create(std::vector<uint8_t*> layers, DeviceLayerTable* out);

  int num_layers() const { return static_cast<int>(host_.size()); }
  uint8_t* layer(int l) const { return host_[l]; }
  // Device array of num_layers() pointers; entry l is layer l.
  uint8_t* const* device() const { return reinterpret_cast<uint8_t* const*>(table_.data()); }
  uint64_t address_bits() const { return address_bits_; }

 private:
  std::vector<uint8_t*> host_;
  DeviceBuffer table_;
  uint64_t address_bits_ = 0;
};

class PagedKvCache {
 public:
  PagedKvCache() = default;
  // Allocates num_layers buffers of layout.layer_bytes() (one cudaMalloc, each layer 256-byte
  // aligned) and the layer table. The bytes are left uninitialised.
  static Status create(const PagedLayout& layout, int num_layers, PagedKvCache* out);

  const PagedLayout& layout() const { return layout_; }
  int num_layers() const { return table_.num_layers(); }
  uint8_t* layer(int l) const { return table_.layer(l); }
  const DeviceLayerTable& table() const { return table_; }

  // A request copying layers [first_layer, first_layer + num_layers) of this cache (device
  // pointers; `chunks` must be device-visible). For KV_T2D / KV_2TD num_layers is 1.
  KvCopyRequest request(ChunkFormat format, int first_layer, int num_layers,
                        const int64_t* device_slots, int64_t num_tokens, int64_t tokens_per_chunk,
                        uint8_t* const* chunks, CopyDirection direction) const;

 private:
  PagedLayout layout_;
  DeviceBuffer memory_;
  DeviceLayerTable table_;
};

}  // namespace kvtwin::cuda
