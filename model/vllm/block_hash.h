// BlockHash: the raw digest bytes vLLM uses as a block's identity in the prefix cache.
//
// vLLM keeps a block hash as Python `bytes`: 32 bytes for the sha256 family, 16 for the xxhash
// family (xxh3_128, big-endian canonical form). We store it inline (no allocation) because
// requests hold one per full block and the replay hashes millions of them. LMCache reuses the
// same type for its chunk hashes (it calls vLLM's hash function, see model/lmcache).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "model/check.h"

namespace kvtwin::model::vllm {

class BlockHash {
 public:
  static constexpr size_t kMaxSize = 32;

  BlockHash() = default;
  explicit BlockHash(std::span<const uint8_t> bytes) {
    KVTWIN_CHECK_LE(bytes.size(), kMaxSize);
    size_ = static_cast<uint8_t>(bytes.size());
    std::memcpy(data_.data(), bytes.data(), bytes.size());
  }

  // An empty hash stands for Python's `None` parent (hash_block_tokens then uses NONE_HASH).
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  const uint8_t* data() const { return data_.data(); }
  std::span<const uint8_t> bytes() const { return {data_.data(), size_}; }

  // Lowercase hex of the bytes, as the golden logs write hashes.
  std::string hex() const;
  // Parses lowercase/uppercase hex of 1..32 bytes; returns false on malformed input.
  static bool from_hex(std::string_view hex, BlockHash* out);

  // int_block_hash(bytes()): the int form of KV events with int block hashes.
  uint64_t low64() const;

  friend bool operator==(const BlockHash& a, const BlockHash& b) {
    if (a.size_ != b.size_) return false;
    if (a.size_ == kMaxSize) {  // sha256 digests: compare inline, without a memcmp call
      uint64_t x[4], y[4];
      std::memcpy(x, a.data_.data(), 32);
      std::memcpy(y, b.data_.data(), 32);
      return ((x[0] ^ y[0]) | (x[1] ^ y[1]) | (x[2] ^ y[2]) | (x[3] ^ y[3])) == 0;
    }
    return std::memcmp(a.data_.data(), b.data_.data(), a.size_) == 0;
  }

 private:
  std::array<uint8_t, kMaxSize> data_{};
  uint8_t size_ = 0;
};

// The last 8 bytes (all of them when fewer) as a big-endian integer: vLLM's
// `int.from_bytes(hash, "big") & (2**64 - 1)`, the int form of a block hash in KV events.
inline uint64_t int_block_hash(std::span<const uint8_t> bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size() > 8 ? bytes.size() - 8 : 0; i < bytes.size(); ++i)
    v = v << 8 | bytes[i];
  return v;
}

// Hex helpers shared by hashes, keys and op-log writers.
std::string to_hex(std::span<const uint8_t> bytes);
void append_hex(std::span<const uint8_t> bytes, std::string* out);

}  // namespace kvtwin::model::vllm
