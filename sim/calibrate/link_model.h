// LinkModel: the time one transfer takes on one link, as `kvtwin calibrate` fits it and the
// validating mover checks it. Offered to the simulator's modeled links (sim/hw) to adopt.
//
// A transfer moves n objects, B bytes in all, over a link that keeps up to queue_depth objects
// in flight (io_uring depth for the disk, pipeline depth for Redis, streams for PCIe). With
// q = min(n, queue_depth) objects in flight:
//
//   t(n, B) = latency + n * (object + object_serial / q) + B * (1/gbps + 1/(q * stream_gbps))
//             ^ once     ^ per object: fixed part, and     ^ per byte: the link's limit, and a part
//                          a part that depth hides           that more objects in flight hide
//           + spill term / spill_gbps
//             ^ per byte beyond a size that no longer fits a cache, a socket or a client buffer,
//               with the size counted one of two ways (spill_scope):
//               kObject  n * max(0, B/n - spill_bytes)            each object on its own
//               kWindow  (n/q) * max(0, q * B/n - spill_bytes)    the q objects in flight at once
//               On Redis the pipelined window can matter (on the development VM four pipelined
//               4 MiB GETs once took as long as one 16 MiB GET, 16 times one 4 MiB GET) or not,
//               from one calibration to the next; the fit picks the scope that fits best.
//               With q = 1 the two agree.
//
// Units: microseconds and GB/s (1e9 bytes/s, so 1/gbps is ns per byte). A bandwidth of +inf drops
// its term. With queue_depth = 1, object = object_serial = 0 and no spill this is the
// "latency + bytes / bandwidth" model of the scenario's [links] table. Objects of one transfer
// are taken to be of equal size B/n (LMCache chunks are).
//
// For a given spill size and scope every term is linear in its coefficient, so the fit is a
// (non-negative, relative-error weighted) linear least squares over the features
// [1, n, n/q, B, B/q, spill term] (sim/calibrate/fit.h), repeated per candidate spill size and
// scope.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/mover.h"
#include "sim/time.h"

namespace kvtwin::sim::calibrate {

inline constexpr double kNoLimit = std::numeric_limits<double>::infinity();

struct LinkModel {
  double latency_us = 0;
  double object_us = 0;
  double object_serial_us = 0;
  double gbps = kNoLimit;
  double stream_gbps = kNoLimit;
  enum class SpillScope : uint8_t { kObject, kWindow };
  uint64_t spill_bytes = 0;
  SpillScope spill_scope = SpillScope::kObject;
  double spill_gbps = kNoLimit;
  int32_t queue_depth = 1;

  // Duration of one transfer of num_objects objects and `bytes` bytes alone on the link.
  // REQUIRES: num_objects >= 1 (an empty transfer takes no time: returns 0).
  SimDuration predict(uint64_t num_objects, uint64_t bytes) const;
  // The feature row [1, n, n/q, B, B/q, spill term] of such a transfer.
  std::vector<double> features(uint64_t num_objects, uint64_t bytes) const;

  friend bool operator==(const LinkModel&, const LinkModel&) = default;
};

// The transfer classes a profile describes, named after the simulator's link kinds.
//   disk_read  disk -> cpu     disk_write  cpu -> disk
//   remote_get remote -> cpu   remote_put  cpu -> remote
//   pcie_h2d   cpu -> gpu      pcie_d2h    gpu -> cpu
// Returns nullopt for any other pair.
std::optional<std::string_view> link_class(Location src, Location dst);
inline constexpr std::string_view kLinkClasses[] = {"disk_read",  "disk_write", "remote_get",
                                                    "remote_put", "pcie_h2d",   "pcie_d2h"};

}  // namespace kvtwin::sim::calibrate
