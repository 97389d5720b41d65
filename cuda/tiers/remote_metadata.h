// RemoteMetadata: LMCache's per-chunk metadata record in a remote store (lmcache/v1/protocol.py,
// research/lmcache.md §4.4, golden/lmcache/README.md §5.3).
//
// For one memory-object group it is 28 bytes, seven little-endian int32:
//   [0] payload byte length   [1] MemoryFormat   [2] dtype code   [3..6] shape, 4 dims
// Stored under "<key string>metadata" beside the raw bytes under "<key string>kv_bytes".
// The length is an int32 in LMCache too: an object of 2 GiB or more cannot be described.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "model/lmcache/memory_format.h"

namespace kvtwin::cuda::tiers {

// LMCache's MemoryFormat values (memory_management.py), as model/lmcache defines them.
using MemoryFormat = model::lmcache::MemoryFormat;

// LMCache's DTYPE_TO_INT codes (protocol.py).
enum class DtypeCode : int32_t {
  kNone = 0,
  kHalf = 1,
  kFloat16 = 2,
  kBfloat16 = 3,
  kFloat32 = 4,
  kFloat64 = 5,
  kUint8 = 6,
  kFloat8E4m3fn = 7,
  kFloat8E5m2 = 8,
};

struct RemoteMetadata {
  int32_t length = 0;
  MemoryFormat fmt = MemoryFormat::kKv2LTD;
  DtypeCode dtype = DtypeCode::kUint8;
  std::array<int32_t, 4> shape{};

  friend bool operator==(const RemoteMetadata&, const RemoteMetadata&) = default;
};

inline constexpr size_t kRemoteMetadataBytes = 28;

// Metadata for an object of `bytes` raw bytes whose geometry the caller does not know: KV_2LTD,
// uint8, shape [1, 1, 1, bytes]. REQUIRES: bytes < 2^31.
RemoteMetadata opaque_metadata(uint64_t bytes);

std::array<uint8_t, kRemoteMetadataBytes> encode_remote_metadata(const RemoteMetadata& m);
// Returns nullopt unless `bytes` is exactly 28 bytes with a non-negative length.
std::optional<RemoteMetadata> decode_remote_metadata(std::span<const uint8_t> bytes);

}  // namespace kvtwin::cuda::tiers
