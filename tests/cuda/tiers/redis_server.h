// RedisServer: a real redis-server child process for integration tests
// (../shared/research/toolchain.md §4): a free port on 127.0.0.1, no persistence, started with
// fork + exec and ready when it answers PING. Tests can kill it, pause it, and start it again on
// the same port to check how a tier behaves when its server goes away and comes back.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kvtwin::testing {

class RedisServer {
 public:
  // Starts redis-server; extra_args are appended (e.g. {"--maxmemory", "1mb"}).
  // Throws std::runtime_error when the server does not answer within 5 s (a test that creates
  // one then fails; benchmarks use it too, so it does not depend on gtest).
  explicit RedisServer(std::vector<std::string> extra_args = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  bool running() const { return pid_ > 0; }

  void kill();     // SIGKILL and reap: the server vanishes mid-run
  void restart();  // starts a fresh, empty server on the same port
  void pause();    // SIGSTOP: the server keeps its connections but answers nothing
  void resume();   // SIGCONT

  // A throw-away helper for tests: runs one command with redis-cli semantics through hiredis and
  // returns the reply as text ("(nil)", integers as decimal, strings raw). Empty on failure.
  std::string command(const std::vector<std::string>& args) const;

 private:
  void start();
  static int free_port();

  std::vector<std::string> extra_args_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace kvtwin::testing
