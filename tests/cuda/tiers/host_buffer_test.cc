#include "cuda/tiers/host_buffer.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtwin::cuda::tiers {
namespace {

TEST(HostBuffer, StartsOnA4KiBBoundaryWithWholeBlocksOfZeroes) {
  HostBuffer b(5000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kDirectIoAlign, 0u);
  EXPECT_EQ(b.size(), 5000u);
  EXPECT_EQ(b.capacity(), 8192u);
  for (size_t i = 0; i < b.capacity(); ++i) ASSERT_EQ(b.data()[i], 0) << i;
}

TEST(HostBuffer, MovingLeavesTheSourceEmpty) {
  HostBuffer a(100);
  uint8_t* p = a.data();
  HostBuffer b = std::move(a);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
}

TEST(Content, IsAFunctionOfTheKeyAlone) {
  std::vector<uint8_t> a(1001), b(1001), c(1001);
  fill_content("model@1@0@ab@half", a);
  fill_content("model@1@0@ab@half", b);
  fill_content("model@1@0@ac@half", c);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  std::vector<uint8_t> prefix(a.begin(), a.begin() + 1000);
  std::vector<uint8_t> shorter(1000);
  fill_content("model@1@0@ab@half", shorter);
  EXPECT_EQ(prefix, shorter);  // a shorter object is a prefix of a longer one
}

TEST(Content, FirstMismatchPointsAtTheChangedByte) {
  std::vector<uint8_t> a(4099);
  fill_content("k", a);
  EXPECT_EQ(first_content_mismatch("k", a), a.size());
  a[4098] ^= 1;
  EXPECT_EQ(first_content_mismatch("k", a), 4098u);
  a[17] ^= 0x80;
  EXPECT_EQ(first_content_mismatch("k", a), 17u);
  EXPECT_EQ(first_content_mismatch("other", std::vector<uint8_t>(64)), 0u);
}

RC_GTEST_PROP(Content, AnySingleByteChangeIsFound,
              (std::string key, uint16_t size_seed, uint16_t where_seed, uint8_t flip_seed)) {
  const size_t size = 1 + size_seed % 3000;
  const size_t where = where_seed % size;
  const uint8_t flip = static_cast<uint8_t>(flip_seed | 1);
  std::vector<uint8_t> data(size);
  fill_content(key, data);
  RC_ASSERT(first_content_mismatch(key, data) == size);
  data[where] ^= flip;
  RC_ASSERT(first_content_mismatch(key, data) == where);
}

}  // namespace
}  // namespace kvtwin::cuda::tiers
