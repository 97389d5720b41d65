// A one-thread kernel that keeps the GPU busy for a set time: the tests' stand-in for a layer's
// compute, and the benchmarks' way to have a transfer fully enqueued before the GPU reaches it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/status.h"

namespace kvtwin::cuda::testing {

// Enqueues a one-thread kernel that busy-waits `ns` nanoseconds of GPU time (%globaltimer).
Status launch_spin(cudaStream_t stream, uint64_t ns);

}  // namespace kvtwin::cuda::testing
