// U64Set against std::unordered_set on random insert / erase / contains / clear sequences,
// with keys drawn from a small range (collisions, long probe chains, the reserved key ~0).
#include "sim/u64_set.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <unordered_set>

namespace kvtwin::sim::engine {
namespace {

TEST(U64Set, HoldsTheReservedKeyLikeAnyOther) {
  U64Set s;
  EXPECT_FALSE(s.contains(~uint64_t{0}));
  EXPECT_TRUE(s.insert(~uint64_t{0}));
  EXPECT_FALSE(s.insert(~uint64_t{0}));
  EXPECT_TRUE(s.contains(~uint64_t{0}));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_TRUE(s.erase(~uint64_t{0}));
  EXPECT_FALSE(s.erase(~uint64_t{0}));
  EXPECT_EQ(s.size(), 0u);
}

RC_GTEST_PROP(U64Set, BehavesLikeAnUnorderedSet, ()) {
  const uint64_t range = *rc::gen::element<uint64_t>(8u, 300u, 5000u);
  // Keys that share their low bits too, so home slots collide.
  const uint64_t stride = *rc::gen::element<uint64_t>(1u, 1024u, uint64_t{1} << 40);
  const int ops = *rc::gen::inRange(1, 3000);
  U64Set s;
  std::unordered_set<uint64_t> ref;
  for (int i = 0; i < ops; ++i) {
    const int op = *rc::gen::inRange(0, 100);
    const uint64_t raw = *rc::gen::inRange<uint64_t>(0, range + 1);
    const uint64_t key = raw == range ? ~uint64_t{0} : raw * stride;
    if (op < 50) {
      RC_ASSERT(s.insert(key) == ref.insert(key).second);
    } else if (op < 90) {
      RC_ASSERT(s.erase(key) == (ref.erase(key) != 0));
    } else if (op < 99) {
      RC_ASSERT(s.contains(key) == ref.contains(key));
    } else {
      s.clear();
      ref.clear();
    }
    RC_ASSERT(s.size() == ref.size());
  }
  for (uint64_t raw = 0; raw <= range; ++raw) {
    const uint64_t key = raw == range ? ~uint64_t{0} : raw * stride;
    RC_ASSERT(s.contains(key) == ref.contains(key));
  }
}

}  // namespace
}  // namespace kvtwin::sim::engine
