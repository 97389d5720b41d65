#include "cuda/kv_transfer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cuda/kv_copy.h"

namespace kvtwin::cuda {
namespace {

constexpr uint64_t kStagingAlign = 256;
uint64_t align_up(uint64_t n) {
  return (n + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
}

}  // namespace

std::string_view host_path_name(HostPath path) {
  return path == HostPath::kStaged ? "staged" : "zero_copy";
}

Status KvTransferEngine::create(const PagedKvCache* cache, const Options& options,
                                KvTransferEngine* out) {
  KvTransferEngine e;
  e.cache_ = cache;
  KVTWIN_RETURN_IF_ERROR(Stream::create(&e.kernel_stream_));
  KVTWIN_RETURN_IF_ERROR(Stream::create(&e.copy_stream_));
  e.half_bytes_ = options.staging_bytes / 2 / kStagingAlign * kStagingAlign;
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(2 * e.half_bytes_, &e.staging_));
  for (int h = 0; h < 2; ++h) {
    KVTWIN_RETURN_IF_ERROR(Event::create(&e.half_ready_[h]));
    KVTWIN_RETURN_IF_ERROR(Event::create(&e.half_free_[h]));
    KVTWIN_RETURN_IF_ERROR(Event::create(&e.half_loaded_[h]));
  }
  KVTWIN_RETURN_IF_ERROR(Stream::create(&e.join_stream_));
  KVTWIN_RETURN_IF_ERROR(Event::create(&e.kernel_tail_));
  KVTWIN_RETURN_IF_ERROR(Event::create(&e.copy_tail_));
  *out = std::move(e);
  return Status();
}

Status KvTransferEngine::check_batch(const HostChunkBatch& b) const {
  if (!cache_) return Status::error("KvTransferEngine not created");
  if (b.tokens_per_chunk <= 0 || b.num_tokens < 0) {
    return Status::error("bad batch: tokens_per_chunk " + std::to_string(b.tokens_per_chunk));
  }
  const int64_t chunks = (b.num_tokens + b.tokens_per_chunk - 1) / b.tokens_per_chunk;
  if (static_cast<int64_t>(b.chunks.size()) != chunks) {
    return Status::error("bad batch: " + std::to_string(b.chunks.size()) + " chunk objects for " +
                         std::to_string(chunks) + " chunks");
  }
  if (b.first_layer < 0 || b.num_layers < 1 ||
      b.first_layer + b.num_layers > cache_->num_layers()) {
    return Status::error("bad batch: layers out of range");
  }
  return Status();
}

Status KvTransferEngine::store(const HostChunkBatch& batch, HostPath path, cudaEvent_t after) {
  KVTWIN_RETURN_IF_ERROR(check_batch(batch));
  if (after) KVTWIN_CUDA_TRY(cudaStreamWaitEvent(kernel_stream(), after, 0));
  return path == HostPath::kStaged ? staged(batch, CopyDirection::kPagedToChunk)
                                   : zero_copy(batch, CopyDirection::kPagedToChunk);
}

Status KvTransferEngine::retrieve(const HostChunkBatch& batch, HostPath path, cudaEvent_t after) {
  KVTWIN_RETURN_IF_ERROR(check_batch(batch));
  if (after) KVTWIN_CUDA_TRY(cudaStreamWaitEvent(kernel_stream(), after, 0));
  return path == HostPath::kStaged ? staged(batch, CopyDirection::kChunkToPaged)
                                   : zero_copy(batch, CopyDirection::kChunkToPaged);
}

Status KvTransferEngine::zero_copy(const HostChunkBatch& b, CopyDirection direction) {
  std::vector<uint8_t*> chunks;
  for (const HostChunk& c : b.chunks) chunks.push_back(c.device);
  const KvCopyRequest req =
      cache_->request(b.format, b.first_layer, b.num_layers, b.device_slots, b.num_tokens,
                      b.tokens_per_chunk, chunks.data(), direction);
  return launch_kv_copy(req, kernel_stream());
}

// Groups of chunks that fit one staging half, alternating halves:
//   store:    kernel: wait free[h], gather -> half h, record ready[h]
//             copy:   wait ready[h], DMA each chunk to its object, record free[h]
//   retrieve: copy:   wait free[h], DMA each object into half h, record ready[h]
//             kernel: wait ready[h], scatter from half h, record free[h]
// A store with skipped slots first loads the objects into the half on the copy stream (which
// already follows the half's last DMA out) and the kernel waits for that (loaded[h]).
// Chunk i of a group sits at half + i * stride; consecutive chunks whose objects are adjacent in
// host memory, with payload == stride, move in one DMA.
Status KvTransferEngine::staged(const HostChunkBatch& b, CopyDirection direction) {
  const PagedLayout& paged = cache_->layout();
  const uint64_t stride = align_up(static_cast<uint64_t>(
      chunk_layout_for(paged, b.format, b.num_layers, b.tokens_per_chunk).total_bytes()));
  const int64_t per_half = static_cast<int64_t>(half_bytes_ / stride);
  if (per_half == 0) {
    return Status::error("staging half of " + std::to_string(half_bytes_) +
                         " bytes cannot hold one chunk of " + std::to_string(stride));
  }
  const bool store = direction == CopyDirection::kPagedToChunk;
  cudaStream_t first = store ? kernel_stream() : copy_stream();   // fills the half
  cudaStream_t second = store ? copy_stream() : kernel_stream();  // drains it
  const cudaMemcpyKind kind = store ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
  const int64_t num_chunks = static_cast<int64_t>(b.chunks.size());
  for (int64_t g = 0; g < num_chunks; g += per_half) {
    const int64_t count = std::min(per_half, num_chunks - g);
    const int h = next_half_;
    next_half_ ^= 1;
    uint8_t* base = staging_.data() + h * half_bytes_;
    std::vector<uint8_t*> slots_in_half;
    for (int64_t i = 0; i < count; ++i) slots_in_half.push_back(base + i * stride);
    const int64_t first_token = g * b.tokens_per_chunk;
    const int64_t tokens = std::min(count * b.tokens_per_chunk, b.num_tokens - first_token);
    const KvCopyRequest req =
        cache_->request(b.format, b.first_layer, b.num_layers, b.device_slots + first_token, tokens,
                        b.tokens_per_chunk, slots_in_half.data(), direction);
    // DMAs between the objects and the half in direction `k`, runs of adjacent chunks merged.
    auto dma_all = [&](cudaMemcpyKind k) -> Status {
      const bool to_host = k == cudaMemcpyDeviceToHost;
      for (int64_t i = 0; i < count;) {
        uint8_t* host = b.chunks[g + i].host;
        uint8_t* dev = slots_in_half[i];
        uint64_t bytes = 0;
        int64_t j = i;
        for (; j < count; ++j) {
          if (j > i && (b.chunks[g + j].host != host + bytes || slots_in_half[j] != dev + bytes))
            break;
          bytes += static_cast<uint64_t>(req.chunk_layout(j).total_bytes());
        }
        KVTWIN_CUDA_TRY(cudaMemcpyAsync(to_host ? static_cast<void*>(host) : dev,
                                        to_host ? static_cast<const void*>(dev) : host, bytes, k,
                                        copy_stream()));
        i = j;
      }
      return Status();
    };
    KVTWIN_RETURN_IF_ERROR(half_free_[h].wait_on(first));
    if (store && b.skipped_slots) {
      KVTWIN_RETURN_IF_ERROR(dma_all(cudaMemcpyHostToDevice));
      KVTWIN_RETURN_IF_ERROR(half_loaded_[h].record(copy_stream()));
      KVTWIN_RETURN_IF_ERROR(half_loaded_[h].wait_on(kernel_stream()));
    }
    if (store) {
      KVTWIN_RETURN_IF_ERROR(launch_kv_copy(req, kernel_stream()));
    } else {
      KVTWIN_RETURN_IF_ERROR(dma_all(kind));
    }
    KVTWIN_RETURN_IF_ERROR(half_ready_[h].record(first));
    KVTWIN_RETURN_IF_ERROR(half_ready_[h].wait_on(second));
    if (store) {
      KVTWIN_RETURN_IF_ERROR(dma_all(kind));
    } else {
      KVTWIN_RETURN_IF_ERROR(launch_kv_copy(req, kernel_stream()));
    }
    KVTWIN_RETURN_IF_ERROR(half_free_[h].record(second));
  }
  return Status();
}

Status KvTransferEngine::record_completion(cudaEvent_t event) {
  KVTWIN_RETURN_IF_ERROR(kernel_tail_.record(kernel_stream()));
  KVTWIN_RETURN_IF_ERROR(copy_tail_.record(copy_stream()));
  KVTWIN_RETURN_IF_ERROR(kernel_tail_.wait_on(join_stream_.get()));
  KVTWIN_RETURN_IF_ERROR(copy_tail_.wait_on(join_stream_.get()));
  KVTWIN_CUDA_TRY(cudaEventRecord(event, join_stream_.get()));
  return Status();
}

Status KvTransferEngine::synchronize() {
  KVTWIN_RETURN_IF_ERROR(kernel_stream_.synchronize());
  KVTWIN_RETURN_IF_ERROR(copy_stream_.synchronize());
  KVTWIN_RETURN_IF_ERROR(join_stream_.synchronize());
  return Status();
}

}  // namespace kvtwin::cuda
