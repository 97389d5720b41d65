// Cache policies: LMCache's candidate orders (tests/v1/test_cache_policy.py restated), LFU's stale
// bucket entries with and without the quirk, and the S3-FIFO extension.
#include "model/lmcache/cache_policy.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "model/lmcache/s3fifo_policy.h"
#include "model/lmcache/upstream_error.h"
#include "tests/model/lmcache/lmcache_test_util.h"

namespace kvtwin::model::lmcache {
namespace {

using testing::kids;

// A tier stand-in: dict key -> slot, slot -> evictable; it reports its inserts and removals to
// the policy as the real tiers do.
struct Tier {
  KeyScopeRegistry registry;
  const KeyScope* scope = registry.intern("m", 1, 0, KvDtype::kHalf, {});
  KeyOrderedDict dict;
  std::vector<bool> evictable;
  std::unique_ptr<CachePolicy> policy;

  explicit Tier(CachePolicyKind kind, Quirks q = Quirks::upstream())
      : policy(make_cache_policy(kind, q)) {}
  CacheEngineKey key(int i) { return {scope, ChunkHash::from_int(i), -1}; }
  void put(int i) {
    hold(i);
    policy->update_on_put(key(i));
  }
  // The tier holds key i (from now on), without a put to the policy.
  void hold(int i) {
    dict.set(key(i), static_cast<uint32_t>(evictable.size()));
    evictable.push_back(true);
    policy->on_tier_insert(key(i));
  }
  void drop(const CacheEngineKey& k) {
    dict.pop(k);
    policy->on_tier_erase(k);
  }
  void hit(int i) { policy->update_on_hit(key(i), dict); }
  void pin(int i) { evictable[*dict.find(key(i))] = false; }
  std::vector<std::string> candidates(int n) {
    return kids(policy->get_evict_candidates(dict, n, [&](uint32_t v) { return evictable[v]; }));
  }
  std::string k(int i) { return key(i).kid(); }
};

// Two tiers given the same operations, for the properties that compare a resumed walk (on a) with
// a plain one (on b); `token` changes whenever an entry may have started to pass.
struct TwinTiers {
  Tier a, b;
  uint64_t token = 1;
  explicit TwinTiers(CachePolicyKind kind, Quirks q = Quirks::upstream())
      : a(kind, q), b(kind, q) {}
  template <typename F>
  void both(F f) {
    f(a);
    f(b);
  }
  bool held(int i) { return a.dict.contains(a.key(i)); }
  // A put, evictable or held (a pending write).
  void put(int i, bool pinned) {
    both([&](Tier& t) {
      t.put(i);
      if (pinned) t.pin(i);
    });
  }
  // Unpinned: it may pass now.
  void unpin(int i) {
    both([&](Tier& t) { t.evictable[*t.dict.find(t.key(i))] = true; });
    ++token;
  }
};

TEST(CachePolicy, LruEvictsOldestAfterAHitMovedTheKeyToTheEnd) {
  Tier t(CachePolicyKind::kLru);
  for (int i = 1; i <= 3; ++i) t.put(i);
  t.hit(1);
  EXPECT_EQ(t.candidates(2), (std::vector<std::string>{t.k(2), t.k(3)}));
  t.pin(2);
  EXPECT_EQ(t.candidates(2), (std::vector<std::string>{t.k(3), t.k(1)}));
}

TEST(CachePolicy, LruHitOnAMissingKeyRaisesKeyError) {
  Tier t(CachePolicyKind::kLru);
  t.put(1);
  EXPECT_THROW(t.hit(9), UpstreamError);
}

TEST(CachePolicy, FifoIgnoresHits) {
  Tier t(CachePolicyKind::kFifo);
  for (int i = 1; i <= 3; ++i) t.put(i);
  t.hit(1);
  EXPECT_EQ(t.candidates(3), (std::vector<std::string>{t.k(1), t.k(2), t.k(3)}));
  t.pin(1);
  EXPECT_EQ(t.candidates(1), (std::vector<std::string>{t.k(2)}));
}

TEST(CachePolicy, MruEvictsTheMostRecentFirst) {
  Tier t(CachePolicyKind::kMru);
  for (int i = 1; i <= 3; ++i) t.put(i);
  t.hit(1);
  EXPECT_EQ(t.candidates(2), (std::vector<std::string>{t.k(1), t.k(3)}));
  t.pin(1);
  EXPECT_EQ(t.candidates(2), (std::vector<std::string>{t.k(3), t.k(2)}));
}

TEST(CachePolicy, LfuEvictsLowestFrequencyFifoWithinAFrequency) {
  Tier t(CachePolicyKind::kLfu);
  for (int i = 1; i <= 4; ++i) t.put(i);
  t.hit(1);
  t.hit(1);
  t.hit(3);
  auto buckets = t.policy->frequency_buckets();
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].first, 1);
  EXPECT_EQ(kids(buckets[0].second), (std::vector<std::string>{t.k(2), t.k(4)}));
  t.pin(2);
  EXPECT_EQ(t.candidates(2), (std::vector<std::string>{t.k(4), t.k(3)}));
  // The chosen keys left the policy's tables at once.
  EXPECT_EQ(t.policy->frequency_buckets().size(), 2u);
}

