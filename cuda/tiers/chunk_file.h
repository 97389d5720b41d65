// ChunkFile: the on-disk format of one chunk object in the local disk tier.
//
// One file per object, named after LMCache's LocalDiskBackend (research/lmcache.md §4.3):
//   <dir>/<key string with "/" replaced by "-">.pt
// LMCache writes the raw bytes with no header; we add one 4 KiB header block so that a torn,
// truncated or corrupted file is detected and becomes a miss instead of data:
//
//   offset 0                                     4096                    4096 + round_up(n, 4096)
//   | header (48 bytes used, zero padded)         | payload, n bytes      | zero pad |
//
//   header, little-endian:
//     [0, 8)   magic "KVTWCHNK"
//     [8, 12)  format version (kChunkFileVersion)
//     [12, 16) header bytes (4096)
//     [16, 24) payload bytes n
//     [24, 32) XXH3-64 of the payload
//     [32, 40) XXH3-64 of the key string (two keys that map to one file name stay apart)
//     [40, 48) XXH3-64 of bytes [0, 40) (a torn header is not trusted for the length)
//
// The payload starts on a 4 KiB boundary and the file length is a whole number of 4 KiB blocks,
// so the whole file moves with O_DIRECT straight into and out of an aligned caller buffer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "cuda/tiers/host_buffer.h"

namespace kvtwin::cuda::tiers {

inline constexpr uint32_t kChunkFileVersion = 1;
inline constexpr size_t kChunkHeaderBytes = kDirectIoAlign;

// File name of `key` inside the tier directory (LMCache's naming), without the directory.
std::string chunk_file_name(std::string_view key);

// Total file length for a payload of n bytes.
inline constexpr uint64_t chunk_file_bytes(uint64_t payload_bytes) {
  return kChunkHeaderBytes + round_up_to_block(payload_bytes);
}

// Writes the header of (key, payload) into `block` (kChunkHeaderBytes long; zero-fills it).
// `payload_checksum` is XXH3-64 of the payload (computed by the caller, who may overlap it with
// other I/O).
void encode_chunk_header(std::string_view key, uint64_t payload_bytes, uint64_t payload_checksum,
                         std::span<uint8_t> block);

uint64_t payload_checksum(std::span<const uint8_t> payload);

enum class HeaderCheck : uint8_t {
  kOk,
  kTorn,         // bad magic, version or header checksum: the header itself is not trustworthy
  kWrongKey,     // a sound header of another key (file-name collision): a miss, not corruption
  kWrongLength,  // a sound header whose payload length differs from the expected one
};

// Checks a header block read from disk against the key and length the caller expects; on kOk
// stores the recorded payload checksum in *checksum.
HeaderCheck check_chunk_header(std::span<const uint8_t> block, std::string_view key,
                               uint64_t expected_payload_bytes, uint64_t* checksum);

}  // namespace kvtwin::cuda::tiers
