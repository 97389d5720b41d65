// RedisTier: the real remote tier on a Redis server, with LMCache's key scheme
// (research/lmcache.md §4.4):
//   "<key string>kv_bytes"  the raw object bytes
//   "<key string>metadata"  RemoteMetadata, 28 bytes (remote_metadata.h)
// A put writes kv_bytes first, then metadata (so a reader that finds the metadata finds the
// bytes, unless Redis evicted them since). A get reads both; metadata without kv_bytes is a miss
// and the stale metadata is deleted, as LMCache's RedisConnector does. No TTL and no eviction on
// our side: Redis's own maxmemory policy evicts (an OOM error reply to a put is kNoSpace).
//
// Batches are pipelined: up to pipeline_depth objects (2 commands each) are in flight on the one
// connection. Faults (server gone, hung, refused) are statuses, counted in stats(); after a
// connection fault every object of the batch not yet answered gets that status, and the tier
// reconnects with back-off on a later call (redis_client.h).
//
// Integrity: a get returns kOk only when the metadata decodes, its length is the length the
// caller expects, and kv_bytes has exactly that length; anything else is kCorrupt.
//
// Threading: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cuda/tiers/redis_client.h"
#include "cuda/tiers/remote_metadata.h"
#include "cuda/tiers/tier_status.h"

namespace kvtwin::cuda::tiers {

struct RedisTierConfig {
  RedisClientConfig client;
  int pipeline_depth = 8;  // objects in flight per batch
};

struct RemotePut {
  std::string_view key;
  std::span<const uint8_t> payload;
  RemoteMetadata metadata;  // metadata.length must equal payload.size()
};
struct RemoteGet {
  std::string_view key;
  std::span<uint8_t> out;  // receives exactly out.size() bytes on kOk
};

class RedisTier {
 public:
  // Connects and checks the server answers PING. Returns nullptr with a one-line reason in
  // *error for a malformed URL, a refused or timed-out connection, or a server that does not
  // answer.
  static std::unique_ptr<RedisTier> open(RedisTierConfig config, std::string* error);

  // out[i]: kOk, kNoSpace (Redis OOM), kTimeout, kUnavailable or kIoError.
  void batched_put(std::span<const RemotePut> puts, std::span<TierStatus> out);
  // out[i]: kOk, kMiss, kCorrupt, kTimeout, kUnavailable or kIoError.
  void batched_get(std::span<const RemoteGet> gets, std::span<TierStatus> out);
  TierStatus put(std::string_view key, std::span<const uint8_t> payload);
  TierStatus get(std::string_view key, std::span<uint8_t> out);
  // EXISTS "<key>metadata"; nullopt when the server cannot be asked.
  std::optional<bool> contains(std::string_view key);
  // DEL of both keys of every object (pipelined); false when the server could not be asked.
  // (LMCache's RedisConnector has no remove; the calibration uses it to clean up after itself.)
  bool remove(std::span<const std::string> keys);

  static std::string kv_bytes_key(std::string_view key) { return std::string(key) + "kv_bytes"; }
  static std::string metadata_key(std::string_view key) { return std::string(key) + "metadata"; }

  const RedisTierConfig& config() const { return config_; }
  TierStats stats() const;
  RedisClient& client() { return client_; }

 private:
  explicit RedisTier(RedisTierConfig config);
  bool delete_keys(std::span<const std::string> redis_keys);

  RedisTierConfig config_;
  RedisClient client_;
  TierStats stats_;
};

}  // namespace kvtwin::cuda::tiers