TEST(CachePolicy, LfuRePutLeavesAStaleBucketEntryThatLaterRaises) {
  Tier t(CachePolicyKind::kLfu);
  t.put(1);
  t.hit(1);                           // freq 2
  t.policy->update_on_put(t.key(1));  // re-put: freq 1, the bucket-2 entry stays
  auto buckets = t.policy->frequency_buckets();
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(t.candidates(1), (std::vector<std::string>{t.k(1)}));
  t.drop(t.key(1));  // the tier drops the victim (remove with force=false)
  t.put(2);
  t.pin(2);
  // The scan meets the stale entry of key 1 in bucket 2: KeyError, as upstream.
  EXPECT_THROW(t.candidates(1), UpstreamError);
}

TEST(CachePolicy, LfuFixMovesRePutKeysAndSkipsKeysTheTierDoesNotHold) {
  Tier t(CachePolicyKind::kLfu, Quirks::all_fixed());
  t.put(1);
  t.hit(1);
  t.policy->update_on_put(t.key(1));
  EXPECT_EQ(t.policy->frequency_buckets().size(), 1u);
  t.policy->update_on_put(t.key(7));  // registered before the tier holds it (disk in flight)
  t.put(2);
  EXPECT_EQ(t.candidates(2), (std::vector<std::string>{t.k(1), t.k(2)}));
}

TEST(CachePolicy, S3FifoEvictsOneHitWondersBeforeReusedKeys) {
  Tier t(CachePolicyKind::kS3Fifo);
  for (int i = 1; i <= 10; ++i) t.put(i);
  t.hit(1);
  t.hit(1);  // freq 2: promoted to main instead of evicted
  std::vector<std::string> victims = t.candidates(3);
  EXPECT_EQ(victims, (std::vector<std::string>{t.k(2), t.k(3), t.k(4)}));
  auto& s3 = static_cast<S3FIFOCachePolicy&>(*t.policy);
  EXPECT_EQ(s3.main_size(), 1u);
  EXPECT_EQ(s3.ghost_size(), 3u);
  // A ghost hit re-enters straight into main.
  for (const std::string& k : victims) (void)k;
  t.drop(t.key(2));
  t.put(2);
  EXPECT_EQ(s3.main_size(), 2u);
}

TEST(CachePolicy, S3FifoSkipsEntriesThatCannotBeEvicted) {
  Tier t(CachePolicyKind::kS3Fifo);
  for (int i = 1; i <= 3; ++i) t.put(i);
  t.pin(1);
  t.pin(2);
  t.pin(3);
  EXPECT_TRUE(t.candidates(1).empty());
}

