// floor_div and cdiv (Python's // and vLLM's cdiv) against a reference written from their
// definitions with __int128 arithmetic, for any signs and for power-of-two divisors (the
// shift fast path) as well as others. RC_PARAMS=max_success=1000 in CI.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>

#include "model/vllm/math_utils.h"

namespace kvtwin::model::vllm {
namespace {

// Python's a // b: the largest q with q * b <= a (b > 0) or q * b >= a (b < 0).
int64_t reference_floor_div(int64_t a, int64_t b) {
  __int128 q = static_cast<__int128>(a) / b;
  if (static_cast<__int128>(q) * b != a && ((a < 0) != (b < 0))) --q;
  return static_cast<int64_t>(q);
}

int64_t reference_cdiv(int64_t a, int64_t b) {
  return static_cast<int64_t>(-static_cast<__int128>(reference_floor_div(a, -b)));
}

rc::Gen<int64_t> gen_divisor() {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::inRange(0, 40), [](int k) { return int64_t{1} << k; }),
      rc::gen::map(rc::gen::inRange(0, 40), [](int k) { return -(int64_t{1} << k); }),
      rc::gen::suchThat(rc::gen::inRange<int64_t>(-100000, 100000),
                        [](int64_t b) { return b != 0; }));
}

RC_GTEST_PROP(MathUtilsProperty, FloorDivAndCdivFollowPythonForAnySignAndDivisor, ()) {
  const int64_t a =
      *rc::gen::oneOf(rc::gen::inRange<int64_t>(-5000, 5000),
                      rc::gen::inRange<int64_t>(-(int64_t{1} << 60), int64_t{1} << 60));
  const int64_t b = *gen_divisor();
  RC_ASSERT(floor_div(a, b) == reference_floor_div(a, b));
  RC_ASSERT(cdiv(a, b) == reference_cdiv(a, b));
}

TEST(MathUtils, PowerOfTwoDivisorsRoundNegativeCountsDownAndUp) {
  EXPECT_EQ(floor_div(-1, 16), -1);
  EXPECT_EQ(cdiv(-1, 16), 0);
  EXPECT_EQ(floor_div(-17, 16), -2);
  EXPECT_EQ(cdiv(-17, 16), -1);
  EXPECT_EQ(floor_div(32, 16), 2);
  EXPECT_EQ(cdiv(33, 16), 3);
  EXPECT_EQ(cdiv(0, 1), 0);
}

}  // namespace
}  // namespace kvtwin::model::vllm
