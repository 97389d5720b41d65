// PinnedPool on a device: one pinned, mapped buffer; placement by the allocator; blocks whose
// device alias a kernel can write and the host can read.
#include "cuda/pinned_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "cuda/lmcache_host_allocator.h"
#include "model/check.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvtwin::cuda {
namespace {

class PinnedPoolGpu : public testing::GpuTest {};

TEST_F(PinnedPoolGpu, PlacesBlocksWhereItsAllocatorSaysAndRefusesWhenFull) {
  PinnedPool pool;
  KVTWIN_ASSERT_OK(
      PinnedPool::create(4 * 4096, std::make_unique<LmcacheHostAllocator>(4 * 4096), &pool));
  const auto a = pool.allocate(100);
  const auto b = pool.allocate(3 * 4096);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->host, pool.buffer().host());
  EXPECT_EQ(b->host, pool.buffer().host() + 4096);
  EXPECT_EQ(b->device, pool.buffer().device() + 4096);
  EXPECT_FALSE(pool.allocate(1));
  pool.free(*a);
  EXPECT_EQ(pool.free_bytes(), 4096u);
  EXPECT_EQ(pool.view(4096, 3 * 4096).host, b->host);
  EXPECT_THROW(pool.view(4096, 4 * 4096), model::CheckFailedError);
}

TEST_F(PinnedPoolGpu, DeviceWritesThroughTheAliasLandInHostMemory) {
  PinnedPool pool;
  KVTWIN_ASSERT_OK(PinnedPool::create(8192, std::make_unique<FirstFitAllocator>(8192), &pool));
  const auto blk = pool.allocate(4096);
  ASSERT_TRUE(blk);
  std::memset(blk->host, 0, 4096);
  ASSERT_EQ(cudaMemset(blk->device, 0x6B, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(blk->host[i], 0x6B) << i;
}

}  // namespace
}  // namespace kvtwin::cuda
