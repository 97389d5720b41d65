// LmcacheHealthMonitor: LMCache's HealthMonitor thread with its one check over the remote tier
// (health_monitor/base.py, checks/remote_backend_check.py, LMCache f4261ef6), in virtual time.
//
// Upstream starts the thread on every worker whose engine has a RemoteBackend. It checks at once,
// then waits ping_interval after each check (a check takes microseconds), so the checks fall at
// 0, interval, 2·interval, ... Each check:
//   1. failed since failure_time: unless recovery_wait has passed and a test put and get of one
//      chunk succeed, it fails (the failed-read count is left as it is). A test get that finds
//      nothing is itself a failed blocking read.
//   2. reads and clears the count of failed blocking reads; at the threshold it fails and sets
//      failure_time to now.
//   3. otherwise passes (Redis has no ping).
// The owner applies each change: under the default fallback, "recompute", a failed check turns
// the engine unhealthy (every lookup answers 0, every load and store is skipped), and under
// "local_cpu" it bypasses the remote tier alone (LmcacheConnector::apply_health). A passing check
// undoes it.
//
// The checks run lazily: catch_up(now) runs those due by now, in order, so a check at the time of
// an operation comes before it. The caller runs it before anything touches the engine; the event
// queue stays as it would be without a monitor. Stretches where no check can change anything (no
// failed read since the last one; inside the wait; every test get failing) are skipped in one
// step, so a long idle gap costs nothing.
//
// Upstream compares its wall clock with failure_time + recovery_wait; its checks drift later by
// their own run time, so the check due at the wait in virtual time is already past it there.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "sim/time.h"

namespace kvtwin::sim::engine {

class LmcacheHealthMonitor {
 public:
  struct Config {
    SimDuration interval = 0;  // > 0
    SimDuration recovery_wait = 0;
    uint64_t threshold = 1;  // >= 1
  };
  // What the monitor reads and does on the remote backend.
  class Remote {
   public:
    virtual ~Remote() = default;
    virtual uint64_t failed_reads() const = 0;  // since last taken
    virtual uint64_t take_failed_reads() = 0;   // and clear
    // The recovery's test put and get of one chunk: true when the get finds nothing (the remote
    // backend then counts it as a failed read). always_fails: true when every test get fails (so
    // the monitor can skip them, counting them with add_failed_reads).
    virtual bool test_get_fails() = 0;
    virtual bool test_gets_always_fail() const = 0;
    virtual void add_failed_reads(uint64_t n) = 0;
  };

  // `set_healthy(h)` is called at each change of health.
  LmcacheHealthMonitor(const Config& config, Remote* remote, std::function<void(bool)> set_healthy);

  void catch_up(SimTime now);

  bool healthy() const { return healthy_; }
  uint64_t unhealthy_periods() const { return periods_; }
  // Time spent unhealthy from 0 to `now` (now >= the last catch_up).
  SimDuration unhealthy_ns(SimTime now) const {
    return unhealthy_ns_ + (healthy_ ? 0 : now - unhealthy_since_);
  }

 private:
  void check(SimTime t);
  void set_health(bool healthy, SimTime t);
  // The first check time after `now`, counting from next_check_ (<= now).
  SimTime first_check_after(SimTime now) const {
    return next_check_ + ((now - next_check_) / config_.interval + 1) * config_.interval;
  }

  Config config_;
  Remote* remote_;
  std::function<void(bool)> set_healthy_;
  SimTime next_check_ = 0;
  std::optional<SimTime> failure_time_;  // invariant: set exactly while unhealthy
  bool healthy_ = true;
  SimTime unhealthy_since_ = 0;
  uint64_t periods_ = 0;
  SimDuration unhealthy_ns_ = 0;  // of the periods that ended
};

}  // namespace kvtwin::sim::engine
