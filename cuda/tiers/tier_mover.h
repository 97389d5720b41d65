// TierMover: the real sim::Mover for CPU <-> disk and CPU <-> remote, on plain host buffers.
//
// Until pinned memory and GPU copies come from the CUDA path, the CPU end of a transfer is an
// ordinary 4 KiB-aligned host buffer whose content is synthesized from each object's key
// (host_buffer.h), so every byte read back is checked against what was written:
//
//   cpu -> disk    DiskTier::batched_put     disk -> cpu    DiskTier::batched_get
//   cpu -> remote  RedisTier::batched_put    remote -> cpu  RedisTier::batched_get
//
// Only the tier call is timed: content is synthesized before and checked after the clock runs.
// A transfer larger than max_buffer_bytes is moved in consecutive slices of whole objects (so a
// 100-chunk retrieve does not need 3 GiB of host memory); the measured time is the sum of the
// slices' tier calls.
//
// Per object, ok = 1 only when the tier returned kOk and (for reads) every byte matched; a read
// that the tier called kOk but whose bytes differ is counted in wrong_bytes() — the one number
// that must stay zero — and reported as a fault, never as data.
//
// Timing: charge = kMeasured schedules done at now + measured (execution-driven);
// charge = kNone schedules done at now (the caller — the validating mover — decides the time).
// The copy itself runs synchronously inside start(), on the simulation thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "cuda/tiers/disk_tier.h"
#include "cuda/tiers/redis_tier.h"
#include "sim/mover.h"
#include "sim/simulator.h"

namespace kvtwin::cuda::tiers {

struct TierMoverConfig {
  enum class Charge : uint8_t { kMeasured, kNone };
  Charge charge = Charge::kMeasured;
  uint64_t max_buffer_bytes = uint64_t{512} << 20;
};

class TierMover final : public sim::Mover {
 public:
  // disk or remote may be null when that tier is absent. REQUIRES: they outlive the mover.
  TierMover(sim::Simulator& sim, DiskTier* disk, RedisTier* remote, TierMoverConfig config = {});

  // REQUIRES: handles(transfer.src, transfer.dst).
  void start(sim::Transfer transfer, Done done) override;
  std::string_view name() const override { return "real"; }

  // Performs the transfer now and returns its result: start = finish = the simulator's now(),
  // measured_ns = wall-clock time of the tier calls, predicted_ns = -1.
  sim::TransferResult execute(const sim::Transfer& transfer);

  bool handles(sim::Location src, sim::Location dst) const;
  uint64_t wrong_bytes() const { return wrong_bytes_; }

 private:
  sim::SimDuration move_slice(const sim::Transfer& t, size_t begin, size_t end, uint8_t* ok);

  sim::Simulator& sim_;
  DiskTier* disk_;
  RedisTier* remote_;
  TierMoverConfig config_;
  uint64_t wrong_bytes_ = 0;
};

}  // namespace kvtwin::cuda::tiers
