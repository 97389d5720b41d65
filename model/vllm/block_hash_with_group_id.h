// BlockHashWithGroupId: the prefix-cache key of one block of one KV cache group, and
// BlockHashListWithBlockSize: a request's block hashes seen at a coarser block size.
//
// vLLM keys its prefix cache by raw bytes: the block hash followed by the group id as 4-byte
// big-endian unsigned (make_block_hash_with_group_id). For a group whose block size is
// k x hash_block_size the "block hash" is the concatenation of k consecutive request hashes
// (BlockHashListWithBlockSize), so a key is 16k+4 or 32k+4 bytes long:
//
//   hash_block_size 16, group block size 32, group id 1:
//     request hashes   | A (0-15) | B (16-31) | C (32-47) | D (48-63) |
//     group hashes     |   A‖B (0-31)         |   C‖D (32-63)         |
//     key of block 0   A‖B‖00 00 00 01
//
// The key is stored inline up to kInlineSize bytes (one sha256 digest plus the group id), on the
// heap beyond that. An empty key stands for Python's None (a block without a hash).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/vllm/block_hash.h"

namespace kvtwin::model::vllm {

class BlockHashWithGroupId {
 public:
  static constexpr size_t kInlineSize = 36;

  BlockHashWithGroupId() = default;
  // hash_bytes ‖ group_id (4 bytes big-endian). REQUIRES: hash_bytes non-empty.
  BlockHashWithGroupId(std::span<const uint8_t> hash_bytes, uint32_t group_id);
  BlockHashWithGroupId(const BlockHashWithGroupId& other) { *this = other; }
  BlockHashWithGroupId& operator=(const BlockHashWithGroupId& other);
  BlockHashWithGroupId(BlockHashWithGroupId&&) noexcept = default;
  BlockHashWithGroupId& operator=(BlockHashWithGroupId&&) noexcept = default;

  // *this = BlockHashWithGroupId(hash_bytes, group_id), in place: a sha256 digest (the common
  // key) is written inline without constructing a temporary.
  void assign(std::span<const uint8_t> hash_bytes, uint32_t group_id) {
    if (hash_bytes.size() != 32) {
      *this = BlockHashWithGroupId(hash_bytes, group_id);
      return;
    }
    heap_.reset();
    size_ = 36;
    std::memcpy(inline_.data(), hash_bytes.data(), 32);
    const uint32_t big_endian = __builtin_bswap32(group_id);
    std::memcpy(inline_.data() + 32, &big_endian, 4);
  }

  bool empty() const { return size_ == 0; }
  void reset() { size_ = 0; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data(), size_}; }
  // vLLM's get_block_hash: the key without the group id.
  std::span<const uint8_t> block_hash() const { return {data(), size_ - 4}; }
  // vLLM's get_group_id.
  uint32_t group_id() const;
  std::string hex() const { return to_hex(bytes()); }

  // True iff this key equals hash_bytes ‖ group_id.
  bool matches(std::span<const uint8_t> hash_bytes, uint32_t group_id) const {
    if (size_ != hash_bytes.size() + 4) return false;
    const uint8_t* d = data();
    uint32_t g;
    std::memcpy(&g, d + hash_bytes.size(), 4);
    if (g != __builtin_bswap32(group_id)) return false;
    if (size_ == 36) {  // one sha256 digest: compare inline, no memcmp call
      uint64_t a[4], b[4];
      std::memcpy(a, d, 32);
      std::memcpy(b, hash_bytes.data(), 32);
      return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3])) == 0;
    }
    return std::memcmp(d, hash_bytes.data(), hash_bytes.size()) == 0;
  }

  friend bool operator==(const BlockHashWithGroupId& a, const BlockHashWithGroupId& b) {
    return a.size_ == b.size_ && std::memcmp(a.data(), b.data(), a.size_) == 0;
  }

 private:
  const uint8_t* data() const { return size_ <= kInlineSize ? inline_.data() : heap_.get(); }

  uint32_t size_ = 0;
  std::array<uint8_t, kInlineSize> inline_{};
  std::unique_ptr<uint8_t[]> heap_;  // used only when size_ > kInlineSize
};

// A 64-bit table hash of hash_bytes ‖ group_id. Digests are uniformly random, so two 8-byte
// words of the digest (its first and, for merged hashes, its last) mixed with the group id are
// enough; the full bytes are compared on every hit.
inline uint64_t prefix_key_hash64(std::span<const uint8_t> hash_bytes, uint32_t group_id) {
  uint64_t first, last;
  size_t n = hash_bytes.size();
  if (n >= 16) {  // every real digest: two fixed-size loads, no stack copy
    std::memcpy(&first, hash_bytes.data(), 8);
    std::memcpy(&last, hash_bytes.data() + n - 8, 8);
  } else {
    first = 0;
    last = 0;
    std::memcpy(&first, hash_bytes.data(), n < 8 ? n : 8);
  }
  uint64_t h = first ^ (last * 0x9E3779B97F4A7C15ULL) ^ (uint64_t{group_id} << 32 | n);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 32);
}

// A request's block hashes (computed at hash_block_size) viewed at block_size = scale x
// hash_block_size. Entry i is the concatenation of hashes [i*scale, (i+1)*scale).
// Non-owning: valid while the underlying vector is neither modified nor destroyed.
class BlockHashListWithBlockSize {
 public:
  BlockHashListWithBlockSize(std::span<const BlockHash> block_hashes, int hash_block_size,
                             int target_block_size);

  int size() const { return static_cast<int>(hashes_.size()) / scale_; }
  int scale() const { return scale_; }
  // The request's hashes themselves (with scale 1, entry i is hashes()[i]).
  std::span<const BlockHash> hashes() const { return hashes_; }
  // The bytes of entry i. With scale 1 they point into the request's hash; otherwise the
  // concatenation is written into *scratch and the returned span points there.
  std::span<const uint8_t> at(int i, std::vector<uint8_t>* scratch) const {
    if (scale_ == 1 && i >= 0 && static_cast<size_t>(i) < hashes_.size())
      return hashes_[static_cast<size_t>(i)].bytes();  // inline: the common case
    return merged_at(i, scratch);
  }

 private:
  std::span<const uint8_t> merged_at(int i, std::vector<uint8_t>* scratch) const;

  std::span<const BlockHash> hashes_;
  int scale_;
};

}  // namespace kvtwin::model::vllm
