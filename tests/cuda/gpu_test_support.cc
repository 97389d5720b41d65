#include "tests/cuda/gpu_test_support.h"

#include <cstdlib>
#include <cstring>

#include "cuda/kv_copy.h"

namespace kvtwin::cuda::testing {

std::string missing_device_reason() {
  const Status s = probe_device();
  return s.ok() ? "" : s.message();
}

bool gpu_required() {
  const char* v = std::getenv("KVTWIN_REQUIRE_GPU");
  return v && std::strcmp(v, "1") == 0;
}

Status run_on_device(HostKvArena& arena, ChunkPlace place) {
  const size_t n = arena.size();
  const std::vector<uint8_t> original = arena.snapshot();
  DeviceBuffer dev;
  PinnedBuffer pin;
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(n, &dev));
  KVTWIN_CUDA_TRY(cudaMemcpy(dev.data(), arena.data(), n, cudaMemcpyHostToDevice));
  if (place == ChunkPlace::kPinned) {
    KVTWIN_RETURN_IF_ERROR(PinnedBuffer::allocate(n, &pin));
    std::memcpy(pin.host(), arena.data(), n);
  }
  const KvCopyRequest host_req = arena.request();
  std::vector<uint8_t*> layers;
  for (int l = 0; l < host_req.num_layers; ++l) {
    layers.push_back(dev.data() + (host_req.layers[l] - arena.data()));
  }
  std::vector<uint8_t*> chunks;
  for (int64_t c = 0; c < host_req.num_chunks(); ++c) {
    const size_t off = static_cast<size_t>(host_req.chunks[c] - arena.data());
    chunks.push_back(place == ChunkPlace::kDevice ? dev.data() + off : pin.device() + off);
  }
  DeviceBuffer layer_table, slots;
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(layers.size() * sizeof(uint8_t*), &layer_table));
  KVTWIN_CUDA_TRY(
      cudaMemcpy(layer_table.data(), layers.data(), layer_table.size(), cudaMemcpyHostToDevice));
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(arena.slots().size() * sizeof(int64_t), &slots));
  if (!arena.slots().empty()) {
    KVTWIN_CUDA_TRY(
        cudaMemcpy(slots.data(), arena.slots().data(), slots.size(), cudaMemcpyHostToDevice));
  }
  KvCopyRequest req = host_req;
  req.layers = reinterpret_cast<uint8_t* const*>(layer_table.data());
  req.layer_address_bits = 0;
  for (uint8_t* p : layers) req.layer_address_bits |= reinterpret_cast<uintptr_t>(p);
  req.slots = reinterpret_cast<const int64_t*>(slots.data());
  req.chunks = chunks.data();
  Stream stream;
  KVTWIN_RETURN_IF_ERROR(Stream::create(&stream));
  KVTWIN_RETURN_IF_ERROR(launch_kv_copy(req, stream.get()));
  KVTWIN_RETURN_IF_ERROR(stream.synchronize());
  KVTWIN_CUDA_TRY(cudaMemcpy(arena.data(), dev.data(), n, cudaMemcpyDeviceToHost));
  if (place == ChunkPlace::kPinned) {
    // Chunk bytes come from pinned memory, everything else from the device. A byte the kernel
    // changed where it had no business (the device copy of a chunk, the pinned copy of anything
    // else) is flipped, so the comparison with the oracle reports it.
    std::vector<bool> in_chunk(n, false);
    for (int64_t c = 0; c < host_req.num_chunks(); ++c) {
      const size_t off = arena.chunk_offset(c);
      for (size_t i = 0; i < static_cast<size_t>(arena.chunk_bytes(c)); ++i)
        in_chunk[off + i] = true;
    }
    uint8_t* out = arena.data();
    for (size_t i = 0; i < n; ++i) {
      if (in_chunk[i]) {
        const bool stray = out[i] != original[i];
        out[i] = pin.host()[i];
        if (stray) out[i] ^= 0xFF;
      } else if (pin.host()[i] != original[i]) {
        out[i] = original[i] ^ 0xFF;
      }
    }
  }
  return Status();
}

}  // namespace kvtwin::cuda::testing
