// `kvtwin validate --scenario F`: a whole simulation run whose disk and remote transfers are also
// executed on the real tiers.
//
// The run is `kvtwin run` of the same scenario and slice with the connectors' Mover replaced by
// a ValidatingMover over (the simulator's own modeled mover, the real TierMover):
//   cpu <-> disk, cpu <-> remote  executed for real and predicted; one sample each
//   gpu <-> cpu                   modeled only: the real tiers have no GPU path (counted, and said
//                                 so in the report)
// With --timing=predicted the run directory is byte-identical to `kvtwin run`'s (the measured
// times and real faults are only recorded); --timing=measured completes each validated transfer
// after its measured time, and a load's read that the real tier failed is a miss
// (LmcacheConnector: a load error from that chunk on).
//
// The simulator names its objects for bookkeeping ("write", "fetched chunks": one object per
// disk write, per batched remote put, per fetch of several chunks), so RealObjects gives the
// real tiers keys and chunk-sized objects (C bytes: lmcache.chunk_size tokens of every rank, as
// LMCache stores them, one key per chunk) of the same total size, the last one shorter when the
// total is not a multiple of C:
//   a store (cpu -> tier) writes its pieces under fresh keys "<tag>/put/<n>";
//   a fetch (tier -> cpu) reads its pieces from keys "<tag>/get/<tier>/<size>/<j>", written
//   once, untimed, the first time they are needed.
// Every object is removed from the tiers after the run.
//
// Outputs under --out: the validation report (report.h) and run/, the run directory; with a
// hardware profile also link_models/, the same real transfers against the profile's full link
// models (each transfer alone on its link, as the real tiers ran it) rather than the simulator's
// latency + bandwidth links.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cuda/tiers/tier_mover.h"
#include "sim/mover.h"

namespace kvtwin::sim::validate {

struct ValidateOptions;

class RealObjects {
 public:
  // REQUIRES: `tiers` outlives this object; chunk_bytes > 0.
  RealObjects(std::string tag, cuda::tiers::TierMover* tiers, uint64_t chunk_bytes);

  // The transfer the real tiers execute for a simulated cpu <-> disk / remote transfer; stages
  // the objects a fetch reads (untimed) when they do not exist yet.
  Transfer map(const Transfer& simulated);

  // Every key written (stores and staged objects), in the order written.
  const std::vector<std::string>& keys() const { return keys_; }
  uint64_t staging_failures() const { return staging_failures_; }

 private:
  std::string tag_;
  cuda::tiers::TierMover* tiers_;
  uint64_t chunk_bytes_;
  uint64_t puts_ = 0;
  std::set<std::string> staged_;
  std::vector<std::string> keys_;
  uint64_t staging_failures_ = 0;
};

// Returns the exit code (as run_validate).
int run_scenario_validation(const ValidateOptions& options);

}  // namespace kvtwin::sim::validate
