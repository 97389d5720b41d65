#include "cuda/paged_kv_cache.h"

#include <utility>

#include "model/check.h"

namespace kvtwin::cuda {

Status DeviceLayerTable::create(std::vector<uint8_t*> layers, DeviceLayerTable* out) {
  DeviceLayerTable t;
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(layers.size() * sizeof(uint8_t*), &t.table_));
  if (!layers.empty()) {
    KVTWIN_CUDA_TRY(cudaMemcpy(t.table_.data(), layers.data(), layers.size() * sizeof(uint8_t*),
                               cudaMemcpyHostToDevice));
  }
  for (uint8_t* p : layers) t.address_bits_ |= reinterpret_cast<uintptr_t>(p);
  t.host_ = std::move(layers);
  *out = std::move(t);
  return Status();
}

Status PagedKvCache::create(const PagedLayout& layout, int num_layers, PagedKvCache* out) {
  KVTWIN_CHECK(num_layers > 0) << "num_layers " << num_layers;
  PagedKvCache c;
  c.layout_ = layout;
  const size_t stride = (static_cast<size_t>(layout.layer_bytes()) + 255) / 256 * 256;
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(stride * num_layers, &c.memory_));
  std::vector<uint8_t*> layers;
  for (int l = 0; l < num_layers; ++l) layers.push_back(c.memory_.data() + stride * l);
  KVTWIN_RETURN_IF_ERROR(DeviceLayerTable::create(std::move(layers), &c.table_));
  *out = std::move(c);
  return Status();
}

KvCopyRequest PagedKvCache::request(ChunkFormat format, int first_layer, int num_layers,
                                    const int64_t* device_slots, int64_t num_tokens,
                                    int64_t tokens_per_chunk, uint8_t* const* chunks,
                                    CopyDirection direction) const {
  KVTWIN_CHECK(first_layer >= 0 && num_layers > 0 && first_layer + num_layers <= this->num_layers())
      << "layers [" << first_layer << ", " << first_layer + num_layers << ") of "
      << this->num_layers();
  KvCopyRequest r;
  r.paged = layout_;
  r.format = format;
  r.num_layers = num_layers;
  r.layers = table_.device() + first_layer;
  for (int l = first_layer; l < first_layer + num_layers; ++l) {
    r.layer_address_bits |= reinterpret_cast<uintptr_t>(table_.layer(l));
  }
  r.slots = device_slots;
  r.num_tokens = num_tokens;
  r.tokens_per_chunk = tokens_per_chunk;
  r.chunks = chunks;
  r.direction = direction;
  return r;
}

}  // namespace kvtwin::cuda
