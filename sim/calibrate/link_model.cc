#include "sim/calibrate/link_model.h"

#include <algorithm>
#include <cmath>

#include "model/check.h"

namespace kvtwin::sim::calibrate {
namespace {

// ns per byte of a bandwidth in GB/s; 0 for an unlimited one.
double ns_per_byte(double gbps) {
  return std::isinf(gbps) ? 0.0 : 1.0 / gbps;
}

}  // namespace

std::vector<double> LinkModel::features(uint64_t num_objects, uint64_t bytes) const {
  KVTWIN_CHECK_GE(queue_depth, 1);
  const double n = static_cast<double>(num_objects);
  const double b = static_cast<double>(bytes);
  const double q = static_cast<double>(std::min<uint64_t>(num_objects, queue_depth));
  const double per_object = num_objects == 0 ? 0 : b / n;
  const double limit = static_cast<double>(spill_bytes);
  const double spill = spill_scope == SpillScope::kWindow
                           ? n / q * std::max(0.0, q * per_object - limit)
                           : n * std::max(0.0, per_object - limit);
  return {1.0, n, n / q, b, b / q, spill};
}

SimDuration LinkModel::predict(uint64_t num_objects, uint64_t bytes) const {
  if (num_objects == 0) return 0;
  const std::vector<double> f = features(num_objects, bytes);
  const double ns = 1e3 * (latency_us * f[0] + object_us * f[1] + object_serial_us * f[2]) +
                    ns_per_byte(gbps) * f[3] + ns_per_byte(stream_gbps) * f[4] +
                    ns_per_byte(spill_gbps) * f[5];
  return static_cast<SimDuration>(std::llround(ns));
}

std::optional<std::string_view> link_class(Location src, Location dst) {
  using L = Location;
  if (src == L::kDisk && dst == L::kCpu) return "disk_read";
  if (src == L::kCpu && dst == L::kDisk) return "disk_write";
  if (src == L::kRemote && dst == L::kCpu) return "remote_get";
  if (src == L::kCpu && dst == L::kRemote) return "remote_put";
  if (src == L::kCpu && dst == L::kGpu) return "pcie_h2d";
  if (src == L::kGpu && dst == L::kCpu) return "pcie_d2h";
  return std::nullopt;
}

}  // namespace kvtwin::sim::calibrate
