#include "cuda/tiers/redis_client.h"

#include <hiredis.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <vector>

#include "model/check.h"

namespace kvtwin::cuda::tiers {
namespace {

timeval to_timeval(int ms) {
  return timeval{ms / 1000, static_cast<suseconds_t>((ms % 1000) * 1000)};
}

bool parse_int(std::string_view s, int* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool is_timeout_errno(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT;
}

}  // namespace

std::optional<RedisUrl> parse_redis_url(std::string_view url, std::string* error) {
  constexpr std::string_view kScheme = "redis://";
  if (!url.starts_with(kScheme)) {
    *error = "remote URL " + std::string(url) + " is not redis://host:port";
    return std::nullopt;
  }
  std::string_view rest = url.substr(kScheme.size());
  RedisUrl out;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!parse_int(db, &out.db) || out.db < 0)) {
      *error = "remote URL " + std::string(url) + " has a bad database number";
      return std::nullopt;
    }
    rest = rest.substr(0, slash);
  }
  if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    if (!parse_int(rest.substr(colon + 1), &out.port) || out.port <= 0 || out.port > 65535) {
      *error = "remote URL " + std::string(url) + " has a bad port";
      return std::nullopt;
    }
    rest = rest.substr(0, colon);
  }
  if (rest.empty()) {
    *error = "remote URL " + std::string(url) + " has no host";
    return std::nullopt;
  }
  out.host = std::string(rest);
  return out;
}

void ReplyDeleter::operator()(redisReply* r) const {
  freeReplyObject(r);
}

RedisClient::RedisClient(RedisClientConfig config) : config_(std::move(config)) {
  std::string error;
  auto url = parse_redis_url(config_.url, &error);
  KVTWIN_CHECK(url.has_value()) << error;
  url_ = *url;
  std::signal(SIGPIPE, SIG_IGN);
}

RedisClient::~RedisClient() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

TierStatus RedisClient::fail(TierStatus status, std::string what) {
  last_error_ = std::move(what);
  drop(status);
  return status;
}

void RedisClient::drop(TierStatus) {
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
  backoff_ms_ = backoff_ms_ == 0 ? config_.backoff_initial_ms
                                 : std::min(2 * backoff_ms_, config_.backoff_max_ms);
  next_attempt_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms_);
}

TierStatus RedisClient::connect() {
  if (ctx_ != nullptr) return TierStatus::kOk;
  if (backoff_ms_ > 0 && std::chrono::steady_clock::now() < next_attempt_)
    return TierStatus::kUnavailable;
  redisContext* c =
      redisConnectWithTimeout(url_.host.c_str(), url_.port, to_timeval(config_.connect_timeout_ms));
  const int err = errno;
  if (c == nullptr || c->err != 0) {
    std::string what = c ? c->errstr : "cannot allocate a redis context";
    const bool timed_out =
        c && (is_timeout_errno(err) || what.find("timed out") != std::string::npos);
    if (c) redisFree(c);
    return fail(timed_out ? TierStatus::kTimeout : TierStatus::kUnavailable,
                "connect to " + config_.url + ": " + what);
  }
  redisSetTimeout(c, to_timeval(config_.command_timeout_ms));
  ctx_ = c;
  if (url_.db != 0) {
    const std::string db = std::to_string(url_.db);
    const std::string_view args[] = {"SELECT", db};
    RedisReplyPtr reply;
    if (TierStatus s = send(args); s != TierStatus::kOk) return s;
    if (TierStatus s = read_reply(&reply); s != TierStatus::kOk) return s;
    if (reply->type == REDIS_REPLY_ERROR)
      return fail(TierStatus::kIoError,
                  "SELECT " + db + ": " + std::string(reply->str, reply->len));
  }
  if (ever_connected_ && backoff_ms_ > 0) ++reconnects_;
  ever_connected_ = true;
  backoff_ms_ = 0;
  return TierStatus::kOk;
}

TierStatus RedisClient::send(std::span<const std::string_view> args) {
  if (TierStatus s = connect(); s != TierStatus::kOk) return s;
  // RESP: *<n>\r\n then $<len>\r\n<bytes>\r\n per argument. Lengths go in one header string per
  // argument; the argument bytes are written in place.
  std::vector<std::string> heads;
  heads.reserve(args.size() + 1);
  heads.push_back("*" + std::to_string(args.size()) + "\r\n");
  std::vector<iovec> iov;
  iov.reserve(3 * args.size() + 1);
  for (size_t i = 0; i < args.size(); ++i)
    heads.push_back((i == 0 ? "" : "\r\n") + std::string("$") + std::to_string(args[i].size()) +
                    "\r\n");
  iov.push_back({heads[0].data(), heads[0].size()});
  for (size_t i = 0; i < args.size(); ++i) {
    iov.push_back({heads[i + 1].data(), heads[i + 1].size()});
    iov.push_back({const_cast<char*>(args[i].data()), args[i].size()});
  }
  static const char kCrlf[] = "\r\n";
  iov.push_back({const_cast<char*>(kCrlf), 2});
  // Write everything, carrying partial writes on.
  size_t first = 0;
  while (first < iov.size()) {
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = ::writev(ctx_->fd, iov.data() + first, count);
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      return fail(is_timeout_errno(err)                 ? TierStatus::kTimeout
                  : (err == EPIPE || err == ECONNRESET) ? TierStatus::kUnavailable
                                                        : TierStatus::kIoError,
                  std::string("write: ") + std::strerror(err));
    }
    size_t left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return TierStatus::kOk;
}

TierStatus RedisClient::read_reply(RedisReplyPtr* reply) {
  if (ctx_ == nullptr) return TierStatus::kUnavailable;
  void* raw = nullptr;
  errno = 0;
  const int rc = redisGetReply(ctx_, &raw);
  const int err = errno;
  if (rc != REDIS_OK || raw == nullptr) {
    const std::string what = std::string("read: ") + ctx_->errstr;
    if (ctx_->err == REDIS_ERR_IO && is_timeout_errno(err)) return fail(TierStatus::kTimeout, what);
    if (ctx_->err == REDIS_ERR_EOF || (ctx_->err == REDIS_ERR_IO && err == ECONNRESET))
      return fail(TierStatus::kUnavailable, what);
    return fail(TierStatus::kIoError, what);
  }
  reply->reset(static_cast<redisReply*>(raw));
  return TierStatus::kOk;
}

}  // namespace kvtwin::cuda::tiers
