// The paged <-> chunk copy kernels: host entry point.
//
// launch_kv_copy() enqueues the copies of one KvCopyRequest (kv_layout.h) on a stream and returns
// at once. One launch moves up to kMaxChunksPerLaunch chunks of all their layers; the request
// as the GPU sees it:
//   layers  a device array of the paged layer bases (PagedKvCache::device_layer_table()),
//   slots   a device array of num_tokens slots,
//   chunks  a host array of device-visible chunk pointers: device memory (staging) or the device
//           alias of mapped pinned host memory (zero-copy, the kernel reads/writes over the link).
//
// Kernel design (for >= 90% of the device's own copy bandwidth): bytes only, never the dtype;
// 16-byte words when the run length and every base allow it, else 8/4/2/1 (kv_copy_plan.h);
// 256 threads x 4 independent words per thread (all loads issued before the first store); units
// numbered in chunk memory order, so a warp touches 512 consecutive chunk bytes and one or two
// contiguous paged runs; streaming cache hints (touched once); index math with FastDivmod.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/kv_layout.h"
#include "cuda/status.h"

namespace kvtwin::cuda {

inline constexpr int kKvCopyThreads = 256;
inline constexpr int kKvCopyWordsPerThread = 4;

// Enqueues `req` on `stream`. Returns an error Status (nothing enqueued) when the request is
// malformed (kv_copy_request_error) and the launch error when a launch fails. Completion is the
// stream's business: record an event or synchronise before reading the destination.
Status launch_kv_copy(const KvCopyRequest& req, cudaStream_t stream);

}  // namespace kvtwin::cuda
