// `kvtwin validate`: runs transfers through the validating mover — each executed on the real
// tiers and predicted by the calibrated link models of a hardware profile — and writes the
// validation report (report.h).
//
// Driver: a transfer list (transfer_list.h), each row started at its time; or the built-in
// synthetic mix over the tiers given, run closed loop (a transfer starts when the previous one
// completes). Objects are removed, untimed, after the last transfer that names them. Or, with
// --scenario, a whole simulation run (scenario_validation.h).
//
// Timing: --timing=predicted (default) keeps the simulation deterministic — transfers complete at
// the modeled times, measured times are only recorded; --timing=measured completes each transfer
// after its measured time (execution-driven).
//
// The real tiers run with the profile's [tiers] settings (I/O mode, engine, depths), so the
// models are checked under the conditions they were fitted in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/calibrate/real_tiers.h"

namespace kvtwin::sim::validate {

struct ValidateOptions {
  // Hardware profile TOML (kvtwin calibrate): required for a transfer list or the synthetic mix;
  // with --scenario, optional and applied as hardware.profile.
  std::string profile;
  std::string disk_path;   // real disk tier directory
  std::string remote_url;  // real Redis tier
  int timeout_ms = 5000;
  std::string transfers;             // transfer list CSV; empty: the synthetic mix
  std::string scenario;              // scenario TOML: validate a simulation run instead
  std::string trace;                 // --scenario: overrides workload.trace
  std::vector<std::string> sets;     // --scenario: key=value overrides
  int64_t max_requests = 0;          // --scenario: > 0 sets workload.max_requests
  double max_duration_s = 0;         // --scenario: > 0 sets workload.max_duration_s
  std::string timing = "predicted";  // predicted | measured
  std::string out = "validate_report";
  int repeats = 2;  // synthetic mix: pairs per (tier, size, count)
  uint64_t seed = 2;
  double max_mape_pct = 0;  // > 0: exit 1 if a class's MAPE (objects >= 1 MiB) exceeds it
  bool quiet = false;
};

// Returns the exit code: 0; 1 when --max-mape is exceeded or an object came back wrong; 2 for
// bad input or configuration (one line on stderr).
int run_validate(const ValidateOptions& options);

}  // namespace kvtwin::sim::validate
