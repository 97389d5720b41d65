#include "tests/cuda/tiers/redis_server.h"

#include <hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace kvtwin::testing {

int RedisServer::free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

RedisServer::RedisServer(std::vector<std::string> extra_args) : extra_args_(std::move(extra_args)) {
  port_ = free_port();
  start();
}

RedisServer::~RedisServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
}

void RedisServer::start() {
  std::vector<std::string> args = {KVTWIN_REDIS_SERVER,
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--dir",
                                   "/tmp",
                                   "--loglevel",
                                   "warning",
                                   "--logfile",
                                   "/dev/null"};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (command({"PING"}) == "PONG") return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("redis-server on port " + std::to_string(port_) +
                           " did not answer PING");
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::restart() {
  kill();
  start();
}

void RedisServer::pause() {
  ::kill(pid_, SIGSTOP);
}
void RedisServer::resume() {
  ::kill(pid_, SIGCONT);
}

std::string RedisServer::command(const std::vector<std::string>& args) const {
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, timeval{0, 200000});
  if (c == nullptr || c->err) {
    if (c) redisFree(c);
    return "";
  }
  redisSetTimeout(c, timeval{1, 0});
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
  std::string out;
  if (r != nullptr) {
    if (r->type == REDIS_REPLY_NIL)
      out = "(nil)";
    else if (r->type == REDIS_REPLY_INTEGER)
      out = std::to_string(r->integer);
    else if (r->str != nullptr)
      out.assign(r->str, r->len);
    freeReplyObject(r);
  }
  redisFree(c);
  return out;
}

}  // namespace kvtwin::testing
