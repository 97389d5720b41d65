#include "cuda/tiers/redis_tier.h"

#include <cstring>
#include <vector>

#include "model/check.h"

namespace kvtwin::cuda::tiers {
namespace {

std::string_view as_chars(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

using Type = RespReply::Type;

TierStatus error_reply_status(const RespReply& r) {
  return r.text.starts_with("OOM") ? TierStatus::kNoSpace : TierStatus::kIoError;
}

}  // namespace

RedisTier::RedisTier(RedisTierConfig config) : config_(config), client_(std::move(config.client)) {}

std::unique_ptr<RedisTier> RedisTier::open(RedisTierConfig config, std::string* error) {
  if (!parse_redis_url(config.client.url, error)) return nullptr;
  if (config.pipeline_depth < 1) {
    *error = "remote pipeline depth must be at least 1";
    return nullptr;
  }
  std::unique_ptr<RedisTier> tier(new RedisTier(std::move(config)));
  RedisClient& c = tier->client_;
  const std::string_view ping[] = {"PING"};
  RespReply reply;
  TierStatus s = c.send(ping);
  if (s == TierStatus::kOk) s = c.read_reply(&reply);
  if (s != TierStatus::kOk) {
    *error = "cannot reach Redis at " + tier->config_.client.url + " (" + c.last_error() + ")";
    return nullptr;
  }
  if (reply.type != Type::kStatus) {
    *error = "Redis at " + tier->config_.client.url + " did not answer PING: " + reply.text;
    return nullptr;
  }
  return tier;
}

TierStats RedisTier::stats() const {
  TierStats s = stats_;
  s.reconnects = client_.reconnects();
  return s;
}

void RedisTier::batched_put(std::span<const RemotePut> puts, std::span<TierStatus> out) {
  KVTWIN_CHECK_EQ(out.size(), puts.size());
  const size_t n = puts.size();
  const size_t depth = static_cast<size_t>(config_.pipeline_depth);
  size_t sent = 0;  // objects whose two SETs were written
  size_t done = 0;  // objects whose two replies were read
  TierStatus fault = TierStatus::kOk;
  while (done < n && fault == TierStatus::kOk) {
    // Stage 1: keep up to `depth` objects in flight (kv_bytes first, then metadata).
    while (sent < n && sent - done < depth && fault == TierStatus::kOk) {
      const RemotePut& p = puts[sent];
      KVTWIN_CHECK_EQ(static_cast<uint64_t>(p.metadata.length), p.payload.size());
      const std::string kv_key = kv_bytes_key(p.key);
      const std::string meta_key = metadata_key(p.key);
      const auto meta = encode_remote_metadata(p.metadata);
      const std::string_view set_kv[] = {"SET", kv_key, as_chars(p.payload)};
      const std::string_view set_meta[] = {"SET", meta_key, as_chars(meta)};
      fault = client_.send(set_kv);
      if (fault == TierStatus::kOk) fault = client_.send(set_meta);
      if (fault == TierStatus::kOk) ++sent;
    }
    if (fault != TierStatus::kOk) break;
    // Stage 2: the two replies of the oldest object in flight.
    TierStatus status = TierStatus::kOk;
    for (int part = 0; part < 2 && fault == TierStatus::kOk; ++part) {
      RespReply reply;
      fault = client_.read_reply(&reply);
      if (fault == TierStatus::kOk && !reply.is_ok() && status == TierStatus::kOk)
        status = reply.type == Type::kError ? error_reply_status(reply) : TierStatus::kIoError;
    }
    if (fault != TierStatus::kOk) break;
    out[done++] = status;
  }
  for (size_t i = done; i < n; ++i) out[i] = fault;  // unanswered or never sent
  for (size_t i = 0; i < n; ++i) stats_.count_put(out[i], puts[i].payload.size());
}

void RedisTier::batched_get(std::span<const RemoteGet> gets, std::span<TierStatus> out) {
  KVTWIN_CHECK_EQ(out.size(), gets.size());
  const size_t n = gets.size();
  const size_t depth = static_cast<size_t>(config_.pipeline_depth);
  std::vector<std::string> stale_metadata;  // metadata whose kv_bytes Redis no longer has
  size_t sent = 0;
  size_t done = 0;
  TierStatus fault = TierStatus::kOk;
  while (done < n && fault == TierStatus::kOk) {
    while (sent < n && sent - done < depth && fault == TierStatus::kOk) {
      const std::string meta_key = metadata_key(gets[sent].key);
      const std::string kv_key = kv_bytes_key(gets[sent].key);
      const std::string_view get_meta[] = {"GET", meta_key};
      const std::string_view get_kv[] = {"GET", kv_key};
      fault = client_.send(get_meta);
      if (fault == TierStatus::kOk) fault = client_.send(get_kv);
      if (fault == TierStatus::kOk) ++sent;
    }
    if (fault != TierStatus::kOk) break;
    // kv_bytes of the expected length land straight in the caller's buffer; they count only
    // if the metadata agrees.
    const RemoteGet& g = gets[done];
    RespReply meta;
    RespReply kv;
    fault = client_.read_reply(&meta);
    if (fault == TierStatus::kOk) fault = client_.read_reply(&kv, g.out);
    if (fault != TierStatus::kOk) break;
    TierStatus status = TierStatus::kOk;
    if (meta.type == Type::kNil) {
      status = TierStatus::kMiss;
    } else if (meta.type != Type::kBulk || kv.type == Type::kError) {
      status = TierStatus::kIoError;
    } else if (kv.type == Type::kNil) {
      status = TierStatus::kMiss;
      stale_metadata.push_back(metadata_key(g.key));
    } else {
      auto m = decode_remote_metadata(
          {reinterpret_cast<const uint8_t*>(meta.text.data()), meta.text.size()});
      const bool sized =
          kv.type == Type::kBulk && static_cast<uint64_t>(kv.integer) == g.out.size();
      if (!m || static_cast<uint64_t>(m->length) != g.out.size() || !sized) {
        status = TierStatus::kCorrupt;
      } else if (!kv.in_place) {
        std::memcpy(g.out.data(), kv.text.data(), g.out.size());  // only for an empty object
      }
    }
    out[done++] = status;
  }
  for (size_t i = done; i < n; ++i) out[i] = fault;
  for (size_t i = 0; i < n; ++i) stats_.count_get(out[i], gets[i].out.size());
  if (!stale_metadata.empty()) delete_keys(stale_metadata);
}

bool RedisTier::delete_keys(std::span<const std::string> redis_keys) {
  size_t sent = 0;
  bool ok = true;
  for (const std::string& k : redis_keys) {
    const std::string_view del[] = {"DEL", k};
    if (client_.send(del) != TierStatus::kOk) {
      ok = false;
      break;
    }
    ++sent;
  }
  for (size_t i = 0; i < sent; ++i) {
    RespReply reply;
    if (client_.read_reply(&reply) != TierStatus::kOk) return false;
  }
  return ok;
}

bool RedisTier::remove(std::span<const std::string> keys) {
  std::vector<std::string> redis_keys;
  for (const std::string& k : keys) {
    redis_keys.push_back(kv_bytes_key(k));
    redis_keys.push_back(metadata_key(k));
  }
  return delete_keys(redis_keys);
}

TierStatus RedisTier::put(std::string_view key, std::span<const uint8_t> payload) {
  const RemotePut one{key, payload, opaque_metadata(payload.size())};
  TierStatus status;
  batched_put({&one, 1}, {&status, 1});
  return status;
}

TierStatus RedisTier::get(std::string_view key, std::span<uint8_t> out) {
  const RemoteGet one{key, out};
  TierStatus status;
  batched_get({&one, 1}, {&status, 1});
  return status;
}

std::optional<bool> RedisTier::contains(std::string_view key) {
  const std::string meta_key = metadata_key(key);
  const std::string_view exists[] = {"EXISTS", meta_key};
  RespReply reply;
  if (client_.send(exists) != TierStatus::kOk) return std::nullopt;
  if (client_.read_reply(&reply) != TierStatus::kOk) return std::nullopt;
  if (reply.type != Type::kInteger) return std::nullopt;
  return reply.integer > 0;
}

}  // namespace kvtwin::cuda::tiers
