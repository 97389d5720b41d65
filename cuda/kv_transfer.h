// KvTransferEngine: moves batches of chunk objects between a PagedKvCache and pinned host memory,
// by one of two paths chosen per call:
//
//   kStaged    gather into a device staging buffer, then one DMA per chunk to its pinned object
//              (store); DMA into staging, then scatter (retrieve). Uses the copy engines; what
//              LMCache's V2 connector does for full chunks on store. Chunks whose objects sit
//              back to back in host memory (and so in staging) move in one DMA.
//   kZeroCopy  the kernel reads / writes the pinned objects directly through their device aliases
//              over PCIe / C2C; what LMCache does for every retrieve and for partial chunks.
//
// The staging buffer is split in two halves used alternately, so the gather of one group of
// chunks overlaps the DMA of the previous group (and the DMA of the next group overlaps the
// scatter of this one):
//
//   kernel stream:  [gather g0 -> half 0][gather g1 -> half 1][wait half 0 free][gather g2] ...
//   copy stream:              [DMA g0 from half 0            ][DMA g1 from half 1]...
//
// Ownership: the engine owns its streams, events and staging buffer; the cache and the host
// objects belong to the caller and must outlive the enqueued work.
// Threading: one host thread at a time. Calls return once the work is enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/kv_layout.h"
#include "cuda/paged_kv_cache.h"
#include "cuda/status.h"

namespace kvtwin::cuda {

enum class HostPath : uint8_t { kStaged, kZeroCopy };
std::string_view host_path_name(HostPath path);

// One chunk object in pinned host memory: host address (for DMA) and device alias (zero-copy).
struct HostChunk {
  uint8_t* host = nullptr;
  uint8_t* device = nullptr;
};

// Consecutive chunk objects of one request; chunk c holds tokens [c*T, min((c+1)*T, n)) and is
// laid out with its own token count (kv_layout.h).
struct HostChunkBatch {
  ChunkFormat format = ChunkFormat::kKV_2LTD;
  int32_t first_layer = 0;  // paged layers [first_layer, first_layer + num_layers)
  int32_t num_layers = 1;
  const int64_t* device_slots = nullptr;  // [num_tokens] in device memory
  int64_t num_tokens = 0;
  int64_t tokens_per_chunk = 0;
  std::vector<HostChunk> chunks;  // [ceil(num_tokens / tokens_per_chunk)]
  // Some slot is < 0. A store leaves the rows of skipped tokens untouched in the objects on both
  // paths; the staged path can only do so by first loading the objects into staging (one more
  // DMA per chunk), so it does that only when this is set. Left false with a skipped slot, a
  // staged store writes whatever staging held into those rows (as LMCache's GPU-buffer copy
  // does: its kernel skips the token, the copy to the object moves the whole buffer).
  bool skipped_slots = false;
};

class KvTransferEngine {
 public:
  struct Options {
    // Both halves together; each half must hold at least one full chunk object.
    uint64_t staging_bytes = uint64_t{128} << 20;
  };

  KvTransferEngine() = default;
  static Status create(const PagedKvCache* cache, const Options& options, KvTransferEngine* out);

  // Enqueues paged -> host objects (LMCache's store / from_gpu). When `after` is given, the copy
  // starts only once `after` has completed (e.g. the layer's compute).
  Status store(const HostChunkBatch& batch, HostPath path, cudaEvent_t after = nullptr);
  // Enqueues host objects -> paged (retrieve / to_gpu).
  Status retrieve(const HostChunkBatch& batch, HostPath path, cudaEvent_t after = nullptr);

  // Records `event` so that it completes once all work enqueued so far has completed. Work
  // enqueued later does not wait for it (the join happens on a third stream).
  Status record_completion(cudaEvent_t event);
  Status synchronize();

  cudaStream_t kernel_stream() const { return kernel_stream_.get(); }
  cudaStream_t copy_stream() const { return copy_stream_.get(); }

 private:
  Status check_batch(const HostChunkBatch& batch) const;
  Status staged(const HostChunkBatch& batch, CopyDirection direction);
  Status zero_copy(const HostChunkBatch& batch, CopyDirection direction);

  const PagedKvCache* cache_ = nullptr;
  Stream kernel_stream_;
  Stream copy_stream_;
  DeviceBuffer staging_;
  uint64_t half_bytes_ = 0;
  Event half_ready_[2];   // the half's data is staged (gathered, or DMA'd in)
  Event half_loaded_[2];  // a store with skipped slots: the objects' bytes are in the half
  Event half_free_[2];    // the half's data has been consumed
  Stream join_stream_;    // waits for both streams' tails; never blocks them
  Event kernel_tail_;
  Event copy_tail_;
  int next_half_ = 0;
};

}  // namespace kvtwin::cuda