// The fixed LFU scan (an index of the keys the tier holds, lfu_policy.h) against its definition,
// computed here from the buckets: the first n keys that the tier holds and that can be evicted,
// buckets in ascending frequency, each in bucket order. Random puts (some registered before the
// tier holds the key, as a disk write in flight), tier inserts of those, hits, pins, force evicts
// and tier removals, with rounds of candidates in between.
RC_GTEST_PROP(CachePolicyProperties, TheFixedLfuScanTakesTheFirstEvictableKeysTheTierHolds, ()) {
  Tier t(CachePolicyKind::kLfu, Quirks::all_fixed());
  auto can = [&](uint32_t v) { return static_cast<bool>(t.evictable[v]); };
  const int keys = *rc::gen::inRange(1, 30);
  std::vector<bool> known(static_cast<size_t>(keys), false);  // the policy has the key
  const int ops = *rc::gen::inRange(1, 200);
  for (int step = 0; step < ops; ++step) {
    const int i = *rc::gen::inRange(0, keys);
    const bool held = t.dict.contains(t.key(i));
    switch (*rc::gen::inRange(0, 8)) {
      case 0:  // a put to the policy alone (a write submitted)
        t.policy->update_on_put(t.key(i));
        known[i] = true;
        break;
      case 1:  // the write completes: the tier holds it
        if (!held) t.hold(i);
        break;
      case 2:
        if (!held) {
          t.put(i);
          known[i] = true;
        }
        break;
      case 3:
        if (held && known[i]) t.hit(i);
        break;
      case 4:
        if (held) t.pin(i);
        break;
      case 5:
        if (held) t.drop(t.key(i));
        break;
      case 6:
        t.policy->update_on_force_evict(t.key(i));
        known[i] = false;
        break;
      default: {
        const int n = *rc::gen::inRange(1, 4);
        std::vector<std::string> want;
        for (const auto& [freq, bucket] : t.policy->frequency_buckets())
          for (const CacheEngineKey& k : bucket)
            if (static_cast<int>(want.size()) < n && t.dict.contains(k) &&
                t.evictable[*t.dict.find(k)])
              want.push_back(k.kid());
        const std::vector<CacheEngineKey> got = t.policy->get_evict_candidates(t.dict, n, can);
        RC_ASSERT(kids(got) == want);
        for (const CacheEngineKey& k : got) {
          t.drop(k);  // the tier removes its victims (force=false: the policy is not told)
          for (int j = 0; j < keys; ++j)
            if (t.key(j).kid() == k.kid()) known[j] = false;
        }
      }
    }
  }
}

// get_evict_candidate is get_evict_candidates(dict, 1, ...)'s first key, with the same effect on
// the policy: two tiers given the same random puts, hits and pins, then asked for victims the two
// ways round after round (each victim dropped from both dicts), give the same victims, and the
// same full candidate order at the end.
RC_GTEST_PROP(CachePolicyProperties, OneCandidateIsTheFirstOfTheCandidateList, ()) {
  const auto kind =
      *rc::gen::element(CachePolicyKind::kLru, CachePolicyKind::kFifo, CachePolicyKind::kMru,
                        CachePolicyKind::kLfu, CachePolicyKind::kS3Fifo);
  Tier a(kind), b(kind);
  const int n = *rc::gen::inRange(1, 40);
  for (int i = 0; i < n; ++i) {
    a.put(i);
    b.put(i);
  }
  const int ops = *rc::gen::inRange(0, 80);
  for (int step = 0; step < ops; ++step) {
    const int i = *rc::gen::inRange(0, n);
    if (*rc::gen::inRange(0, 4) == 0) {
      a.pin(i);
      b.pin(i);
    } else {
      a.hit(i);
      b.hit(i);
    }
  }
  auto can_a = [&](uint32_t v) { return static_cast<bool>(a.evictable[v]); };
  auto can_b = [&](uint32_t v) { return static_cast<bool>(b.evictable[v]); };
  const int rounds = *rc::gen::inRange(1, n + 2);
  for (int r = 0; r < rounds; ++r) {
    std::optional<CacheEngineKey> one = a.policy->get_evict_candidate(a.dict, can_a);
    std::vector<CacheEngineKey> list = b.policy->get_evict_candidates(b.dict, 1, can_b);
    RC_ASSERT(one.has_value() == !list.empty());
    if (!one) break;
    RC_ASSERT(one->kid() == list.front().kid());
    a.drop(*one);
    b.drop(list.front());
  }
  RC_ASSERT(kids(a.policy->get_evict_candidates(a.dict, n, can_a)) ==
            kids(b.policy->get_evict_candidates(b.dict, n, can_b)));
}

