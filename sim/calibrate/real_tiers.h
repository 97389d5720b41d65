// Opening the real tiers for `kvtwin calibrate` and `kvtwin validate` from command-line options,
// with one clear error line for a bad configuration (unwritable directory, unreachable Redis).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cuda/tiers/disk_tier.h"
#include "cuda/tiers/redis_tier.h"

namespace kvtwin::sim::calibrate {

struct RealTierOptions {
  std::string disk_path;  // empty: no disk tier
  bool direct_io = true;
  bool uring = true;
  int disk_queue_depth = 8;
  std::string remote_url;  // empty: no remote tier
  int pipeline_depth = 8;
  int timeout_ms = 5000;  // Redis connect and command timeout
};

struct RealTiers {
  std::unique_ptr<cuda::tiers::DiskTier> disk;
  std::unique_ptr<cuda::tiers::RedisTier> remote;
};

// Opens the tiers named in `options`. Returns false with a one-line reason in *error.
bool open_real_tiers(const RealTierOptions& options, RealTiers* tiers, std::string* error);

// Deletes the objects named `keys` from whichever tiers are open (best effort).
void remove_objects(RealTiers& tiers, const std::vector<std::string>& keys);

}  // namespace kvtwin::sim::calibrate
