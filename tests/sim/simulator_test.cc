#include "sim/simulator.h"

#include <gtest/gtest.h>

#include "model/check.h"

namespace kvtwin::sim {
namespace {

TEST(Simulator, SameTimeEventsRunInInsertionOrder) {
  Simulator sim;
  std::vector<int> order;
  sim.schedule_at(10, [&] { order.push_back(2); });
  sim.schedule_at(5, [&] { order.push_back(1); });
  sim.schedule_at(10, [&] { order.push_back(3); });
  sim.schedule_at(10, [&] {
    order.push_back(4);
    sim.schedule_after(0, [&] { order.push_back(5); });  // same instant, scheduled later
  });
  sim.run();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(sim.now(), 10);
  EXPECT_EQ(sim.num_executed(), 5u);
  EXPECT_EQ(sim.num_pending(), 0u);
}

TEST(Simulator, CancelledEventNeverRuns) {
  Simulator sim;
  int ran = 0;
  auto id = sim.schedule_at(3, [&] { ran += 1; });
  sim.schedule_at(4, [&] { ran += 10; });
  EXPECT_EQ(sim.num_pending(), 2u);
  sim.cancel(id);
  EXPECT_EQ(sim.num_pending(), 1u);
  EXPECT_THROW(sim.cancel(id), model::CheckFailedError);  // cancelled twice
  sim.run();
  EXPECT_EQ(ran, 10);
}

TEST(Simulator, SchedulingInThePastIsABug) {
  Simulator sim;
  sim.schedule_at(100, [] {});
  sim.run();
  EXPECT_THROW(sim.schedule_at(99, [] {}), model::CheckFailedError);
}

TEST(Simulator, RunUntilStopsAtTheLimitAndAdvancesTime) {
  Simulator sim;
  int ran = 0;
  sim.schedule_at(5, [&] { ++ran; });
  sim.schedule_at(20, [&] { ++ran; });
  sim.run_until(10);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(sim.now(), 10);
  EXPECT_EQ(sim.num_pending(), 1u);
  sim.run();
  EXPECT_EQ(ran, 2);
}

TEST(SimTime, FromSecondsRoundsToNearestNanosecond) {
  EXPECT_EQ(from_seconds(1.0), 1'000'000'000);
  EXPECT_EQ(from_seconds(1.5e-9), 2);
  EXPECT_EQ(from_seconds(0.1), 100'000'000);
  EXPECT_DOUBLE_EQ(to_seconds(2'500'000'000), 2.5);
}

}  // namespace
}  // namespace kvtwin::sim