// Resumable walks (KeyOrderedDict's failing run): a walk under an unchanged token does not call
// the predicate again on the entries the last walk proved failing; a new token walks them again.
TEST(CachePolicy, DictOrderWalksResumePastTheEntriesKnownToFail) {
  for (CachePolicyKind kind : {CachePolicyKind::kLru, CachePolicyKind::kMru}) {
    Tier t(kind);
    for (int i = 0; i < 100; ++i) t.put(i);
    const bool newest_first = kind == CachePolicyKind::kMru;
    // Pin the 90 entries the walk meets first; 10 evictable ones remain at the far end.
    for (int i = 0; i < 90; ++i) t.pin(newest_first ? 99 - i : i);
    int calls = 0;
    uint64_t token = 7;
    auto victim = [&] {
      CanEvictFn can(
          [&](uint32_t v) {
            ++calls;
            return static_cast<bool>(t.evictable[v]);
          },
          token);
      std::optional<CacheEngineKey> k = t.policy->get_evict_candidate(t.dict, can);
      return k ? k->kid() : std::string("none");
    };
    const int first_free = newest_first ? 9 : 90;
    EXPECT_EQ(victim(), t.k(first_free));
    EXPECT_EQ(calls, 91);
    t.drop(t.key(first_free));
    calls = 0;
    EXPECT_EQ(victim(), t.k(newest_first ? 8 : 91));  // the run is jumped
    EXPECT_EQ(calls, 1);
    // An entry in the run becomes evictable: the owner's token changes, the walk starts over.
    const int unpinned = newest_first ? 59 : 40;
    t.evictable[*t.dict.find(t.key(unpinned))] = true;
    token = 8;
    calls = 0;
    EXPECT_EQ(victim(), t.k(unpinned));
    EXPECT_EQ(calls, 41);
  }
}

// A walk under a token takes the same victims as the plain walk (token 0), whatever happens
// between walks, as long as the token changes whenever an entry may have started to pass: two
// tiers given the same random puts (evictable or not), hits, moves to the front, pins, unpins,
// value reassignments and removals, asked for victims both ways, agree on every list; the
// resumed walk never calls the predicate more often than the plain one. The token changes only
// when an entry the tiers hold is unpinned.
RC_GTEST_PROP(CachePolicyProperties, AResumedDictOrderWalkTakesThePlainWalksVictims, ()) {
  const auto kind =
      *rc::gen::element(CachePolicyKind::kLru, CachePolicyKind::kFifo, CachePolicyKind::kMru);
  TwinTiers twins(kind);
  Tier &a = twins.a, &b = twins.b;
  int calls_a = 0, calls_b = 0;
  auto walk_a = [&](int n) {  // n == 0: get_evict_candidate
    CanEvictFn can(
        [&](uint32_t v) {
          ++calls_a;
          return static_cast<bool>(a.evictable[v]);
        },
        twins.token);
    if (n > 0) return a.policy->get_evict_candidates(a.dict, n, can);
    std::vector<CacheEngineKey> out;
    if (std::optional<CacheEngineKey> k = a.policy->get_evict_candidate(a.dict, can))
      out.push_back(*k);
    return out;
  };
  auto walk_b = [&](int n) {
    return b.policy->get_evict_candidates(b.dict, std::max(n, 1), [&](uint32_t v) {
      ++calls_b;
      return static_cast<bool>(b.evictable[v]);
    });
  };
  const int keys = *rc::gen::inRange(1, 40);
  const int ops = *rc::gen::inRange(1, 300);
  for (int step = 0; step < ops; ++step) {
    const int i = *rc::gen::inRange(0, keys);
    const bool held = twins.held(i);
    auto both = [&](auto f) { twins.both(f); };
    switch (*rc::gen::inRange(0, 10)) {
      case 0:
      case 1:  // a put, evictable or held (a pending write): new keys land outside the run
        if (!held) twins.put(i, *rc::gen::arbitrary<bool>());
        break;
      case 2:
        if (held && kind != CachePolicyKind::kFifo) both([&](Tier& t) { t.hit(i); });
        break;
      case 3:
        if (held) both([&](Tier& t) { t.dict.move_to_end(t.key(i), /*last=*/false); });
        break;
      case 4:
        if (held) both([&](Tier& t) { t.pin(i); });
        break;
      case 5:  // unpinned: it may pass now
        if (held) twins.unpin(i);
        break;
      case 6:  // the entry gets a new value: the dict forgets the run itself
        if (held) {
          const bool evictable = *rc::gen::arbitrary<bool>();
          both([&](Tier& t) {
            t.dict.set(t.key(i), static_cast<uint32_t>(t.evictable.size()));
            t.evictable.push_back(evictable);
          });
        }
        break;
      case 7:
        if (held) both([&](Tier& t) { t.drop(t.key(i)); });
        break;
      default: {
        const int n = *rc::gen::inRange(0, 4);
        const std::vector<CacheEngineKey> got = walk_a(n);
        const std::vector<CacheEngineKey> want = walk_b(n);
        RC_ASSERT(kids(got) == kids(want));
        RC_ASSERT(calls_a <= calls_b);
        if (!got.empty() && *rc::gen::arbitrary<bool>()) {
          both([&](Tier& t) { t.drop(got.front()); });
        }
      }
    }
  }
  RC_ASSERT(kids(walk_a(keys)) == kids(walk_b(keys)));
}

