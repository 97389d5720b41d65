// Paged <-> chunk copy kernels. The index math lives in KvCopyPlan (kv_copy_plan.h), shared with
// the host executor that the CPU tests run; this file adds only the thread -> unit mapping:
//
//   grid (ceil(units of a full chunk / 1024), chunks), block 256 threads
//   thread x of block (bx, c) handles units  bx*1024 + x + k*256,  k = 0..3,  of chunk c
//
// so a warp's 32 lanes take 32 consecutive units (512 bytes with 16-byte words) and each thread
// has four independent loads in flight before it stores.
#include <cstdint>
#include <string>

#include "cuda/kv_copy.h"
#include "cuda/kv_copy_plan.h"

namespace kvtwin::cuda {
namespace {

constexpr uint32_t kUnitsPerBlock = kKvCopyThreads * kKvCopyWordsPerThread;

template <int kBytes>
struct WordOf;
template <>
struct WordOf<16> {
  using type = uint4;
};
template <>
struct WordOf<8> {
  using type = uint2;
};
template <>
struct WordOf<4> {
  using type = unsigned int;
};
template <>
struct WordOf<2> {
  using type = unsigned short;
};
template <>
struct WordOf<1> {
  using type = unsigned char;
};

template <int kBytes, bool kGather>
__global__ void __launch_bounds__(kKvCopyThreads)
    kv_copy_kernel(const __grid_constant__ KvCopyPlan plan) {
  using Word = typename WordOf<kBytes>::type;
  const uint32_t c = blockIdx.y;
  const uint32_t units = plan.chunk_units(c);
  const uint32_t block_first = blockIdx.x * kUnitsPerBlock;
  if (block_first >= units) return;  // the last chunk may be shorter than the grid
  const Word* src[kKvCopyWordsPerThread];
  Word* dst[kKvCopyWordsPerThread];
#pragma unroll
  for (int k = 0; k < kKvCopyWordsPerThread; ++k) {
    const uint32_t u = block_first + threadIdx.x + k * kKvCopyThreads;
    src[k] = nullptr;
    dst[k] = nullptr;
    UnitAddress a;
    if (u < units && plan.locate(c, u, a)) {
      uint8_t* paged = plan.layers[a.layer] + a.paged_offset;
      uint8_t* chunk = plan.chunks[c] + a.chunk_offset;
      src[k] = reinterpret_cast<const Word*>(kGather ? paged : chunk);
      dst[k] = reinterpret_cast<Word*>(kGather ? chunk : paged);
    }
  }
  Word w[kKvCopyWordsPerThread];
#pragma unroll
  for (int k = 0; k < kKvCopyWordsPerThread; ++k) {
    if (src[k]) w[k] = __ldcs(src[k]);
  }
#pragma unroll
  for (int k = 0; k < kKvCopyWordsPerThread; ++k) {
    if (src[k]) __stcs(dst[k], w[k]);
  }
}

template <int kBytes>
void launch_width(const KvCopyPlan& plan, bool gather, dim3 grid, cudaStream_t stream) {
  if (gather) {
    kv_copy_kernel<kBytes, true><<<grid, kKvCopyThreads, 0, stream>>>(plan);
  } else {
    kv_copy_kernel<kBytes, false><<<grid, kKvCopyThreads, 0, stream>>>(plan);
  }
}

Status launch_plan(const KvCopyPlan& plan, CopyDirection direction, cudaStream_t stream) {
  const dim3 grid((plan.units_full + kUnitsPerBlock - 1) / kUnitsPerBlock, plan.num_chunks);
  const bool gather = direction == CopyDirection::kPagedToChunk;
  switch (plan.vec_bytes) {
    case 16:
      launch_width<16>(plan, gather, grid, stream);
      break;
    case 8:
      launch_width<8>(plan, gather, grid, stream);
      break;
    case 4:
      launch_width<4>(plan, gather, grid, stream);
      break;
    case 2:
      launch_width<2>(plan, gather, grid, stream);
      break;
    case 1:
      launch_width<1>(plan, gather, grid, stream);
      break;
    default:
      return Status::error("launch_kv_copy: unit width " + std::to_string(plan.vec_bytes) +
                           " is not 16, 8, 4, 2 or 1");
  }
  KVTWIN_CUDA_TRY_LAUNCH();
  return Status();
}

}  // namespace

Status launch_kv_copy(const KvCopyRequest& req, cudaStream_t stream) {
  const std::string error = kv_copy_request_error(req);
  if (!error.empty()) return Status::error("launch_kv_copy: " + error);
  for (const KvCopyPlan& plan : make_kv_copy_plans(req)) {
    KVTWIN_RETURN_IF_ERROR(launch_plan(plan, req.direction, stream));
  }
  return Status();
}

}  // namespace kvtwin::cuda
