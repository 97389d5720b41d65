#include "cuda/tiers/chunk_file.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <vector>

namespace kvtwin::cuda::tiers {
namespace {

TEST(ChunkFile, NameFollowsLMCacheLocalDiskBackend) {
  EXPECT_EQ(chunk_file_name("meta-llama/Llama-3.1-8B@1@0@00ff@bfloat16"),
            "meta-llama-Llama-3.1-8B@1@0@00ff@bfloat16.pt");
}

TEST(ChunkFile, LengthIsAHeaderBlockPlusWholePayloadBlocks) {
  EXPECT_EQ(chunk_file_bytes(0), 4096u);
  EXPECT_EQ(chunk_file_bytes(1), 8192u);
  EXPECT_EQ(chunk_file_bytes(4096), 8192u);
  EXPECT_EQ(chunk_file_bytes(4097), 12288u);
  EXPECT_EQ(chunk_file_bytes(32u << 20), 4096u + (32u << 20));
}

TEST(ChunkFile, HeaderRoundTripsKeyLengthAndChecksum) {
  std::vector<uint8_t> payload(10000);
  fill_content("k", payload);
  const uint64_t sum = payload_checksum(payload);
  std::vector<uint8_t> block(kChunkHeaderBytes, 0xAA);
  encode_chunk_header("k", payload.size(), sum, block);
  EXPECT_EQ(std::string(block.begin(), block.begin() + 8), "KVTWCHNK");
  EXPECT_EQ(block[8], kChunkFileVersion);
  EXPECT_EQ(block[100], 0);  // zero padded
  uint64_t recorded = 0;
  EXPECT_EQ(check_chunk_header(block, "k", payload.size(), &recorded), HeaderCheck::kOk);
  EXPECT_EQ(recorded, sum);
  EXPECT_EQ(check_chunk_header(block, "k2", payload.size(), &recorded), HeaderCheck::kWrongKey);
  EXPECT_EQ(check_chunk_header(block, "k", payload.size() + 1, &recorded),
            HeaderCheck::kWrongLength);
  EXPECT_EQ(check_chunk_header({block.data(), 100}, "k", payload.size(), &recorded),
            HeaderCheck::kTorn);
}

TEST(ChunkFile, AZeroedHeaderIsTorn) {
  std::vector<uint8_t> block(kChunkHeaderBytes, 0);
  uint64_t recorded = 0;
  EXPECT_EQ(check_chunk_header(block, "k", 0, &recorded), HeaderCheck::kTorn);
}

// Every bit of the 48 header bytes is covered: flipping any one is never accepted as the same
// object (a flip inside the key hash reads as another key, which is a miss, never data).
RC_GTEST_PROP(ChunkFile, AnyFlippedHeaderBitIsRejected, (uint16_t bit_seed, uint32_t len)) {
  std::vector<uint8_t> block(kChunkHeaderBytes);
  encode_chunk_header("model@1@0@beef@half", len, 0x1234567890abcdefull, block);
  const size_t bit = bit_seed % (48 * 8);
  block[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  uint64_t recorded = 0;
  RC_ASSERT(check_chunk_header(block, "model@1@0@beef@half", len, &recorded) != HeaderCheck::kOk);
}

}  // namespace
}  // namespace kvtwin::cuda::tiers
