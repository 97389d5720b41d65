// RedisClient: one blocking connection to a Redis server, with timeouts, pipelining and
// reconnection with exponential back-off. hiredis 0.14 (Debian bookworm) opens the connection and
// sets its timeouts; requests and replies then go straight through the socket: a request's value
// is written in place with writev, and a bulk reply can be received straight into the caller's
// buffer. (hiredis 0.14's reply reader grows its buffer 1 MiB at a time and copies each value
// twice more: about 0.3 GB/s for 32 MiB values here, against more than 1 GB/s read in place.)
//
// Failure model (the tier turns each into a counted miss, never into an exception):
//   - connect refused / connection closed by the server  -> kUnavailable
//   - no progress on the socket within command_timeout    -> kTimeout
//   - connect not established within connect_timeout      -> kTimeout
//   - anything else (protocol error, out of memory)       -> kIoError
// After any failure the connection is dropped and the next connect attempt waits for the back-off
// (backoff_initial_ms, doubling up to backoff_max_ms); requests in between fail at once with
// kUnavailable. A successful connect resets the back-off. (LMCache rate-limits reconnects to one
// per 10 s; our default max back-off is that figure.)
//
// Pipelining: send() any number of commands, then read_reply() once per command, in order.
// Replies understood: status (+), error (-), integer (:), bulk ($, including nil); an array
// reply is a protocol error (no command the tiers send returns one).
//
// SIGPIPE: writing to a socket the server closed raises SIGPIPE; creating a RedisClient sets it to
// be ignored for the process, so such a write fails with EPIPE instead of killing the process.
//
// Threading: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cuda/tiers/tier_status.h"

struct redisContext;

namespace kvtwin::cuda::tiers {

struct RedisUrl {
  std::string host;
  int port = 6379;
  int db = 0;
};
// Parses "redis://host[:port][/db]" (LMCache's remote_url form). Returns nullopt with a reason
// in *error when the URL has another scheme or a malformed port or database number.
std::optional<RedisUrl> parse_redis_url(std::string_view url, std::string* error);

struct RedisClientConfig {
  std::string url = "redis://127.0.0.1:6379";
  int connect_timeout_ms = 1000;
  int command_timeout_ms = 1000;
  int backoff_initial_ms = 100;
  int backoff_max_ms = 10000;
};

struct RespReply {
  enum class Type : uint8_t { kStatus, kError, kInteger, kBulk, kNil };
  Type type = Type::kNil;
  std::string text;       // status or error text; a bulk's bytes unless read in place
  int64_t integer = 0;    // kInteger; the byte length for kBulk
  bool in_place = false;  // kBulk: the bytes went to the caller's buffer, not to text

  bool is_ok() const { return type == Type::kStatus && text == "OK"; }
};

class RedisClient {
 public:
  // REQUIRES: a URL accepted by parse_redis_url.
  explicit RedisClient(RedisClientConfig config);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Makes sure a connection is up: kOk, or the failure status (kUnavailable while backing off).
  TierStatus connect();
  bool connected() const { return ctx_ != nullptr; }

  // Writes one command (binary-safe arguments). On failure the connection is dropped.
  TierStatus send(std::span<const std::string_view> args);
  // Reads the next reply in order into *reply. A bulk reply of exactly bulk_into.size() bytes is
  // received straight into bulk_into (reply->in_place); any other bulk goes to reply->text.
  // On a socket or protocol failure the connection is dropped.
  TierStatus read_reply(RespReply* reply, std::span<uint8_t> bulk_into = {});

  // Drops the connection after a failure seen by the caller (e.g. an error reply mid-pipeline)
  // and starts the back-off.
  void drop(TierStatus why);

  const RedisClientConfig& config() const { return config_; }
  uint64_t reconnects() const { return reconnects_; }
  std::string last_error() const { return last_error_; }

 private:
  TierStatus fail(TierStatus status, std::string what);
  TierStatus socket_failure(int err, const char* op);
  // Buffered reads of the reply stream.
  TierStatus fill();                              // at least one more byte in in_
  TierStatus read_line(std::string* line);        // up to CRLF, without it
  TierStatus read_exact(uint8_t* dst, size_t n);  // n bytes (buffered ones first)

  RedisClientConfig config_;
  RedisUrl url_;
  redisContext* ctx_ = nullptr;
  std::chrono::steady_clock::time_point next_attempt_{};
  int backoff_ms_ = 0;  // 0: no failure since the last successful connect
  bool ever_connected_ = false;
  uint64_t reconnects_ = 0;
  std::string last_error_;
  std::string in_;  // received, not yet consumed bytes: [in_pos_, in_.size())
  size_t in_pos_ = 0;
};

}  // namespace kvtwin::cuda::tiers
