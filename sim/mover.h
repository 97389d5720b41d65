// Mover: the one seam through which every KV byte moves (../shared/ARCHITECTURE.md).
//
// "Copy these chunk / layer objects from location A to location B." The simulator asks a Mover
// to start a transfer and is told, through its own event queue, when the transfer completes and
// which objects arrived. It never knows which implementation it holds:
//
//   modeled     returns a duration from the hardware model (latency, bandwidth, concurrency,
//               sharing of a link among transfers in flight) without touching bytes;
//   real        performs the copy (CUDA kernel + DMA, pread/pwrite, Redis SET/GET) and charges
//               the measured duration (or the predicted one, to keep a run deterministic);
//   validating  does both and records (predicted, measured) pairs for the validation report and
//               for calibration.
//
// Faults are data: an object that could not be moved (server gone, disk full, corrupt file) is
// reported with ok = false; the caller counts it and turns it into a miss and a recompute, as
// upstream does. A Mover never delivers wrong bytes: a real read that fails verification is a
// fault, not a success.
//
// Threading: called from the simulation thread only. Real movers may use threads internally but
// report completion through the Simulator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/simulator.h"
#include "sim/time.h"

namespace kvtwin::sim {

// Where KV bytes live. kGpu is an instance's paged KV buffer; kCpu its pinned host pool;
// kDisk its local disk tier; kRemote the store shared by all instances.
enum class Location : uint8_t { kGpu, kCpu, kDisk, kRemote };
std::string_view location_name(Location loc);

// One object of a transfer: a whole chunk (all layers, LMCache KV_2LTD) or one layer of a chunk.
struct KvObject {
  std::string key;     // LMCache key string (CacheEngineKey::to_string); identity in real tiers
  uint64_t bytes = 0;  // payload size in bytes
  int32_t layer = -1;  // layer index for layerwise objects, -1 for a whole chunk
  // GPU endpoints only: the paged-buffer slot of each token of the object (slot =
  // block_id * block_size + offset; a negative slot skips the token). Empty elsewhere.
  std::vector<int64_t> slots;
};

struct Transfer {
  Location src = Location::kCpu;
  Location dst = Location::kGpu;
  int32_t instance = 0;   // serving instance; links are per instance except the remote network
  std::string_view kind;  // what it is for, for reports: "retrieve", "store", "prefetch", ...
  std::vector<KvObject> objects;
  // How many times the host waits for the copy to finish before the transfer is done: LMCache's
  // store copy (from_gpu) synchronises its stream after every chunk, so the next chunk's copy
  // starts only then. A modeled transfer pays its path's fixed latency once per wait.
  uint32_t host_waits = 1;

  uint64_t total_bytes() const {
    uint64_t n = 0;
    for (const KvObject& o : objects) n += o.bytes;
    return n;
  }
};

struct TransferResult {
  SimTime start = 0;
  SimTime finish = 0;             // when the simulation sees the transfer complete
  std::vector<uint8_t> ok;        // per object: 1 = moved, 0 = fault (a miss for the caller)
  SimDuration predicted_ns = -1;  // the hardware model's duration, when one was computed
  SimDuration measured_ns = -1;   // wall-clock duration of a real copy, when one was made

  bool all_ok() const {
    for (uint8_t v : ok)
      if (!v) return false;
    return true;
  }
};

class Mover {
 public:
  using Done = std::function<void(const TransferResult&)>;
  virtual ~Mover() = default;

  // Starts `transfer` at sim.now() and schedules done(result) on the Simulator at the completion
  // time (never calls it synchronously, even for an empty or zero-time transfer).
  virtual void start(Transfer transfer, Done done) = 0;

  // The tier deleted object `key` at `loc` of `instance` (LMCache's disk eviction unlinks the
  // chunk's file). A mover that models the host's page cache drops the file's pages; others
  // ignore it (real tiers delete their own files).
  virtual void discard(Location loc, int32_t instance, std::string_view key) {
    (void)loc;
    (void)instance;
    (void)key;
  }

  // Name for reports and logs: "modeled", "real", "validating", ...
  virtual std::string_view name() const = 0;
};

}  // namespace kvtwin::sim