// LFU's scans under a token — upstream's jumping over each bucket's failing run, the fixed one
// starting each frequency after its failing prefix — take the same victims, and raise the same
// KeyError, as the scans of every entry: two tiers given the same
// random puts (as the CPU tier does: into the tier, then the policy; or as the disk tier does: the
// policy first, the tier when the write completes), re-puts (stale bucket entries), hits, pins,
// unpins (the token changes), force evictions and removals (a removed key may keep a stale bucket
// entry, which the scan must still meet), asked for victims both ways, agree on every list and
// every KeyError; the token scan never calls the predicate more often.
RC_GTEST_PROP(CachePolicyProperties, AResumedLfuScanTakesThePlainScansVictims, ()) {
  const Quirks q = *rc::gen::arbitrary<bool>() ? Quirks::upstream() : Quirks::all_fixed();
  TwinTiers twins(CachePolicyKind::kLfu, q);
  Tier &a = twins.a, &b = twins.b;
  int calls_a = 0, calls_b = 0;
  // The victims, or "KeyError"; the tier drops the victims (remove with force=false).
  auto walk = [&](Tier& t, int n, uint64_t tok, int* calls) {
    std::vector<std::string> out;
    try {
      CanEvictFn can(
          [&t, calls](uint32_t v) {
            ++*calls;
            return static_cast<bool>(t.evictable[v]);
          },
          tok);
      for (const CacheEngineKey& k : t.policy->get_evict_candidates(t.dict, n, can)) {
        out.push_back(k.kid());
        t.drop(k);
      }
    } catch (const UpstreamError&) {
      out = {"KeyError"};
    }
    return out;
  };
  const int keys = *rc::gen::inRange(1, 30);
  const int ops = *rc::gen::inRange(1, 300);
  for (int step = 0; step < ops; ++step) {
    const int i = *rc::gen::inRange(0, keys);
    const bool held = twins.held(i);
    auto both = [&](auto f) { twins.both(f); };
    switch (*rc::gen::inRange(0, 11)) {
      case 0:  // a CPU-tier put, evictable or held
        if (!held) twins.put(i, *rc::gen::arbitrary<bool>());
        break;
      case 1:  // a disk-tier put: the policy hears of it before the tier holds the key
        if (!held) both([&](Tier& t) { t.policy->update_on_put(t.key(i)); });
        break;
      case 2:  // the disk write completes (held from now on, evictable: a new entry, no token)
        if (!held) both([&](Tier& t) { t.hold(i); });
        break;
      case 3:  // a re-put: the frequency resets, an entry in the old bucket stays
        if (held) both([&](Tier& t) { t.policy->update_on_put(t.key(i)); });
        break;
      case 4:
        if (held) {
          bool raised_a = false, raised_b = false;
          try {
            a.hit(i);
          } catch (const UpstreamError&) {
            raised_a = true;
          }
          try {
            b.hit(i);
          } catch (const UpstreamError&) {
            raised_b = true;
          }
          RC_ASSERT(raised_a == raised_b);
        }
        break;
      case 5:
        if (held) both([&](Tier& t) { t.pin(i); });
        break;
      case 6:  // unpinned: it may pass now
        if (held) twins.unpin(i);
        break;
      case 7:  // a removal by the tier (its bucket entries stay)
        if (held) both([&](Tier& t) { t.drop(t.key(i)); });
        break;
      case 8:  // a forced eviction: out of the policy, then out of the tier
        if (held) {
          both([&](Tier& t) {
            t.policy->update_on_force_evict(t.key(i));
            t.drop(t.key(i));
          });
        }
        break;
      default: {
        const int n = *rc::gen::inRange(1, 4);
        const std::vector<std::string> got = walk(a, n, twins.token, &calls_a);
        const std::vector<std::string> want = walk(b, n, 0, &calls_b);
        RC_ASSERT(got == want);
        RC_ASSERT(calls_a <= calls_b);
      }
    }
  }
}

