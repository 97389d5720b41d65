// KVTWIN_HD: marks small functions that run both on the host (CPU reference, plan checks, tests)
// and inside CUDA kernels. Headers using it stay plain C++17 when compiled without nvcc, so the
// layout math and its CPU tests build in CI where no CUDA toolkit is installed.
#pragma once

#if defined(__CUDACC__)
#define KVTWIN_HD __host__ __device__ __forceinline__
#else
#define KVTWIN_HD inline
#endif
