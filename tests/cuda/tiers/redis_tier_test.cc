#include "cuda/tiers/redis_tier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cuda/tiers/host_buffer.h"
#include "tests/cuda/tiers/redis_server.h"

namespace kvtwin::cuda::tiers {
namespace {

using Clock = std::chrono::steady_clock;

HostBuffer content_of(const std::string& key, size_t n) {
  HostBuffer b(n);
  fill_content(key, b.span());
  return b;
}

std::unique_ptr<RedisTier> open_tier(const std::string& url, int timeout_ms = 300,
                                     int backoff_ms = 50) {
  RedisTierConfig c;
  c.client.url = url;
  c.client.connect_timeout_ms = timeout_ms;
  c.client.command_timeout_ms = timeout_ms;
  c.client.backoff_initial_ms = backoff_ms;
  c.client.backoff_max_ms = 4 * backoff_ms;
  c.pipeline_depth = 4;
  std::string error;
  auto tier = RedisTier::open(c, &error);
  EXPECT_TRUE(tier) << error;
  return tier;
}

TEST(RedisTier, UsesLMCacheKeySchemeAndMetadataLayout) {
  kvtwin::testing::RedisServer server;
  auto tier = open_tier(server.url());
  const std::string key = "toy-model@1@0@0aff@half";
  HostBuffer in = content_of(key, 5000);
  ASSERT_EQ(tier->put(key, in.span()), TierStatus::kOk);
  EXPECT_EQ(server.command({"STRLEN", key + "kv_bytes"}), "5000");
  const std::string meta = server.command({"GET", key + "metadata"});
  ASSERT_EQ(meta.size(), kRemoteMetadataBytes);
  auto m = decode_remote_metadata({reinterpret_cast<const uint8_t*>(meta.data()), meta.size()});
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, opaque_metadata(5000));
  EXPECT_EQ(tier->contains(key), std::optional<bool>(true));
  EXPECT_EQ(tier->contains("other"), std::optional<bool>(false));
  HostBuffer out(5000);
  ASSERT_EQ(tier->get(key, out.span()), TierStatus::kOk);
  EXPECT_EQ(first_content_mismatch(key, out.span()), out.size());
}

TEST(RedisTier, PipelinedBatchesLargerThanTheDepthMoveEveryObject) {
  kvtwin::testing::RedisServer server;
  auto tier = open_tier(server.url());
  std::vector<std::string> keys;
  std::vector<HostBuffer> ins, outs;
  for (int i = 0; i < 11; ++i) {
    keys.push_back("k@" + std::to_string(i));
    ins.push_back(content_of(keys.back(), 1000 * (i + 1) + (i == 10 ? (3 << 20) : 0)));
    outs.emplace_back(ins.back().size());
  }
  std::vector<RemotePut> puts;
  std::vector<RemoteGet> gets;
  for (int i = 0; i < 11; ++i) {
    puts.push_back({keys[i], ins[i].span(), opaque_metadata(ins[i].size())});
    gets.push_back({keys[i], outs[i].span()});
  }
  gets.push_back({"k@absent", outs[0].span()});
  std::vector<TierStatus> put_status(puts.size()), get_status(gets.size());
  tier->batched_put(puts, put_status);
  tier->batched_get(gets, get_status);
  for (int i = 0; i < 11; ++i) {
    EXPECT_EQ(put_status[i], TierStatus::kOk) << i;
    EXPECT_EQ(get_status[i], TierStatus::kOk) << i;
    EXPECT_EQ(first_content_mismatch(keys[i], outs[i].span()), outs[i].size()) << i;
  }
  EXPECT_EQ(get_status[11], TierStatus::kMiss);
  EXPECT_EQ(tier->stats().gets_miss, 1u);
}

TEST(RedisTier, MetadataWithoutBytesIsAMissAndIsDeleted) {
  kvtwin::testing::RedisServer server;
  auto tier = open_tier(server.url());
  ASSERT_EQ(tier->put("k", content_of("k", 100).span()), TierStatus::kOk);
  EXPECT_EQ(server.command({"DEL", "kkv_bytes"}), "1");  // Redis evicted the bytes
  HostBuffer out(100);
  EXPECT_EQ(tier->get("k", out.span()), TierStatus::kMiss);
  EXPECT_EQ(server.command({"EXISTS", "kmetadata"}), "0");
}

TEST(RedisTier, WrongLengthsAreCorruptNeverData) {
  kvtwin::testing::RedisServer server;
  auto tier = open_tier(server.url());
  ASSERT_EQ(tier->put("k", content_of("k", 100).span()), TierStatus::kOk);
  HostBuffer longer(101);
  EXPECT_EQ(tier->get("k", longer.span()), TierStatus::kCorrupt);  // metadata says 100
  server.command({"SETRANGE", "kkv_bytes", "100", "x"});           // bytes now 101 long
  HostBuffer exact(100);
  EXPECT_EQ(tier->get("k", exact.span()), TierStatus::kCorrupt);
  server.command({"SET", "kmetadata", "short"});
  EXPECT_EQ(tier->get("k", exact.span()), TierStatus::kCorrupt);
  EXPECT_EQ(tier->stats().gets_corrupt, 3u);
  EXPECT_EQ(tier->stats().gets_ok, 0u);
}

TEST(RedisTier, FullServerDropsPutsAsNoSpace) {
  kvtwin::testing::RedisServer server({"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"});
  auto tier = open_tier(server.url());
  int no_space = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string key = "big@" + std::to_string(i);
    const TierStatus s = tier->put(key, content_of(key, 512 * 1024).span());
    if (s == TierStatus::kNoSpace)
      ++no_space;
    else
      EXPECT_EQ(s, TierStatus::kOk);
  }
  EXPECT_GT(no_space, 0);
  EXPECT_EQ(tier->stats().puts_no_space, static_cast<uint64_t>(no_space));
}

