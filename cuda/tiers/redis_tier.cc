#include "cuda/tiers/redis_tier.h"

#include <hiredis.h>

#include <cstring>
#include <vector>

#include "model/check.h"

namespace kvtwin::cuda::tiers {
namespace {

std::string_view as_chars(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

bool is_ok_status(const redisReply& r) {
  return r.type == REDIS_REPLY_STATUS && std::string_view(r.str, r.len) == "OK";
}

TierStatus error_reply_status(const redisReply& r) {
  return std::string_view(r.str, r.len).starts_with("OOM") ? TierStatus::kNoSpace
                                                           : TierStatus::kIoError;
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
  RedisReplyPtr reply;
  TierStatus s = c.send(ping);
  if (s == TierStatus::kOk) s = c.read_reply(&reply);
  if (s != TierStatus::kOk) {
    *error = "cannot reach Redis at " + tier->config_.client.url + " (" + c.last_error() + ")";
    return nullptr;
  }
  if (reply->type != REDIS_REPLY_STATUS) {
    *error = "Redis at " + tier->config_.client.url +
             " did not answer PING: " + std::string(reply->str ? reply->str : "", reply->len);
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
      RedisReplyPtr reply;
      fault = client_.read_reply(&reply);
      if (fault == TierStatus::kOk && !is_ok_status(*reply) && status == TierStatus::kOk)
        status =
            reply->type == REDIS_REPLY_ERROR ? error_reply_status(*reply) : TierStatus::kIoError;
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
    RedisReplyPtr meta;
    RedisReplyPtr kv;
    fault = client_.read_reply(&meta);
    if (fault == TierStatus::kOk) fault = client_.read_reply(&kv);
    if (fault != TierStatus::kOk) break;
    const RemoteGet& g = gets[done];
    TierStatus status = TierStatus::kOk;
    if (meta->type == REDIS_REPLY_NIL) {
      status = TierStatus::kMiss;
    } else if (meta->type != REDIS_REPLY_STRING || kv->type == REDIS_REPLY_ERROR) {
      status = TierStatus::kIoError;
    } else if (kv->type == REDIS_REPLY_NIL) {
      status = TierStatus::kMiss;
      stale_metadata.push_back(metadata_key(g.key));
    } else {
      auto m = decode_remote_metadata(
          {reinterpret_cast<const uint8_t*>(meta->str), static_cast<size_t>(meta->len)});
      if (!m || static_cast<uint64_t>(m->length) != g.out.size() ||
          static_cast<uint64_t>(kv->len) != g.out.size()) {
        status = TierStatus::kCorrupt;
      } else {
        std::memcpy(g.out.data(), kv->str, g.out.size());
      }
    }
    out[done++] = status;
  }
  for (size_t i = done; i < n; ++i) out[i] = fault;
  for (size_t i = 0; i < n; ++i) stats_.count_get(out[i], gets[i].out.size());
  if (!stale_metadata.empty()) delete_keys(stale_metadata);
}

void RedisTier::delete_keys(std::span<const std::string> keys) {
  size_t sent = 0;
  for (const std::string& k : keys) {
    const std::string_view del[] = {"DEL", k};
    if (client_.send(del) != TierStatus::kOk) return;
    ++sent;
  }
  for (size_t i = 0; i < sent; ++i) {
    RedisReplyPtr reply;
    if (client_.read_reply(&reply) != TierStatus::kOk) return;
  }
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
  RedisReplyPtr reply;
  if (client_.send(exists) != TierStatus::kOk) return std::nullopt;
  if (client_.read_reply(&reply) != TierStatus::kOk) return std::nullopt;
  if (reply->type != REDIS_REPLY_INTEGER) return std::nullopt;
  return reply->integer > 0;
}

}  // namespace kvtwin::cuda::tiers
