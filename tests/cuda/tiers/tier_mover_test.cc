#include "cuda/tiers/tier_mover.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "model/check.h"
#include "tests/cuda/tiers/redis_server.h"
#include "tests/support/paths.h"

namespace kvtwin::cuda::tiers {
namespace {

using sim::Location;

sim::Transfer transfer(Location src, Location dst, int n, uint64_t bytes) {
  sim::Transfer t;
  t.src = src;
  t.dst = dst;
  t.kind = "test";
  for (int i = 0; i < n; ++i) {
    sim::KvObject o;
    o.key = "m@1@0@" + std::to_string(i) + "@half";
    o.bytes = bytes;
    t.objects.push_back(std::move(o));
  }
  return t;
}

struct Tiers {
  kvtwin::testing::RedisServer server;
  std::unique_ptr<DiskTier> disk;
  std::unique_ptr<RedisTier> remote;
  Tiers() {
    std::string error;
    DiskTierConfig dc;
    dc.path = kvtwin::testing::scratch_dir();
    disk = DiskTier::open(dc, &error);
    EXPECT_TRUE(disk) << error;
    RedisTierConfig rc;
    rc.client.url = server.url();
    remote = RedisTier::open(rc, &error);
    EXPECT_TRUE(remote) << error;
  }
};

// The same story on both tiers: store, retrieve, and a retrieve of objects never stored.
class TierMoverTest : public ::testing::TestWithParam<Location> {};

TEST_P(TierMoverTest, StoredObjectsComeBackVerifiedAndAbsentOnesAreFaults) {
  Tiers tiers;
  sim::Simulator sim;
  TierMover mover(sim, tiers.disk.get(), tiers.remote.get(), {.max_buffer_bytes = 3 << 20});
  const Location tier = GetParam();
  sim::TransferResult results[3];
  auto record = [&](int slot) {
    return [&results, slot](const sim::TransferResult& r) { results[slot] = r; };
  };
  mover.start(transfer(Location::kCpu, tier, 5, 1 << 20), record(0));
  EXPECT_TRUE(results[0].ok.empty());  // never called synchronously
  sim.run();
  mover.start(transfer(tier, Location::kCpu, 5, 1 << 20), record(1));
  sim::Transfer absent = transfer(tier, Location::kCpu, 2, 1 << 20);
  absent.objects[1].key = "never-stored";
  mover.start(absent, record(2));
  sim.run();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(results[i].ok, std::vector<uint8_t>(5, 1)) << i;
    EXPECT_GT(results[i].measured_ns, 0);
    EXPECT_EQ(results[i].finish - results[i].start, results[i].measured_ns);  // charge measured
    EXPECT_EQ(results[i].predicted_ns, -1);
  }
  EXPECT_EQ(results[2].ok, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(mover.wrong_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BothTiers, TierMoverTest,
                         ::testing::Values(Location::kDisk, Location::kRemote),
                         [](const ::testing::TestParamInfo<Location>& param_info) {
                           return std::string(location_name(param_info.param));
                         });

TEST(TierMover, CorruptFileIsAFaultNotData) {
  Tiers tiers;
  sim::Simulator sim;
  TierMover mover(sim, tiers.disk.get(), nullptr, {.charge = TierMoverConfig::Charge::kNone});
  ASSERT_TRUE(mover.execute(transfer(Location::kCpu, Location::kDisk, 2, 8192)).all_ok());
  {
    std::fstream f(tiers.disk->file_path("m@1@0@1@half"),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 10);
    f.put('\x7f');
  }
  sim::TransferResult got;
  mover.start(transfer(Location::kDisk, Location::kCpu, 2, 8192),
              [&](const sim::TransferResult& r) { got = r; });
  sim.run();
  EXPECT_EQ(got.ok, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(got.finish, got.start);  // charge kNone
  EXPECT_EQ(tiers.disk->stats().gets_corrupt, 1u);
  EXPECT_EQ(mover.wrong_bytes(), 0u);
}

TEST(TierMover, RefusesLinksItHasNoTierFor) {
  sim::Simulator sim;
  TierMover mover(sim, nullptr, nullptr);
  EXPECT_FALSE(mover.handles(Location::kCpu, Location::kDisk));
  EXPECT_FALSE(mover.handles(Location::kGpu, Location::kCpu));
  EXPECT_THROW(mover.execute(transfer(Location::kCpu, Location::kDisk, 1, 10)),
               model::CheckFailedError);
}

}  // namespace
}  // namespace kvtwin::cuda::tiers

namespace kvtwin::cuda::tiers {
namespace {

// redis-server is killed in the middle of a run and comes back later: the transfers in between
// fail within the timeout and are reported as faults (misses for the caller), the run completes,
// and once the server is back the tier is used again. No object ever comes back wrong.
TEST(TierMoverFaults, RedisKilledMidRunTheRunCompletesAndTheTierReturns) {
  kvtwin::testing::RedisServer server;
  RedisTierConfig rc;
  rc.client.url = server.url();
  rc.client.command_timeout_ms = 300;
  rc.client.connect_timeout_ms = 300;
  rc.client.backoff_initial_ms = 20;
  rc.client.backoff_max_ms = 80;
  std::string error;
  auto remote = RedisTier::open(rc, &error);
  ASSERT_TRUE(remote) << error;
  sim::Simulator sim;
  TierMover mover(sim, nullptr, remote.get());
  std::vector<std::pair<int, sim::TransferResult>> results;  // (step, result) in completion order
  for (int i = 0; i < 10; ++i) {
    sim.schedule_at(i * 1'000'000'000LL, [&, i] {
      if (i == 4) server.kill();
      if (i == 7) {
        server.restart();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // past the back-off
      }
      auto record = [&results, i](const sim::TransferResult& r) { results.emplace_back(i, r); };
      sim::Transfer store = transfer(Location::kCpu, Location::kRemote, 2, 256 << 10);
      sim::Transfer load = transfer(Location::kRemote, Location::kCpu, 2, 256 << 10);
      for (auto* t : {&store, &load})
        for (auto& o : t->objects) o.key += "#" + std::to_string(i);
      mover.start(store, record);
      mover.start(load, record);
    });
  }
  sim.run();
  ASSERT_EQ(results.size(), 20u);  // every transfer completed
  for (const auto& [step, r] : results) {
    const bool server_down = step >= 4 && step < 7;
    EXPECT_EQ(r.all_ok(), !server_down) << "step " << step;
    if (server_down) {
      EXPECT_LT(r.measured_ns, 300'000'000 + 100'000'000) << "step " << step;
    }
  }
  EXPECT_EQ(mover.wrong_bytes(), 0u);
  const TierStats s = remote->stats();
  EXPECT_EQ(s.puts_failed, 6u);
  EXPECT_EQ(s.gets_failed, 6u);
  EXPECT_EQ(s.gets_ok, 14u);
  EXPECT_GE(s.reconnects, 1u);
}

}  // namespace
}  // namespace kvtwin::cuda::tiers
