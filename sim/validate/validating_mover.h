// ValidatingMover: the "validating" sim::Mover. Every transfer is executed for real and predicted
// by the model; the pair (predicted, measured) is recorded for the validation report and for
// calibration.
//
//   start(t) --> real.start(t)    executes now, reports at once (finish == start, measured_ns)
//            \-> modeled.start(t) reports at the modeled completion time (predicted_ns)
//   done(result) fires with both durations:
//     Timing::kPredicted  at the modeled completion time, with the modeled per-object ok flags
//                         (the simulation stays deterministic: measured times and real faults
//                         are recorded, never fed back)
//     Timing::kMeasured   at start + measured, with the real per-object ok flags
//                         (execution-driven timing, --timing=measured)
//
// The real mover should report each transfer at its start time with measured_ns set (TierMover
// with Charge::kNone does): then kPredicted runs are deterministic. A real mover that reports
// later (at start + measured, as CudaMover does) still works, but under kPredicted a transfer
// whose measured time exceeds its prediction completes when the real result arrives, not at the
// modeled time. The modeled mover's predicted duration is its result's predicted_ns when set,
// otherwise finish - start (queueing on a busy link included).
//
// Threading: the simulation thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/mover.h"
#include "sim/simulator.h"

namespace kvtwin::sim::validate {

enum class Timing : uint8_t { kPredicted, kMeasured };

// One executed transfer.
struct TransferSample {
  Location src = Location::kCpu;
  Location dst = Location::kCpu;
  std::string kind;
  uint64_t num_objects = 0;
  uint64_t bytes = 0;
  uint64_t num_failed = 0;  // objects the real tier could not move
  SimTime start = 0;
  SimDuration predicted_ns = 0;
  SimDuration measured_ns = 0;
};

class ValidatingMover final : public Mover {
 public:
  ValidatingMover(Simulator& sim, Mover& modeled, Mover& real, Timing timing);

  // Limits validation to the links `real` can execute (e.g. TierMover::handles): any other
  // transfer goes to the modeled mover alone and is not sampled. Without it every transfer is
  // validated. (A simulation run moves GPU <-> CPU chunks too, which a storage-only real mover
  // cannot execute.)
  void set_validated_links(std::function<bool(Location src, Location dst)> validated) {
    validated_ = std::move(validated);
  }
  uint64_t num_passed_through() const { return passed_through_; }

  // Maps a validated transfer to the one `real` executes (e.g. the simulator's placeholder
  // objects to real keys and chunk-sized objects of the same total size); the sample records the
  // real transfer's object count. The modeled mover always sees the transfer unchanged.
  void set_real_transfer(std::function<Transfer(const Transfer&)> to_real) {
    to_real_ = std::move(to_real);
  }

  void start(Transfer transfer, Done done) override;
  // The modeled mover's page cache follows the run (real tiers delete their own files).
  void discard(Location loc, int32_t instance, std::string_view key) override {
    modeled_.discard(loc, instance, key);
  }
  std::string_view name() const override { return "validating"; }

  // Samples in completion order of both halves (deterministic for kPredicted).
  const std::vector<TransferSample>& samples() const { return samples_; }
  size_t num_in_flight() const { return in_flight_; }

 private:
  struct Pending;
  void maybe_finish(const std::shared_ptr<Pending>& p);

  Simulator& sim_;
  Mover& modeled_;
  Mover& real_;
  Timing timing_;
  std::function<bool(Location, Location)> validated_;
  std::function<Transfer(const Transfer&)> to_real_;
  std::vector<TransferSample> samples_;
  size_t in_flight_ = 0;
  uint64_t passed_through_ = 0;
};

}  // namespace kvtwin::sim::validate
