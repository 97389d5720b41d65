#include "cuda/fast_divmod.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdint>

namespace kvtwin::cuda {
namespace {

void expect_exact(uint32_t d, uint32_t n) {
  const FastDivmod f(d);
  uint32_t q = 0, r = 0;
  f.divmod(n, q, r);
  ASSERT_EQ(q, n / d) << n << " / " << d;
  ASSERT_EQ(r, n % d) << n << " % " << d;
}

TEST(FastDivmod, MatchesIntegerDivisionAtTheEdgesOfEveryDivisor) {
  const uint32_t max_n = (1u << 31) - 1;
  for (uint32_t d : {1u,
                     2u,
                     3u,
                     5u,
                     7u,
                     15u,
                     16u,
                     17u,
                     66u,
                     128u,
                     576u,
                     1000u,
                     2048u,
                     65535u,
                     65536u,
                     65537u,
                     (1u << 30) - 1,
                     1u << 30,
                     (1u << 30) + 3,
                     max_n - 1,
                     max_n}) {
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1 < max_n ? 2 * d - 1 : max_n, max_n,
                       max_n - 1, max_n / d * d, max_n / d * d - 1}) {
      expect_exact(d, n);
    }
  }
}

TEST(FastDivmod, MatchesIntegerDivisionForEverySmallPair) {
  for (uint32_t d = 1; d <= 600; ++d) {
    for (uint32_t n = 0; n <= 5000; ++n) expect_exact(d, n);
  }
}

RC_GTEST_PROP(FastDivmod, MatchesIntegerDivisionForAny31BitPair, ()) {
  const auto d = *rc::gen::inRange<uint32_t>(1, 1u << 31);
  const auto n = *rc::gen::inRange<uint32_t>(0, 1u << 31);
  const FastDivmod f(d);
  uint32_t q = 0, r = 0;
  f.divmod(n, q, r);
  RC_ASSERT(q == n / d);
  RC_ASSERT(r == n % d);
}

}  // namespace
}  // namespace kvtwin::cuda
