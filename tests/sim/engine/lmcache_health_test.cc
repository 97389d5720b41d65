// LmcacheHealthMonitor: LMCache's health checks over the remote tier, by hand and against a
// check-by-check reference.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <deque>
#include <vector>

#include "sim/engine/lmcache_health.h"

namespace kvtwin::sim::engine {
namespace {

constexpr SimDuration kS = 1'000'000'000;

// A remote backend whose failed reads the test adds, and whose test gets fail as scripted (then
// failing with `rest`; all of them with `always`), counting themselves as failed reads.
struct FakeRemote final : LmcacheHealthMonitor::Remote {
  uint64_t count = 0, total = 0;
  std::deque<bool> script;  // test get outcomes: true = fails
  bool rest = false;
  bool always = false;
  int test_gets = 0;
  void fail_reads(uint64_t n) {
    count += n;
    total += n;
  }
  uint64_t failed_reads() const override { return count; }
  uint64_t take_failed_reads() override { return std::exchange(count, 0); }
  bool test_get_fails() override {
    ++test_gets;
    bool f = always || rest;
    if (!always && !script.empty()) {
      f = script.front();
      script.pop_front();
    }
    if (f) fail_reads(1);
    return f;
  }
  bool test_gets_always_fail() const override { return always; }
  void add_failed_reads(uint64_t n) override { fail_reads(n); }
};

struct Changes {
  std::vector<bool> seen;
  std::function<void(bool)> fn() {
    return [this](bool h) { seen.push_back(h); };
  }
};

LmcacheHealthMonitor::Config config(SimDuration interval, SimDuration wait, uint64_t threshold) {
  LmcacheHealthMonitor::Config c;
  c.interval = interval;
  c.recovery_wait = wait;
  c.threshold = threshold;
  return c;
}

// Checks at 0, 30, 60, ... s; threshold 3, wait 100 s.
//   9 failed reads before the check at 30 s: unhealthy from 30 s (failure_time 30).
//   2 more at 40 s: inside the wait (checks at 60, 90, 120 s) they are left uncounted.
//   The check at 150 s is the first at least 100 s after 30: its test get fails (a failed read,
//   3 in all now); the one at 180 s passes its test and reads the 3: unhealthy again from 180 s.
//   Its wait ends at the check at 300 s, which recovers and reads 0: healthy from 300 s.
TEST(LmcacheHealth, ThresholdWaitTestGetAndTheCountLeftDuringTheWait) {
  FakeRemote r;
  r.script = {true, false, false};
  Changes ch;
  LmcacheHealthMonitor m(config(30 * kS, 100 * kS, 3), &r, ch.fn());
  m.catch_up(0);
  EXPECT_TRUE(m.healthy());
  r.fail_reads(2);
  m.catch_up(29 * kS);
  EXPECT_TRUE(m.healthy());
  r.fail_reads(7);
  m.catch_up(30 * kS);
  EXPECT_FALSE(m.healthy());
  EXPECT_EQ(r.count, 0u);
  r.fail_reads(2);
  m.catch_up(149 * kS);
  EXPECT_FALSE(m.healthy());
  EXPECT_EQ(r.count, 2u);
  EXPECT_EQ(r.test_gets, 0);
  m.catch_up(150 * kS);
  EXPECT_EQ(r.test_gets, 1);
  EXPECT_EQ(r.count, 3u);
  m.catch_up(180 * kS);
  EXPECT_EQ(r.test_gets, 2);
  EXPECT_FALSE(m.healthy());
  EXPECT_EQ(r.count, 0u);
  EXPECT_EQ(m.unhealthy_periods(), 1u);  // still the first period: no healthy check between
  m.catch_up(299 * kS);
  EXPECT_FALSE(m.healthy());
  m.catch_up(1000 * kS);
  EXPECT_TRUE(m.healthy());
  EXPECT_EQ(r.test_gets, 3);
  EXPECT_EQ(ch.seen, (std::vector<bool>{false, true}));
  EXPECT_EQ(m.unhealthy_ns(1000 * kS), 270 * kS);  // 30 .. 300 s
}

// Every test get failing (failure rate 1): the checks from the first attempt on each add one
// failed read and keep LMCache off; they are counted without being run one by one.
TEST(LmcacheHealth, TestGetsThatAlwaysFailAreCountedPerCheck) {
  FakeRemote r;
  r.always = true;
  Changes ch;
  LmcacheHealthMonitor m(config(30 * kS, 300 * kS, 10), &r, ch.fn());
  r.fail_reads(10);
  m.catch_up(10 * kS);  // the check at 0 s reads the 10
  EXPECT_FALSE(m.healthy());
  m.catch_up(3600 * kS);
  // Attempts at 300, 330, ..., 3600 s: 111 checks.
  EXPECT_EQ(r.count, 111u);
  EXPECT_EQ(r.test_gets, 0);
  EXPECT_EQ(m.unhealthy_ns(3600 * kS), 3600 * kS);
  EXPECT_EQ(ch.seen, (std::vector<bool>{false}));
}

// The reference: every check from 0 to the end, one by one, by the rules in the header.
struct Reference {
  SimDuration interval, wait;
  uint64_t threshold;
  bool healthy = true;
  std::optional<SimTime> failure_time;
  uint64_t periods = 0;
  SimDuration unhealthy = 0;
  SimTime since = 0;
  void set(bool h, SimTime t) {
    if (h == healthy) return;
    healthy = h;
    if (!h) {
      ++periods;
      since = t;
    } else {
      unhealthy += t - since;
    }
  }
  void check(SimTime t, FakeRemote* r) {
    if (failure_time) {
      if (t - *failure_time < wait || r->test_get_fails()) return set(false, t);
      failure_time.reset();
    }
    if (r->take_failed_reads() >= threshold) {
      failure_time = t;
      return set(false, t);
    }
    set(true, t);
  }
};

// Random failed reads at random times, random test outcomes, random catch-up points: the monitor
// agrees with the reference at every catch-up (health, periods, time off, the count and the
// number of test gets), including skipped stretches.
RC_GTEST_PROP(LmcacheHealth, LazyCatchUpAgreesWithCheckingEveryInterval, ()) {
  const SimDuration interval = *rc::gen::inRange<SimDuration>(1, 50) * kS;
  const SimDuration wait = *rc::gen::inRange<SimDuration>(0, 400) * kS;
  const uint64_t threshold = *rc::gen::inRange<uint64_t>(1, 6);
  const bool always = *rc::gen::weightedElement<bool>({{1, true}, {4, false}});
  const std::vector<bool> outcomes =
      *rc::gen::container<std::vector<bool>>(rc::gen::arbitrary<bool>());
  FakeRemote a, b;
  a.always = b.always = always;
  a.script = b.script = std::deque<bool>(outcomes.begin(), outcomes.end());
  a.rest = b.rest = *rc::gen::arbitrary<bool>();
  Changes ch;
  LmcacheHealthMonitor m(config(interval, wait, threshold), &a, ch.fn());
  Reference ref{interval, wait, threshold, true, std::nullopt};
  SimTime next = 0, now = 0;
  const int events = *rc::gen::inRange(1, 40);
  for (int e = 0; e < events; ++e) {
    now += *rc::gen::inRange<SimDuration>(0, 2000) * kS / 10;
    for (; next <= now; next += interval) ref.check(next, &b);
    m.catch_up(now);
    RC_ASSERT(m.healthy() == ref.healthy);
    RC_ASSERT(m.unhealthy_periods() == ref.periods);
    RC_ASSERT(m.unhealthy_ns(now) == ref.unhealthy + (ref.healthy ? 0 : now - ref.since));
    RC_ASSERT(a.count == b.count);
    RC_ASSERT(a.total == b.total);
    if (!always) RC_ASSERT(a.test_gets == b.test_gets);
    const uint64_t failed = *rc::gen::inRange<uint64_t>(0, 2 * threshold + 1);
    a.fail_reads(failed);
    b.fail_reads(failed);
  }
}

}  // namespace
}  // namespace kvtwin::sim::engine
