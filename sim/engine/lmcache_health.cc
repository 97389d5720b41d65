#include "sim/engine/lmcache_health.h"

#include <utility>

namespace kvtwin::sim::engine {

LmcacheHealthMonitor::LmcacheHealthMonitor(const Config& config, Remote* remote,
                                           std::function<void(bool)> set_healthy)
    : config_(config), remote_(remote), set_healthy_(std::move(set_healthy)) {}

void LmcacheHealthMonitor::catch_up(SimTime now) {
  const SimDuration interval = config_.interval;
  while (next_check_ <= now) {
    if (!failure_time_) {
      if (remote_->failed_reads() == 0) {  // every check due passes and changes nothing
        next_check_ = first_check_after(now);
        break;
      }
    } else {
      // Inside the wait every check fails and leaves the count alone. The first past it (checks
      // fall at failure_time + k·interval) may recover.
      const SimTime attempt =
          *failure_time_ + (config_.recovery_wait + interval - 1) / interval * interval;
      if (next_check_ < attempt) {
        if (attempt > now) {
          next_check_ = first_check_after(now);
          break;
        }
        next_check_ = attempt;
      }
      if (remote_->test_gets_always_fail()) {  // each check from here fails its test get
        const SimTime after = first_check_after(now);
        remote_->add_failed_reads(static_cast<uint64_t>((after - next_check_) / interval));
        next_check_ = after;
        break;
      }
    }
    check(next_check_);
    next_check_ += interval;
  }
}

void LmcacheHealthMonitor::check(SimTime t) {
  if (failure_time_) {
    if (t - *failure_time_ < config_.recovery_wait || remote_->test_get_fails()) {
      set_health(false, t);
      return;
    }
    failure_time_.reset();
  }
  if (remote_->take_failed_reads() >= config_.threshold) {
    failure_time_ = t;
    set_health(false, t);
    return;
  }
  set_health(true, t);
}

void LmcacheHealthMonitor::set_health(bool healthy, SimTime t) {
  if (healthy == healthy_) return;
  healthy_ = healthy;
  if (!healthy) {
    ++periods_;
    unhealthy_since_ = t;
  } else {
    unhealthy_ns_ += t - unhealthy_since_;
  }
  set_healthy_(healthy);
}

}  // namespace kvtwin::sim::engine
