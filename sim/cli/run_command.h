// `kvtwin run [--scenario F] [--trace F] [--out DIR] [--set key=value ...]`: simulates one
// scenario and writes its run directory (see sim/report/run_recorder.h); with no arguments it
// runs the embedded default scenario on the embedded default trace. Prints the one-screen
// summary on stdout unless --quiet.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/engine/cluster.h"
#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario.h"

namespace kvtwin::sim::cli {

struct RunOptions {
  std::string scenario;  // empty: the embedded default
  std::string trace;     // overrides workload.trace (relative to the working directory)
  std::string out;       // empty: runs/<run.name>
  std::vector<std::string> sets;
  bool quiet = false;
  bool no_outputs = false;  // summary only, no run directory (sweeps)
};

int run_run(const RunOptions& options);

// Simulates `s` and returns its summary; writes the run directory when `out_dir` is non-empty.
// !quiet: a progress bar ("kvtwin run") on a terminal. `movers`, when given, supplies the
// transfer implementation (engine::Cluster::MoverFactory; kvtwin validate). `on_fraction`, when
// given, is told now and then what share of the workload's requests is done (in [0, 1]), for a
// caller's own bar (sweeps).
report::Summary simulate(const scenario::Scenario& s, const std::string& trace_override,
                         const std::string& out_dir, bool quiet, double* wall_s,
                         const engine::Cluster::MoverFactory& movers = {},
                         const std::function<void(double)>& on_fraction = {});

}  // namespace kvtwin::sim::cli
