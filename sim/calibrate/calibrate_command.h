// `kvtwin calibrate`: measures this machine's links through the real tiers and writes a hardware
// profile (hardware_profile.h) that scenarios can include and `kvtwin validate` checks.
//
// For each tier given (a disk directory, a Redis URL), for object sizes 64 KiB .. 32 MiB, object
// counts 1 .. 16 per transfer and queue depths {1, 4, configured}: a store transfer then a
// retrieve of the same objects, through the same real mover validate uses (TierMover), in a
// seeded shuffled order; each measured transfer is one sample. The disk is also measured in the
// other I/O mode (O_DIRECT vs buffered) at the configured depth, for comparison. Pinned H2D/D2H
// need a GPU: kvtwin_pcie_calibrate (cuda/tools/) measures them through CudaMover and writes the
// same samples CSV, classes pcie_h2d / pcie_d2h; `--refit` of that file fits them here and
// writes the profile's pcie_* keys (reported as not measured otherwise).
//
// Fits one LinkModel per transfer class (fit.h), prints the figures and the fits, and writes the
// profile. The objects it writes are removed afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/calibrate/real_tiers.h"

namespace kvtwin::sim::calibrate {

struct CalibrateOptions {
  RealTierOptions tiers;
  std::string out = "hardware_profile.toml";
  std::string samples_csv;  // optional: every measured transfer
  std::string refit;        // fit the samples of an earlier --samples file, measure nothing
  bool quick = false;       // fewer sizes, counts and depths (about a quarter of the time)
  std::vector<uint64_t> object_bytes;   // replaces the default object sizes when given
  std::vector<uint32_t> object_counts;  // replaces the default objects per transfer when given
  bool compare_modes = true;            // also measure the other disk I/O mode
  int repeats = 3;                      // per point; the fit uses each point's median
  uint64_t seed = 1;
};

// Returns the exit code: 0, or 2 with one line on stderr for a bad configuration.
int run_calibrate(const CalibrateOptions& options);

}  // namespace kvtwin::sim::calibrate
