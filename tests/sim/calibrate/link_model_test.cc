#include "sim/calibrate/link_model.h"

#include <gtest/gtest.h>

namespace kvtwin::sim::calibrate {
namespace {

TEST(LinkModel, LatencyPlusBytesOverBandwidthWhenTheOtherTermsAreZero) {
  LinkModel m;
  m.latency_us = 80;
  m.gbps = 2.0;  // 2 bytes per ns
  EXPECT_EQ(m.predict(1, 2'000'000), 80'000 + 1'000'000);
  EXPECT_EQ(m.predict(4, 2'000'000), 80'000 + 1'000'000);  // object count plays no part
  EXPECT_EQ(m.predict(0, 0), 0);
}

TEST(LinkModel, QueueDepthHidesTheSerialTermsUpToTheDepth) {
  LinkModel m;
  m.object_us = 10;
  m.object_serial_us = 40;
  m.gbps = kNoLimit;
  m.stream_gbps = 1.0;  // 1 byte per ns per object in flight
  m.queue_depth = 4;
  // n = 1: q = 1.   10 + 40 us, and 1000 B at 1 B/ns.
  EXPECT_EQ(m.predict(1, 1000), 50'000 + 1'000);
  // n = 2: q = 2.   2 * (10 + 40/2) us, 2000 B / 2.
  EXPECT_EQ(m.predict(2, 2000), 60'000 + 1'000);
  // n = 8: q = 4.   8 * (10 + 40/4) us, 8000 B / 4.
  EXPECT_EQ(m.predict(8, 8000), 160'000 + 2'000);
  EXPECT_EQ(m.features(8, 8000), (std::vector<double>{1, 8, 2, 8000, 2000, 8000}));
}

TEST(LinkModel, SpillChargesOnlyTheBytesOfEachObjectBeyondTheSpillSize) {
  LinkModel m;
  m.gbps = 4.0;                                           // 0.25 ns per byte
  m.spill_bytes = 1000;                                   // per object, the default scope
  m.spill_gbps = 0.5;                                     // 2 ns per spilled byte
  EXPECT_EQ(m.predict(4, 4 * 800), 800);                  // no object spills
  EXPECT_EQ(m.predict(4, 4 * 1500), 1500 + 4 * 500 * 2);  // 500 bytes of each spill
  EXPECT_EQ(m.features(4, 6000), (std::vector<double>{1, 4, 4, 6000, 6000, 2000}));
}

TEST(LinkModel, AWindowSpillCountsTheBytesInFlightNotEachObject) {
  LinkModel m;
  m.gbps = 4.0;  // 0.25 ns per byte
  m.spill_bytes = 2000;
  m.spill_scope = LinkModel::SpillScope::kWindow;
  m.spill_gbps = 0.5;  // 2 ns per spilled byte
  m.queue_depth = 4;
  // 8 objects of 1000 B, 4 in flight: 2 windows of 4000 B, each 2000 B past the window.
  EXPECT_EQ(m.predict(8, 8000), 2000 + 2 * 2000 * 2);
  // 2 objects of 1000 B in flight fit the window: nothing spills, though one 4000 B object would.
  EXPECT_EQ(m.predict(2, 2000), 500);
  EXPECT_EQ(m.predict(1, 4000), 1000 + 2000 * 2);
}

TEST(LinkModel, ClassesFollowTheSimulatorLinkKinds) {
  EXPECT_EQ(link_class(Location::kDisk, Location::kCpu), "disk_read");
  EXPECT_EQ(link_class(Location::kCpu, Location::kDisk), "disk_write");
  EXPECT_EQ(link_class(Location::kRemote, Location::kCpu), "remote_get");
  EXPECT_EQ(link_class(Location::kCpu, Location::kRemote), "remote_put");
  EXPECT_EQ(link_class(Location::kCpu, Location::kGpu), "pcie_h2d");
  EXPECT_EQ(link_class(Location::kGpu, Location::kCpu), "pcie_d2h");
  EXPECT_FALSE(link_class(Location::kDisk, Location::kRemote).has_value());
}

}  // namespace
}  // namespace kvtwin::sim::calibrate
