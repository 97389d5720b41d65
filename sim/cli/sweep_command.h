// `kvtwin sweep --scenario F --vary key=v1,v2,... [--vary ...] --jobs N [--out DIR]`: the
// cartesian grid of scenario overrides (sim/cli/grid.h; an axis may set keys together), each
// point a full simulation, run in parallel threads (one simulation per thread, each
// deterministic), reported as one table in grid order (the first --vary is the outermost loop;
// its last column names the point's busiest link) and, with --out, as DIR/sweep.csv,
// DIR/points/<i>/summary.json and SVG plots of hit rate, TTFT and throughput against the first
// varied key (one line per combination of the others). sweep.csv has, per point, the varied
// values, the request counts (total, finished, rejected, failed), hit rates, latencies,
// throughputs, goodput, preemptions, the share of prompt tokens whose KV load failed, and what
// the point needed: peak KV usage, each LMCache tier's peak and its links' busy fractions
// (sim/report/README.md lists every column).
#pragma once

#include <string>
#include <vector>

namespace kvtwin::sim::cli {

struct SweepOptions {
  std::string scenario;
  std::string trace;
  std::vector<std::string> sets;
  std::vector<std::string> vary;  // "key=v1,v2,..."
  int jobs = 1;
  std::string out;  // empty: table only
  bool quiet = false;
};

int run_sweep(const SweepOptions& options);

}  // namespace kvtwin::sim::cli
