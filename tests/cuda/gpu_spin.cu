// A stand-in for one layer's compute in the pipeline tests: one thread spinning on the GPU's
// nanosecond timer.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tests/cuda/gpu_spin.h"

namespace kvtwin::cuda::testing {
namespace {

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t ns) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < ns) {
  }
}

}  // namespace

Status launch_spin(cudaStream_t stream, uint64_t ns) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  KVTWIN_CUDA_TRY_LAUNCH();
  return Status();
}

}  // namespace kvtwin::cuda::testing
