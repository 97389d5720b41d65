#include "cuda/tiers/remote_metadata.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace kvtwin::cuda::tiers {
namespace {

std::string to_hex(std::span<const uint8_t> bytes) {
  std::string out;
  char buf[3];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    out += buf;
  }
  return out;
}

// The metadata upstream LMCache wrote to Redis for a float16 chunk of the toy model (2 layers,
// 16 tokens, 2 KV heads x 64): golden/lmcache/public/e_lru_cpu_remote.jsonl, remote snapshot.
TEST(RemoteMetadata, EncodesExactlyWhatLMCacheWrote) {
  RemoteMetadata m;
  m.length = 16384;
  m.fmt = MemoryFormat::kKv2LTD;
  m.dtype = DtypeCode::kFloat16;
  m.shape = {2, 2, 16, 128};
  const auto bytes = encode_remote_metadata(m);
  EXPECT_EQ(to_hex(bytes), "00400000010000000200000002000000020000001000000080000000");
  EXPECT_EQ(decode_remote_metadata(bytes), m);
}

TEST(RemoteMetadata, RejectsWrongSizesAndNegativeLengths) {
  const auto bytes = encode_remote_metadata(opaque_metadata(100));
  EXPECT_FALSE(decode_remote_metadata({bytes.data(), 27}).has_value());
  auto negative = bytes;
  negative[3] = 0x80;
  EXPECT_FALSE(decode_remote_metadata(negative).has_value());
}

TEST(RemoteMetadata, OpaqueObjectsAreUint8RowsOfTheirLength) {
  const RemoteMetadata m = opaque_metadata(1 << 20);
  EXPECT_EQ(m.length, 1 << 20);
  EXPECT_EQ(m.dtype, DtypeCode::kUint8);
  EXPECT_EQ(m.shape, (std::array<int32_t, 4>{1, 1, 1, 1 << 20}));
}

}  // namespace
}  // namespace kvtwin::cuda::tiers
