#include "sim/fiber.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/check.h"
#include "sim/simulator.h"

namespace kvtwin::sim {
namespace {

// The body runs on start() until it suspends; each resume() runs it to its next suspend; its
// locals live across the switches.
TEST(Fiber, RunsTheBodyInTurnsWithItsCaller) {
  Fiber f;
  std::vector<std::string> log;
  f.start([&] {
    std::string local = "a";
    log.push_back("body " + local);
    f.suspend();
    local += "b";
    log.push_back("body " + local);
    f.suspend();
    log.push_back("body end");
  });
  log.push_back("caller 1");
  EXPECT_TRUE(f.suspended());
  EXPECT_FALSE(f.inside());
  f.resume();
  log.push_back("caller 2");
  f.resume();
  EXPECT_FALSE(f.busy());
  EXPECT_EQ(log,
            (std::vector<std::string>{"body a", "caller 1", "body ab", "caller 2", "body end"}));
}

// The use it is made for: a body that waits in simulated time, resumed by an event, while the
// event loop runs other events; a finished fiber can start another body.
TEST(Fiber, ABodyWaitsInSimulatedTimeWhileOtherEventsRun) {
  Simulator sim;
  Fiber f;
  std::vector<std::pair<SimTime, std::string>> log;
  auto wait = [&](SimDuration d) {
    sim.schedule_after(d, [&] { f.resume(); });
    f.suspend();
  };
  sim.schedule_at(10, [&] {
    f.start([&] {
      log.emplace_back(sim.now(), "start");
      wait(100);
      log.emplace_back(sim.now(), "after 100");
      wait(50);
      log.emplace_back(sim.now(), "after 150");
    });
  });
  sim.schedule_at(60, [&] { log.emplace_back(sim.now(), "other event"); });
  sim.schedule_at(500, [&] {
    EXPECT_FALSE(f.busy());
    f.start([&] { log.emplace_back(sim.now(), "second body"); });
  });
  sim.run();
  EXPECT_EQ(log, (std::vector<std::pair<SimTime, std::string>>{{10, "start"},
                                                               {60, "other event"},
                                                               {110, "after 100"},
                                                               {160, "after 150"},
                                                               {500, "second body"}}));
}

// An exception that leaves the body comes out of the start() or resume() that ran it, and
// leaves the fiber idle (ready for another body).
TEST(Fiber, ExceptionsLeaveThroughStartOrResume) {
  Fiber f;
  EXPECT_THROW(f.start([] { throw std::runtime_error("at once"); }), std::runtime_error);
  EXPECT_FALSE(f.busy());
  f.start([&] {
    f.suspend();
    throw std::invalid_argument("after a resume");
  });
  EXPECT_TRUE(f.suspended());
  EXPECT_THROW(f.resume(), std::invalid_argument);
  EXPECT_FALSE(f.busy());
  int ran = 0;
  f.start([&] { ++ran; });
  EXPECT_EQ(ran, 1);
}

// Destroying a suspended fiber unwinds its body: its locals' destructors run, a catch (...)
// that rethrows sees the unwinding, and code after the suspend() does not run.
TEST(Fiber, DestroyingASuspendedFiberUnwindsItsBody) {
  auto alive = std::make_shared<int>(7);
  std::weak_ptr<int> watch = alive;
  bool rethrown = false, after = false;
  {
    Fiber f;
    f.start([&f, &rethrown, &after, held = std::move(alive)] {
      std::shared_ptr<int> local = held;
      try {
        f.suspend();
        after = true;
      } catch (...) {
        rethrown = true;
        throw;
      }
    });
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired());  // the body's local and its captures are gone
  EXPECT_TRUE(rethrown);
  EXPECT_FALSE(after);
}

// A body deep in calls (a frame of 64 KiB, eight deep) fits the fiber's stack.
int deep(int depth) {
  volatile char frame[64 * 1024];
  frame[0] = static_cast<char>(depth);
  frame[sizeof frame - 1] = 1;
  return depth == 0 ? frame[0] + frame[sizeof frame - 1] : deep(depth - 1) + frame[0];
}

TEST(Fiber, HoldsADeepBody) {
  Fiber f;
  int got = 0;
  f.start([&] { got = deep(8); });
  EXPECT_EQ(got, 1 + (8 + 7 + 6 + 5 + 4 + 3 + 2 + 1));
}

TEST(Fiber, MisuseFailsAKvtwinCheck) {
  Fiber f;
  EXPECT_THROW(f.resume(), model::CheckFailedError);   // nothing to resume
  EXPECT_THROW(f.suspend(), model::CheckFailedError);  // not inside
  f.start([&] { f.suspend(); });
  EXPECT_THROW(f.start([] {}), model::CheckFailedError);  // busy
}

}  // namespace
}  // namespace kvtwin::sim
