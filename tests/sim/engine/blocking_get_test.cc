// When upstream's blocking remote read gives up (sim/engine/blocking_get.h), on waits worked out
// by hand: each key's wait starts when the previous key's result returned, not at the start.
#include "sim/engine/blocking_get.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvtwin::sim::engine {
namespace {

constexpr SimDuration kS = 1'000'000'000;

size_t first(std::vector<SimTime> finish, SimTime start = 0, SimDuration timeout = 10 * kS) {
  for (SimTime& f : finish) f *= kS;
  return first_blocking_get_timeout(start * kS, finish, timeout);
}

TEST(BlockingGet, EveryWaitWithinTheTimeoutFailsNothing) {
  EXPECT_EQ(first({}), 0u);
  EXPECT_EQ(first({5, 5, 5}), 3u);
  EXPECT_EQ(first({10}), 1u);  // done at the deadline: result() returns it
}

TEST(BlockingGet, TheFirstKeyWaitsFromTheStart) {
  EXPECT_EQ(first({11}), 0u);
  EXPECT_EQ(first({12, 3}), 0u);  // the later keys fail with it, finished or not
  EXPECT_EQ(first({25}, 20), 1u);
  EXPECT_EQ(first({31}, 20), 0u);
}

// 6 s, then 9 s more (15), then 1 s more (16): no wait reaches 10 s although the last key
// finishes 16 s after the start.
TEST(BlockingGet, EachLaterKeyWaitsFromThePreviousResult) {
  EXPECT_EQ(first({6, 15, 16}), 3u);
  EXPECT_EQ(first({6, 17, 3}), 1u);  // 11 s after key 0's result
}

// A key that finished before the previous result returned is returned at once and does not move
// the clock back: key 2 waits from key 0's result.
TEST(BlockingGet, KeysFinishedEarlierAreReturnedAtOnce) {
  EXPECT_EQ(first({8, 2, 17}), 3u);  // 17 - 8 = 9 s
  EXPECT_EQ(first({3, 2, 14}), 2u);  // 14 - 3 = 11 s
}

}  // namespace
}  // namespace kvtwin::sim::engine