TEST(CachePolicy, S3FifoEvictsASmallQueueKeyHitOnlyOnce) {
  // S3-FIFO (Yang et al., SOSP 2023, Algorithm 1 evictS): the small queue's head moves to main
  // only if its frequency is above 1 (hit at least twice); a key hit once is a one-hit wonder and
  // is evicted (its key goes to the ghost queue). S = 1..10, M empty → S's head 1 (freq 1) is the
  // victim, and main stays empty.
  Tier t(CachePolicyKind::kS3Fifo);
  for (int i = 1; i <= 10; ++i) t.put(i);
  t.hit(1);
  EXPECT_EQ(t.candidates(1), (std::vector<std::string>{t.k(1)}));
  auto& s3 = static_cast<S3FIFOCachePolicy&>(*t.policy);
  EXPECT_EQ(s3.main_size(), 0u);
  EXPECT_EQ(s3.ghost_size(), 1u);
}

TEST(CachePolicy, S3FifoTakesFromSmallWhileItHoldsExactlyTenPercent) {
  // Eviction takes from the small queue while |S| >= 10% of |S| + |M| (S3-FIFO's evict(): "if
  // S.size >= 0.1 * cache size then evictS"). Keys 1..9 hit twice are promoted to main (freq 0)
  // one by one while S is the larger share; then S = {10}, M = {1..9}: 1 · 10 >= 10, so S's head
  // 10 (never hit) is the victim, not main's head 1.
  Tier t(CachePolicyKind::kS3Fifo);
  for (int i = 1; i <= 10; ++i) t.put(i);
  for (int i = 1; i <= 9; ++i) {
    t.hit(i);
    t.hit(i);
  }
  EXPECT_EQ(t.candidates(1), (std::vector<std::string>{t.k(10)}));
  auto& s3 = static_cast<S3FIFOCachePolicy&>(*t.policy);
  EXPECT_EQ(s3.main_size(), 9u);
  EXPECT_EQ(s3.small_size(), 0u);
}

TEST(CachePolicy, S3FifoGhostHoldsUpToSmallPlusMainKeysAndAReentryLeavesIt) {
  // The ghost queue remembers up to |S| + |M| evicted keys (the cache's entry count), and a put
  // of a ghost key re-enters main and removes it from the ghost (S3-FIFO: "if x in G: insert x
  // to M", G being a FIFO of evicted keys). Keys 1..9 hit twice go to main; 10 is evicted
  // (G = {10}). Put 11, 12: S = {11, 12}, M = 9 keys; two victims 11, 12 (S holds >= 10%), and
  // G = {10, 11, 12} — three keys, within the cap |S| + |M| = 9. Re-putting 10 puts it in main
  // and leaves G = {11, 12}.
  Tier t(CachePolicyKind::kS3Fifo);
  for (int i = 1; i <= 10; ++i) t.put(i);
  for (int i = 1; i <= 9; ++i) {
    t.hit(i);
    t.hit(i);
  }
  ASSERT_EQ(t.candidates(1), (std::vector<std::string>{t.k(10)}));
  t.put(11);
  t.put(12);
  EXPECT_EQ(t.candidates(2), (std::vector<std::string>{t.k(11), t.k(12)}));
  auto& s3 = static_cast<S3FIFOCachePolicy&>(*t.policy);
  EXPECT_EQ(s3.ghost_size(), 3u);
  t.drop(t.key(10));
  t.put(10);
  EXPECT_EQ(s3.main_size(), 10u);
  EXPECT_EQ(s3.small_size(), 0u);
  EXPECT_EQ(s3.ghost_size(), 2u);
}

}  // namespace
}  // namespace kvtwin::model::lmcache
