#include "sim/calibrate/real_tiers.h"

namespace kvtwin::sim::calibrate {

bool open_real_tiers(const RealTierOptions& o, RealTiers* tiers, std::string* error) {
  if (!o.disk_path.empty()) {
    cuda::tiers::DiskTierConfig c;
    c.path = o.disk_path;
    c.direct_io = o.direct_io;
    c.use_uring = o.uring;
    c.queue_depth = o.disk_queue_depth;
    tiers->disk = cuda::tiers::DiskTier::open(c, error);
    if (!tiers->disk) return false;
  }
  if (!o.remote_url.empty()) {
    cuda::tiers::RedisTierConfig c;
    c.client.url = o.remote_url;
    c.client.connect_timeout_ms = o.timeout_ms;
    c.client.command_timeout_ms = o.timeout_ms;
    c.pipeline_depth = o.pipeline_depth;
    tiers->remote = cuda::tiers::RedisTier::open(c, error);
    if (!tiers->remote) return false;
  }
  return true;
}

void remove_objects(RealTiers& tiers, const std::vector<std::string>& keys) {
  if (tiers.disk)
    for (const std::string& k : keys) tiers.disk->remove(k);
  if (tiers.remote) tiers.remote->remove(keys);
}

}  // namespace kvtwin::sim::calibrate
