// `kvtwin capacity [--scenario F] [--trace F] [--set key=value ...] [--slo-attainment A]
// [--precision P] [--probes N] [--jobs J] [--out DIR]`: the highest arrival rate a deployment
// sustains within its SLOs, found by simulating the scenario at scaled request rates.
//
// The search varies workload.rate_scale (arrival times are divided by it; every other field
// stays). A probe *holds* when
//   goodput.slo_attainment >= A   (the share of finished requests within slo.ttft_ms and
//                                  slo.tpot_ms), and
//   !load.saturated               (its queue did not grow through the run; sim/report/README.md).
//
// Rounds of N probes each (the N of a round run in parallel on J threads):
//   start    the scenario's own scale r0, alone.
//   bracket  while every probe so far holds: r0·2^k for the next N values of k; while none does:
//            r0/2^k. It ends when a holding scale lies just below a failing one (the bracket
//            lo < hi), or at the field's bounds [1e-6, 1e6] (then every, or no, scale probed
//            holds, and the report says so).
//   narrow   N scales spaced evenly in log between lo and hi; the first of them (lowest) that
//            fails becomes hi and the probe below it lo. Until hi / lo <= 1 + P.
// The probes depend on the options only (never on J), so equal inputs give equal bytes.
//
// SLO attainment need not fall monotonically as the rate rises (a burst of the trace may land
// differently): each round keeps the first failure, so the answer is conservative, and the report
// names any probe above the answer that held, or below it that failed.
//
// Outputs: a table of every probe by scale and the answer on stdout; with --out, DIR/capacity.csv
// (one row per probe, by scale; columns in sim/report/README.md), and each probe's summary.json
// and scenario.toml under DIR/points/<probe>/ (probe = the order simulated). Returns 0 whatever
// the answer; bad options are InputErrors.
#pragma once

#include <string>
#include <vector>

namespace kvtwin::sim::cli {

struct CapacityOptions {
  std::string scenario;
  std::string trace;
  std::vector<std::string> sets;
  double slo_attainment = 0.9;  // in (0, 1]
  double precision = 0.05;      // stop when hi / lo <= 1 + precision; in [0.001, 1]
  int probes = 3;               // probes per round, 1 .. 64
  int jobs = 1;
  std::string out;  // empty: stdout only
  bool quiet = false;
};

int run_capacity(const CapacityOptions& options);

}  // namespace kvtwin::sim::cli
