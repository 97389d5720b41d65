#include "sim/calibrate/hardware_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "sim/io/input_error.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::calibrate {
namespace {

std::string write_file(const std::string& text) {
  const std::string path = kvtwin::testing::scratch_dir() + "/profile.toml";
  std::ofstream(path) << text;
  return path;
}

HardwareProfile sample_profile() {
  HardwareProfile p;
  p.comments = {"machine: test"};
  LinkModel r;
  r.latency_us = 85.5;
  r.object_us = 12.25;
  r.object_serial_us = 3;
  r.gbps = 1.875;
  r.stream_gbps = kNoLimit;
  r.queue_depth = 8;
  p.links["disk_read"] = {r, 40, 3.5};
  LinkModel w = r;
  w.gbps = 1.25;
  p.links["disk_write"] = {w, 40, 4.5};
  p.tiers = {false, false, 4, 16};
  return p;
}

TEST(HardwareProfile, RoundTripsModelsAndTierSettings) {
  HardwareProfile p = sample_profile();
  p.links["disk_write"].model.spill_bytes = 1 << 20;
  p.links["disk_write"].model.spill_scope = LinkModel::SpillScope::kWindow;
  p.links["disk_write"].model.spill_gbps = 0.5;
  const std::string text = to_toml(p);
  EXPECT_NE(text.find("# machine: test"), std::string::npos);
  EXPECT_NE(text.find("stream_gbps = inf"), std::string::npos);
  const HardwareProfile back = read_hardware_profile(write_file(text));
  ASSERT_EQ(back.links.size(), 2u);
  EXPECT_EQ(back.links.at("disk_read").model, p.links.at("disk_read").model);
  EXPECT_EQ(back.links.at("disk_write").model, p.links.at("disk_write").model);
  EXPECT_EQ(back.links.at("disk_read").samples, 40u);
  EXPECT_EQ(back.tiers.disk_direct_io, false);
  EXPECT_EQ(back.tiers.disk_uring, false);
  EXPECT_EQ(back.tiers.disk_queue_depth, 4);
  EXPECT_EQ(back.tiers.remote_pipeline_depth, 16);
}

TEST(HardwareProfile, WritesTheSimulatorLinkKeysFromTheModels) {
  const std::string text = to_toml(sample_profile());
  // A full queue (8) of 32 MiB objects: bytes over their per-object and per-byte time.
  auto expected_gbps = [](double gbps) {
    const double bytes = 8.0 * (32 << 20);
    const double ns = 8 * (12.25 + 3.0 / 8) * 1e3 + bytes / gbps;
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", bytes / ns);
    return std::string(buf);
  };
  EXPECT_NE(text.find("disk_read_gbps = " + expected_gbps(1.875) + "\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("disk_write_gbps = " + expected_gbps(1.25) + "\n"), std::string::npos);
  // One-object latency: 85.5 + 12.25 + 3.
  EXPECT_NE(text.find("disk_latency_us = 100.75\n"), std::string::npos);
  EXPECT_EQ(text.find("network_gbps"), std::string::npos);  // no remote model, no remote keys
}

TEST(HardwareProfile, OutputIsDeterministic) {
  EXPECT_EQ(to_toml(sample_profile()), to_toml(sample_profile()));
}

TEST(HardwareProfile, UnknownKeyNamesItsLine) {
  const std::string path = write_file(
      "[link_models.disk_read]\nlatency_us = 1.0\nobject_us = 0.0\nobject_serial_us = 0.0\n"
      "gbps = 1.0\nstream_gbps = inf\nqueue_depth = 1\nlatncy = 3\n");
  try {
    read_hardware_profile(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 8u);
    EXPECT_EQ(e.field(), "link_models.disk_read.latncy");
  }
}

TEST(HardwareProfile, TheSpillKeyNamesItsScope) {
  const std::string head =
      "[link_models.remote_get]\nlatency_us = 1.0\nobject_us = 0.0\nobject_serial_us = 0.0\n"
      "gbps = 1.0\nstream_gbps = inf\nspill_gbps = 0.4\nqueue_depth = 8\n";
  const HardwareProfile object =
      read_hardware_profile(write_file(head + "spill_object_bytes = 4194304\n"));
  EXPECT_EQ(object.links.at("remote_get").model.spill_scope, LinkModel::SpillScope::kObject);
  EXPECT_EQ(object.links.at("remote_get").model.spill_bytes, 4194304u);
  const HardwareProfile window =
      read_hardware_profile(write_file(head + "spill_window_bytes = 8388608\n"));
  EXPECT_EQ(window.links.at("remote_get").model.spill_scope, LinkModel::SpillScope::kWindow);
  EXPECT_EQ(window.links.at("remote_get").model.spill_bytes, 8388608u);
  EXPECT_THROW(read_hardware_profile(write_file(
                   head + "spill_object_bytes = 1048576\nspill_window_bytes = 8388608\n")),
               InputError);
}

TEST(HardwareProfile, RejectsNegativeCoefficientsAndUnknownClasses) {
  EXPECT_THROW(read_hardware_profile(write_file(
                   "[link_models.disk_read]\nlatency_us = -1.0\nobject_us = 0.0\n"
                   "object_serial_us = 0.0\ngbps = 1.0\nstream_gbps = inf\nqueue_depth = 1\n")),
               InputError);
  EXPECT_THROW(read_hardware_profile(write_file("[link_models.floppy_read]\n")), InputError);
  EXPECT_THROW(read_hardware_profile(write_file("[links\n")), InputError);
}

}  // namespace
}  // namespace kvtwin::sim::calibrate