// The server is killed in the middle of a run: operations fail within the timeout, are counted,
// and become misses; once the server is back (empty), the tier reconnects and is used again.
TEST(RedisTierFaults, KilledServerFailsFastThenTheTierIsUsedAgain) {
  kvtwin::testing::RedisServer server;
  auto tier = open_tier(server.url(), /*timeout_ms=*/300, /*backoff_ms=*/50);
  ASSERT_EQ(tier->put("a", content_of("a", 4096).span()), TierStatus::kOk);
  server.kill();
  HostBuffer out(4096);
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    const TierStatus s = tier->get("a", out.span());
    EXPECT_TRUE(s == TierStatus::kUnavailable || s == TierStatus::kTimeout) << tier_status_name(s);
  }
  EXPECT_NE(tier->put("b", content_of("b", 4096).span()), TierStatus::kOk);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(20 * 300));
  EXPECT_EQ(tier->stats().gets_failed, 20u);
  EXPECT_EQ(tier->stats().puts_failed, 1u);

  server.restart();
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // past the longest back-off
  ASSERT_EQ(tier->put("c", content_of("c", 4096).span()), TierStatus::kOk);
  HostBuffer c(4096);
  ASSERT_EQ(tier->get("c", c.span()), TierStatus::kOk);
  EXPECT_EQ(first_content_mismatch("c", c.span()), c.size());
  EXPECT_EQ(tier->get("a", out.span()), TierStatus::kMiss);  // the new server is empty
  EXPECT_GE(tier->stats().reconnects, 1u);
}

// A hung server (stopped, connection open): each call fails after the command timeout, not later.
TEST(RedisTierFaults, HungServerTimesOutWithinTheConfiguredTimeout) {
  kvtwin::testing::RedisServer server;
  auto tier = open_tier(server.url(), /*timeout_ms=*/200, /*backoff_ms=*/50);
  ASSERT_EQ(tier->put("a", content_of("a", 4096).span()), TierStatus::kOk);
  server.pause();
  HostBuffer out(4096);
  const auto t0 = Clock::now();
  const TierStatus s = tier->get("a", out.span());
  const auto waited = Clock::now() - t0;
  EXPECT_EQ(s, TierStatus::kTimeout);
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  EXPECT_LT(waited, std::chrono::milliseconds(1000));
  EXPECT_EQ(tier->stats().timeouts, 1u);
  server.resume();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(tier->get("a", out.span()), TierStatus::kOk);
  EXPECT_EQ(first_content_mismatch("a", out.span()), out.size());
}

// The server dies while a pipelined batch waits for its replies: the whole batch fails at once
// (the connection closes), well before the command timeout, and no object counts as read.
TEST(RedisTierFaults, ServerKilledWhileABatchWaitsFailsTheBatchAtOnce) {
  kvtwin::testing::RedisServer server;
  auto tier = open_tier(server.url(), /*timeout_ms=*/3000, /*backoff_ms=*/50);
  std::vector<std::string> keys;
  std::vector<HostBuffer> outs;
  for (int i = 0; i < 8; ++i) {
    keys.push_back("k" + std::to_string(i));
    ASSERT_EQ(tier->put(keys.back(), content_of(keys.back(), 1 << 20).span()), TierStatus::kOk);
    outs.emplace_back(1 << 20);
  }
  std::vector<RemoteGet> gets;
  for (int i = 0; i < 8; ++i) gets.push_back({keys[i], outs[i].span()});
  std::vector<TierStatus> status(gets.size(), TierStatus::kOk);
  server.pause();
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.kill();
  });
  const auto t0 = Clock::now();
  tier->batched_get(gets, status);
  const auto waited = Clock::now() - t0;
  killer.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(status[i], TierStatus::kUnavailable) << i;
  EXPECT_LT(waited, std::chrono::milliseconds(2000));
  EXPECT_EQ(tier->stats().gets_failed, 8u);
  EXPECT_EQ(tier->stats().timeouts, 0u);
}

TEST(RedisTierOpen, UnreachableServerIsOneClearError) {
  kvtwin::testing::RedisServer server;
  const std::string url = server.url();
  server.kill();
  RedisTierConfig c;
  c.client.url = url;
  std::string error;
  EXPECT_EQ(RedisTier::open(c, &error), nullptr);
  EXPECT_NE(error.find("cannot reach Redis at " + url), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST(RedisTierOpen, MalformedUrlsAreRejected) {
  std::string error;
  EXPECT_FALSE(parse_redis_url("http://x:1", &error));
  EXPECT_FALSE(parse_redis_url("redis://x:0", &error));
  EXPECT_FALSE(parse_redis_url("redis://x:99999", &error));
  EXPECT_FALSE(parse_redis_url("redis://:6379", &error));
  auto u = parse_redis_url("redis://cache.local:7000/3", &error);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "cache.local");
  EXPECT_EQ(u->port, 7000);
  EXPECT_EQ(u->db, 3);
  EXPECT_EQ(parse_redis_url("redis://h", &error)->port, 6379);
}

}  // namespace
}  // namespace kvtwin::cuda::tiers
