#include "cuda/tiers/chunk_file.h"

#include <xxh_x86dispatch.h>
#include <xxhash.h>

#include <cstring>

#include "model/check.h"

namespace kvtwin::cuda::tiers {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'T', 'W', 'C', 'H', 'N', 'K'};
constexpr size_t kChecksummedBytes = 40;

template <typename T>
void store_le(uint8_t* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
template <typename T>
T load_le(const uint8_t* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::string chunk_file_name(std::string_view key) {
  std::string name(key);
  for (char& c : name)
    if (c == '/') c = '-';
  return name + ".pt";
}

uint64_t payload_checksum(std::span<const uint8_t> payload) {
  return XXH3_64bits_dispatch(payload.data(), payload.size());  // AVX2 / AVX-512 when present
}

void encode_chunk_header(std::string_view key, uint64_t payload_bytes, uint64_t checksum,
                         std::span<uint8_t> block) {
  KVTWIN_CHECK_EQ(block.size(), kChunkHeaderBytes);
  uint8_t* p = block.data();
  std::memset(p, 0, block.size());
  std::memcpy(p, kMagic, sizeof(kMagic));
  store_le<uint32_t>(p + 8, kChunkFileVersion);
  store_le<uint32_t>(p + 12, static_cast<uint32_t>(kChunkHeaderBytes));
  store_le<uint64_t>(p + 16, payload_bytes);
  store_le<uint64_t>(p + 24, checksum);
  store_le<uint64_t>(p + 32, XXH3_64bits(key.data(), key.size()));
  store_le<uint64_t>(p + 40, XXH3_64bits(p, kChecksummedBytes));
}

HeaderCheck check_chunk_header(std::span<const uint8_t> block, std::string_view key,
                               uint64_t expected_payload_bytes, uint64_t* checksum) {
  if (block.size() < kChunkHeaderBytes) return HeaderCheck::kTorn;
  const uint8_t* p = block.data();
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) return HeaderCheck::kTorn;
  if (load_le<uint64_t>(p + 40) != XXH3_64bits(p, kChecksummedBytes)) return HeaderCheck::kTorn;
  if (load_le<uint32_t>(p + 8) != kChunkFileVersion) return HeaderCheck::kTorn;
  if (load_le<uint32_t>(p + 12) != kChunkHeaderBytes) return HeaderCheck::kTorn;
  if (load_le<uint64_t>(p + 32) != XXH3_64bits(key.data(), key.size()))
    return HeaderCheck::kWrongKey;
  if (load_le<uint64_t>(p + 16) != expected_payload_bytes) return HeaderCheck::kWrongLength;
  *checksum = load_le<uint64_t>(p + 24);
  return HeaderCheck::kOk;
}

}  // namespace kvtwin::cuda::tiers
