// Support for tests that need a CUDA device: the skip rule, status assertions, a spin kernel that
// stands in for a layer's compute, and device mirrors of the host test arena.
//
// Without a usable device (no driver: cudaGetDeviceCount fails with error 35 on the CI machine;
// or zero devices) GPU tests skip. With KVTWIN_REQUIRE_GPU=1 in the environment (set by
// cuda/gpu/check.sh on the GPU machine) a missing device fails them instead, so a broken driver
// there cannot pass as a clean skip.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/status.h"
#include "tests/cuda/gpu_spin.h"
#include "tests/cuda/kv_test_support.h"

namespace kvtwin::cuda::testing {

// Empty when a device is usable; otherwise why not.
std::string missing_device_reason();
bool gpu_required();

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = missing_device_reason();
    if (why.empty()) return;
    if (gpu_required()) FAIL() << "KVTWIN_REQUIRE_GPU=1 but no device: " << why;
    GTEST_SKIP() << "no CUDA device: " << why;
  }
};

template <typename Param>
class GpuParamTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const std::string why = missing_device_reason();
    if (why.empty()) return;
    if (gpu_required()) FAIL() << "KVTWIN_REQUIRE_GPU=1 but no device: " << why;
    GTEST_SKIP() << "no CUDA device: " << why;
  }
};

// Where the chunk objects of a device run of a HostKvArena live.
enum class ChunkPlace { kDevice, kPinned };

// Runs `arena.request()` with the copy kernels: layers in device memory, chunks in device memory
// or in mapped pinned memory (zero-copy), then brings every byte back into the arena. A byte that
// the kernel wrote outside the layers and chunks is flipped in the arena, so the poison
// comparison reports it.
Status run_on_device(HostKvArena& arena, ChunkPlace place);

}  // namespace kvtwin::cuda::testing

#define KVTWIN_ASSERT_OK(expr)                             \
  do {                                                     \
    const ::kvtwin::cuda::Status s_ = (expr);              \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_.message(); \
  } while (0)
