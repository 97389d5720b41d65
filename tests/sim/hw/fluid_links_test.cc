#include "sim/hw/fluid_links.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "sim/hw/modeled_mover.h"

namespace kvtwin::sim::hw {
namespace {

constexpr SimTime kSec = kNsPerSecond;

TEST(FluidLinks, OneFlowTakesLatencyPlusBytesOverBandwidth) {
  Simulator sim;
  FluidLinks links(&sim);
  auto l = links.add_link("pcie", 1e9);
  SimTime done = -1;
  links.start_flow({l}, 1e9, 10'000, [&] { done = sim.now(); });
  sim.run();
  EXPECT_EQ(done, kSec + 10'000);
  EXPECT_DOUBLE_EQ(links.stats()[0].bytes, 1e9);
  EXPECT_EQ(links.stats()[0].busy_ns, kSec);
}

TEST(FluidLinks, ConcurrentFlowsShareALinkEqually) {
  Simulator sim;
  FluidLinks links(&sim);
  auto l = links.add_link("disk", 1e9);
  std::vector<SimTime> done;
  links.start_flow({l}, 1e9, 0, [&] { done.push_back(sim.now()); });
  links.start_flow({l}, 1e9, 0, [&] { done.push_back(sim.now()); });
  sim.run_until(kSec / 2);
  EXPECT_DOUBLE_EQ(links.link_rate(l), 1e9);
  sim.run();
  EXPECT_EQ(done, (std::vector<SimTime>{2 * kSec, 2 * kSec}));
}

TEST(FluidLinks, ArrivalsAndDeparturesRescheduleCompletions) {
  // A (1 GB) alone for 0.5 s moves 0.5 GB; B (0.25 GB) arrives: both at 0.5 GB/s, B is done
  // at 1.0 s having let A move 0.25 GB; A finishes its last 0.25 GB alone at 1.25 s.
  Simulator sim;
  FluidLinks links(&sim);
  auto l = links.add_link("h2d", 1e9);
  SimTime a = -1, b = -1;
  links.start_flow({l}, 1e9, 0, [&] { a = sim.now(); });
  sim.schedule_at(kSec / 2, [&] { links.start_flow({l}, 0.25e9, 0, [&] { b = sim.now(); }); });
  sim.run();
  EXPECT_EQ(b, kSec);
  EXPECT_EQ(a, kSec + kSec / 4);
}

TEST(FluidLinks, MaxMinFairnessGivesUnusedShareToOthers) {
  // X crosses L1 (10) and L2 (4); Y only L1; Z only L2. L2 splits 2/2, so X is held at 2 and
  // Y takes the remaining 8 of L1.
  Simulator sim;
  FluidLinks links(&sim);
  auto l1 = links.add_link("l1", 10);
  auto l2 = links.add_link("l2", 4);
  links.start_flow({l1, l2}, 100, 0, [] {});
  links.start_flow({l1}, 100, 0, [] {});
  links.start_flow({l2}, 100, 0, [] {});
  sim.run_until(1);
  EXPECT_DOUBLE_EQ(links.link_rate(l1), 10);
  EXPECT_DOUBLE_EQ(links.link_rate(l2), 4);
  sim.run();
}

TEST(FluidLinks, ZeroByteFlowCompletesAfterItsLatencyAsAnEvent) {
  Simulator sim;
  FluidLinks links(&sim);
  auto l = links.add_link("x", 1);
  bool called = false;
  links.start_flow({l}, 0, 0, [&] { called = true; });
  EXPECT_FALSE(called);
  sim.run();
  EXPECT_TRUE(called);
  EXPECT_EQ(sim.now(), 0);
}

// Work conservation: flows of random sizes all starting at 0 on one link finish the last one
// at total/capacity; each finishes no earlier than alone; every byte is accounted.
RC_GTEST_PROP(FluidLinks, OneLinkIsWorkConserving, ()) {
  const auto sizes = *rc::gen::container<std::vector<int>>(*rc::gen::inRange<size_t>(1, 12),
                                                           rc::gen::inRange(1, 1'000'000));
  Simulator sim;
  FluidLinks links(&sim);
  auto l = links.add_link("x", 1e9);
  SimTime last = 0;
  double total = 0;
  for (int s : sizes) {
    total += s;
    links.start_flow({l}, s, 0, [&, s] {
      RC_ASSERT(sim.now() >= static_cast<SimTime>(s));  // 1 byte per ns alone
      last = std::max(last, sim.now());
    });
  }
  sim.run();
  RC_ASSERT(std::llabs(last - static_cast<SimTime>(total)) <= static_cast<int64_t>(sizes.size()));
  RC_ASSERT(links.stats()[0].bytes == total);
  RC_ASSERT(links.num_active() == 0u);
}

// The byte counters sum the flows' sizes, not rate × time: with flows joining and leaving links
// of awkward capacities (fractional bytes per ns), every count is a whole number, exact at the
// end, and in between never more than the bytes a link could have carried.
TEST(FluidLinks, ByteCountsAreWholeAndExact) {
  Simulator sim;
  FluidLinks links(&sim);
  auto a = links.add_link("a", 7.3e8);
  auto b = links.add_link("b", 1.9e9);
  double on_a = 0, on_b = 0;
  for (int i = 0; i < 40; ++i) {
    const double size = 1'000'003.0 * (i % 7 + 1) + i;
    const bool both = i % 3 == 0;
    on_a += size;
    if (both) on_b += size;
    sim.schedule_at(SimTime{i} * 377'777, [&links, a, b, size, both] {
      links.start_flow(both ? std::vector{a, b} : std::vector{a}, size, 1'000, [] {});
    });
  }
  sim.run_until(6'000'000);
  const auto& mid = links.stats();
  EXPECT_GT(links.num_active(), 0u);
  EXPECT_EQ(mid[0].bytes, std::floor(mid[0].bytes));
  EXPECT_GT(mid[0].bytes, 0);
  EXPECT_LE(mid[0].bytes, 7.3e8 * 6e-3);
  EXPECT_EQ(mid[1].bytes, std::floor(mid[1].bytes));
  EXPECT_LE(mid[1].bytes, on_b);
  sim.run();
  EXPECT_EQ(links.num_active(), 0u);
  EXPECT_EQ(links.stats()[0].bytes, on_a);
  EXPECT_EQ(links.stats()[1].bytes, on_b);
}

// Flows joining and leaving two links of awkward capacities (ByteCountsAreWholeAndExact's), and
// the completion time of each, in start order.
void start_awkward_flows(Simulator* sim, FluidLinks* links, std::vector<SimTime>* done) {
  auto a = links->add_link("a", 7.3e8);
  auto b = links->add_link("b", 1.9e9);
  done->assign(40, -1);
  for (int i = 0; i < 40; ++i) {
    const double size = 1'000'003.0 * (i % 7 + 1) + i;
    const bool both = i % 3 == 0;
    sim->schedule_at(SimTime{i} * 377'777, [=] {
      links->start_flow(both ? std::vector{a, b} : std::vector{a}, size, 1'000,
                        [sim, done, i] { (*done)[static_cast<size_t>(i)] = sim->now(); });
    });
  }
}

// A sampler reads the bytes moved so far without touching the flows: moved_bytes gives at any
// instant what stats() gives there before its rounding down (at most a byte more per active
// flow), and a run read every 250 us completes every flow at the same nanosecond as one never
// read.
TEST(FluidLinks, MovedBytesAreStatsBytesWithoutAdvancingTheFlows) {
  std::vector<SimTime> unread_done;
  {
    Simulator sim;
    FluidLinks links(&sim);
    start_awkward_flows(&sim, &links, &unread_done);
    sim.run();
  }
  Simulator sim;
  FluidLinks links(&sim);
  std::vector<SimTime> done;
  start_awkward_flows(&sim, &links, &done);
  std::vector<std::pair<SimTime, std::vector<double>>> read;
  for (SimTime t = 0; t < 250'000'000; t += 250'000)  // the flows take ~212 ms
    sim.schedule_at(t, [&, t] {
      read.emplace_back(t, std::vector<double>{});
      links.moved_bytes(&read.back().second);
    });
  sim.run();
  EXPECT_EQ(done, unread_done);
  ASSERT_EQ(read.size(), 1000u);
  // Mid-flight, the fractions of bytes show.
  EXPECT_TRUE(std::any_of(read.begin(), read.end(),
                          [](const auto& r) { return r.second[0] != std::floor(r.second[0]); }));
  for (size_t k = 1; k < read.size(); ++k)
    for (size_t l = 0; l < 2; ++l) EXPECT_GE(read[k].second[l], read[k - 1].second[l]);
  EXPECT_EQ(read.back().second[0], links.stats()[0].bytes);  // every flow done by then
  EXPECT_EQ(read.back().second[1], links.stats()[1].bytes);
  // At a few instants mid-flight, stats() of an identical run stopped there agrees to the byte.
  for (size_t k : {7u, 31u, 64u, 99u, 120u}) {
    Simulator at_sim;
    FluidLinks at_links(&at_sim);
    std::vector<SimTime> at_done;
    start_awkward_flows(&at_sim, &at_links, &at_done);
    at_sim.run_until(read[k].first);
    const auto& stats = at_links.stats();
    const double active = static_cast<double>(at_links.num_active());
    EXPECT_GT(active, 1) << read[k].first;
    for (size_t l = 0; l < 2; ++l) {
      EXPECT_LE(stats[l].bytes, read[k].second[l]) << read[k].first;
      EXPECT_LT(read[k].second[l], stats[l].bytes + active) << read[k].first;
    }
  }
}

TEST(ModeledMover, PathsCrossTheLinksOfTheirLocations) {
  Simulator sim;
  scenario::LinksConfig cfg;
  ModeledMover mover(&sim, cfg, 2);
  SimDuration lat = 0;
  EXPECT_EQ(mover.path(Location::kCpu, Location::kGpu, 1, &lat).size(), 1u);
  EXPECT_EQ(lat, from_seconds(cfg.pcie_latency_us * 1e-6));
  EXPECT_EQ(mover.path(Location::kRemote, Location::kCpu, 0, &lat).size(), 2u);
  EXPECT_EQ(lat, from_seconds(cfg.network_latency_us * 1e-6));
  EXPECT_EQ(mover.path(Location::kDisk, Location::kGpu, 0, &lat).size(), 2u);
  EXPECT_EQ(lat, from_seconds((cfg.disk_latency_us + cfg.pcie_latency_us) * 1e-6));
}

// PCIe at 35 GB/s host to device, 50 GB/s back, 10 µs per transfer.
scenario::LinksConfig pcie_links() {
  scenario::LinksConfig cfg;
  cfg.pcie_h2d_gbps = 35;
  cfg.pcie_d2h_gbps = 50;
  cfg.pcie_latency_us = 10;
  return cfg;
}

Transfer transfer(Location src, Location dst, std::vector<KvObject> objects) {
  Transfer t;
  t.src = src;
  t.dst = dst;
  t.objects = std::move(objects);
  return t;
}

TEST(ModeledMover, TransferTimeFollowsTheLinkAndResultIsAsynchronous) {
  Simulator sim;
  ModeledMover mover(&sim, pcie_links(), 1);
  Transfer t = transfer(Location::kCpu, Location::kGpu,
                        {KvObject{"a", 17'500'000, -1, {}}, KvObject{"b", 17'500'000, -1, {}}});
  TransferResult got;
  bool called = false;
  mover.start(std::move(t), [&](const TransferResult& r) {
    got = r;
    called = true;
  });
  EXPECT_FALSE(called);
  sim.run();
  ASSERT_TRUE(called);
  EXPECT_EQ(got.finish, 1'000'000 + 10'000);  // 35 MB at 35 GB/s + 10 µs
  EXPECT_TRUE(got.all_ok());
  auto reports = mover.link_reports();
  EXPECT_EQ(reports[0].kind, "pcie_h2d");
  EXPECT_DOUBLE_EQ(reports[0].bytes, 35e6);
}

// A transfer whose host waits for the copy after each of its 3 chunks (LMCache's store copy)
// pays the path's latency 3 times: 3 × 10 µs + 30 MB at 50 GB/s.
TEST(ModeledMover, EachHostWaitPaysThePathsLatency) {
  Simulator sim;
  ModeledMover mover(&sim, pcie_links(), 1);
  Transfer t = transfer(Location::kGpu, Location::kCpu, {KvObject{"chunks", 30'000'000, -1, {}}});
  t.host_waits = 3;
  SimTime finish = -1;
  mover.start(std::move(t), [&](const TransferResult& r) { finish = r.finish; });
  sim.run();
  EXPECT_EQ(finish, 600'000 + 3 * 10'000);
}

// Remote read faults belong to LMCache's logic (the connector deletes the Redis value before the
// model reads it): the links move every object they are given, whatever the failure rate.
TEST(ModeledMover, RemoteReadsMoveEveryObjectTheyAreGiven) {
  Simulator sim;
  scenario::LinksConfig cfg;
  cfg.remote_get_failure_rate = 0.5;
  ModeledMover mover(&sim, cfg, 1);
  Transfer t;
  t.src = Location::kRemote;
  t.dst = Location::kCpu;
  for (int i = 0; i < 64; ++i) t.objects.push_back(KvObject{"k", 1000, -1, {}});
  std::vector<uint8_t> ok;
  mover.start(std::move(t), [&](const TransferResult& r) { ok = r.ok; });
  sim.run();
  EXPECT_EQ(ok, std::vector<uint8_t>(64, 1));
  EXPECT_DOUBLE_EQ(mover.link_reports().back().bytes, 64'000.0);  // remote_tx
}

}  // namespace
}  // namespace kvtwin::sim::hw
