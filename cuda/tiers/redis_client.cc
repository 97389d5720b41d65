#include "cuda/tiers/redis_client.h"

#include <hiredis.h>
#include <sys/socket.h>
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
  in_.clear();
  in_pos_ = 0;
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
    RespReply reply;
    if (TierStatus s = send(args); s != TierStatus::kOk) return s;
    if (TierStatus s = read_reply(&reply); s != TierStatus::kOk) return s;
    if (!reply.is_ok()) return fail(TierStatus::kIoError, "SELECT " + db + ": " + reply.text);
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
      if (errno == EINTR) continue;
      return socket_failure(errno, "write");
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

TierStatus RedisClient::socket_failure(int err, const char* op) {
  const TierStatus status = is_timeout_errno(err) ? TierStatus::kTimeout
                            : (err == EPIPE || err == ECONNRESET || err == 0)
                                ? TierStatus::kUnavailable
                                : TierStatus::kIoError;
  return fail(status, std::string(op) + ": " +
                          (err == 0 ? "server closed the connection" : std::strerror(err)));
}

TierStatus RedisClient::fill() {
  constexpr size_t kChunk = 64 * 1024;
  if (in_pos_ == in_.size()) {
    in_.clear();
    in_pos_ = 0;
  }
  const size_t old = in_.size();
  in_.resize(old + kChunk);
  while (true) {
    const ssize_t n = ::recv(ctx_->fd, in_.data() + old, kChunk, 0);
    if (n > 0) {
      in_.resize(old + static_cast<size_t>(n));
      return TierStatus::kOk;
    }
    if (n < 0 && errno == EINTR) continue;
    in_.resize(old);
    return socket_failure(n == 0 ? 0 : errno, "read");
  }
}

TierStatus RedisClient::read_line(std::string* line) {
  while (true) {
    const size_t crlf = in_.find("\r\n", in_pos_);
    if (crlf != std::string::npos) {
      line->assign(in_, in_pos_, crlf - in_pos_);
      in_pos_ = crlf + 2;
      return TierStatus::kOk;
    }
    if (in_.size() - in_pos_ > 64 * 1024) return fail(TierStatus::kIoError, "reply line too long");
    if (TierStatus s = fill(); s != TierStatus::kOk) return s;
  }
}

TierStatus RedisClient::read_exact(uint8_t* dst, size_t n) {
  const size_t buffered = std::min(n, in_.size() - in_pos_);
  std::memcpy(dst, in_.data() + in_pos_, buffered);
  in_pos_ += buffered;
  size_t got = buffered;
  while (got < n) {  // the rest straight from the socket into dst
    const ssize_t r = ::recv(ctx_->fd, dst + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    return socket_failure(r == 0 ? 0 : errno, "read");
  }
  return TierStatus::kOk;
}

TierStatus RedisClient::read_reply(RespReply* reply, std::span<uint8_t> bulk_into) {
  if (ctx_ == nullptr) return TierStatus::kUnavailable;
  *reply = RespReply{};
  std::string line;
  if (TierStatus s = read_line(&line); s != TierStatus::kOk) return s;
  if (line.empty()) return fail(TierStatus::kIoError, "empty reply line");
  const char tag = line[0];
  const std::string_view body = std::string_view(line).substr(1);
  switch (tag) {
    case '+':
    case '-':
      reply->type = tag == '+' ? RespReply::Type::kStatus : RespReply::Type::kError;
      reply->text = std::string(body);
      return TierStatus::kOk;
    case ':':
    case '$': {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
      if (ec != std::errc() || end != body.data() + body.size())
        return fail(TierStatus::kIoError, "bad reply header " + line);
      if (tag == ':') {
        reply->type = RespReply::Type::kInteger;
        reply->integer = v;
        return TierStatus::kOk;
      }
      if (v < 0) {
        reply->type = RespReply::Type::kNil;
        return TierStatus::kOk;
      }
      reply->type = RespReply::Type::kBulk;
      reply->integer = v;
      const auto n = static_cast<size_t>(v);
      uint8_t* dst;
      if (n == bulk_into.size() && n > 0) {
        reply->in_place = true;
        dst = bulk_into.data();
      } else {
        reply->text.resize(n);
        dst = reinterpret_cast<uint8_t*>(reply->text.data());
      }
      if (TierStatus s = read_exact(dst, n); s != TierStatus::kOk) return s;
      uint8_t crlf[2];
      if (TierStatus s = read_exact(crlf, 2); s != TierStatus::kOk) return s;
      if (crlf[0] != '\r' || crlf[1] != '\n')
        return fail(TierStatus::kIoError, "bulk not ended by CRLF");
      return TierStatus::kOk;
    }
    default:
      return fail(TierStatus::kIoError, "unexpected reply type " + line.substr(0, 16));
  }
}

}  // namespace kvtwin::cuda::tiers
