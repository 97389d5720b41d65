// HardwareProfile: what `kvtwin calibrate` measured on a machine, as a TOML file that scenarios
// can include and `kvtwin validate` reads back.
//
//   [links]                      the simulator's scenario keys (sim/scenario LinksConfig):
//   disk_read_gbps = 1.9           one latency and one bandwidth per link, derived from the fits
//   ...                            below (bandwidth with the queue full, latency of one object)
//   [link_models.disk_read]      the full fitted LinkModel of each measured transfer class
//   latency_us = 85.0              (sim/calibrate/link_model.h), with its sample count and the
//   ...                            fit's own MAPE
//   [tiers]                      the settings the real tiers ran with while measured, so that a
//   disk_direct_io = true          later validation runs them the same way
//
// Output is deterministic: classes in name order, numbers with 6 significant digits.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/calibrate/link_model.h"

namespace kvtwin::sim::calibrate {

struct ProfileLink {
  LinkModel model;
  uint64_t samples = 0;
  double fit_mape_pct = 0;
};

struct TierSettings {
  bool disk_direct_io = true;
  bool disk_uring = true;
  int32_t disk_queue_depth = 8;
  int32_t remote_pipeline_depth = 8;
};

struct HardwareProfile {
  std::vector<std::string> comments;         // written as leading "# " lines
  std::map<std::string, ProfileLink> links;  // by class name (kLinkClasses)
  TierSettings tiers;
};

std::string to_toml(const HardwareProfile& profile);

// Reads a profile written by to_toml (comments and the [links] table are ignored; the models are
// read from [link_models.*]). Throws InputError naming the file, line and key for a syntax error,
// an unknown class or key, or a negative coefficient.
HardwareProfile read_hardware_profile(const std::string& path);

}  // namespace kvtwin::sim::calibrate
