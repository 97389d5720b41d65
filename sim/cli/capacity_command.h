// `kvtwin capacity [--for KEY] [--most | --least] [--scenario F] [--trace F]
// [--set key=value ...] [--vary key=v1,v2,... ...] [--slo-attainment A] [--precision P]
// [--probes N] [--jobs J] [--out DIR]`: how much load a
// deployment takes within its SLOs, or how much of a resource a load needs, found by simulating
// the scenario at probed values of one numeric key.
//
// KEY is workload.rate_scale by default (arrival times are divided by it): the search finds the
// most that holds. Any other numeric key is taken as a resource, more of which helps
// (cluster.instances, vllm.num_gpu_blocks, a tier's size, a link's speed): it finds the least
// that holds. --most turns that round for a key more of which hurts (a link's latency, the step
// overhead, the remote GET failure rate, the model's size): the most that still holds, the
// search the rate gets. --least is the other way. A least search of another key whose verdict
// never changed to the key's bound (every value held, or none) says that --most may be the
// question. A price (cost.*) is refused: it changes no run. Every other field stays the
// scenario's. A probe *holds* when
//   window_attainment >= A   (the share of the window's requests that finished within
//                             slo.ttft_ms and slo.tpot_ms: a rejected or a failed request is a
//                             miss), and
//   !load.saturated          (its queue did not grow through the run; sim/report/README.md).
// goodput.slo_attainment counts finished requests only, so a search judged by it alone answered
// a GPU pool of 58 blocks, which rejected 1,745 of the default scenario's 1,750 requests at half
// its rate, and for a 97 % target a remote GET failure rate of 0.64, at which 5 % failed.
//
// Rounds of N probes each (the N of a round run in parallel on J threads):
//   start    the scenario's own value x0 (which must be above 0), alone.
//   bracket  away from x0's side: while it holds, x0·2^k for a most search (x0/2^k for a least
//            one, the floor for an integer key), the next N values of k a round; while it fails,
//            the other way. It ends at the first probe whose verdict differs from x0's (then a
//            holding value `ok` and a failing one `bad` are neighbours among the probes), or at
//            the key's bounds (then every, or no, value probed holds, and the report says so).
//            A number key halved 20 times (to a millionth of x0) is next probed at its lower
//            bound itself, when the scenario accepts that value: a disk size that holds
//            everywhere ends at 0 rather than halving toward it for ever. A step past either
//            bound probes the bound itself, when accepted (a failure rate doubled from 0.64
//            ends at 1).
//   narrow   N values spaced evenly in log from ok toward bad; the first of them that fails
//            becomes bad and the one before it ok. Until max/min of the two <= 1 + P, or no
//            value lies between them (an integer key's neighbours).
// Values are rounded as probed (integers; else 5 significant digits), and the probes depend on
// the options only (never on J), so equal inputs give equal bytes.
//
// workload.start_s and max_duration_s are in scaled time, so with a window each rate probed
// replays another part of the trace; the report says so (workload.max_requests keeps the same
// requests at every rate).
//
// The verdict need not change monotonically along the key (a burst of the trace may land
// differently): each round keeps the first failure, so the answer is conservative, and the report
// names any probe beyond `bad` that held, or before `ok` that failed.
//
// A value the scenario's validation refuses (a tensor-parallel size that does not divide the
// heads, a CPU pool below one byte), or with which vLLM would not start (a max_model_len whose one
// request the KV cache cannot hold), is never probed. Bracketing stops at it, after probing the
// accepted value nearest it (found by halving the interval on acceptance alone, to within 1 + P,
// or to integer neighbours), so the answer is either found below the limit or is "the scenario's
// limit" itself; narrowing skips refused values (for an integer key whose log-spaced candidates
// are all refused, it tries the accepted integers between); and a note gives the values and the
// refusal's reason.
//
// Bracketing upward also stops when a doubling gives the same run as the value before it (every
// figure equal: more instances than the trace keeps busy, more requests than it holds): the
// answer is then at "where the key stopped changing the run", and a note names the two values.
// Downward it never does: runs that more of a key leaves alike can differ with less.
//
// Outputs: a table of every probe by value and the answer on stdout; with --out, DIR/capacity.csv
// (one row per probe, by value; columns in sim/report/README.md), and each probe's summary.json
// and scenario.toml under DIR/points/<probe>/ (probe = the order simulated). A note names a
// search in which every probe rejected more than 1 - A of its requests (prompts over
// max_model_len: no value of the key could hold), and otherwise a search over the rate in which
// no value held while the trace's largest arrival group (requests at one instant, which no
// rate_scale separates) is report::kBurstHint or more. A note also says when, at the holding
// value, more than half of the finished requests were still in the system at the last arrival
// (load.in_system_at_last_arrival): the window was one burst, too short to show a sustained rate.
//
// --vary (sweep's grid, sim/cli/grid.h; never the key searched) runs one such search per point
// of the grid, each exactly the search that --set of the point's values runs alone: the frontier
// of KEY along the varied keys (the least instances at each CPU-tier size, the most rate at each
// router). Points run side by side on min(J, points) threads, each search's rounds on
// J / that many; the progress bar follows each point's search probe by probe. The screen gives
// one row per point (its answer and the holding probe's figures) and the notes by point; with
// --out, DIR/frontier.csv (one row per point; columns in sim/report/README.md),
// plots/frontier.svg (the answer, and the offered rate or for another key the hit rate there,
// against the first varied key, one line per combination of the others) and each point's own
// outputs under DIR/points/<point>/.
//
// With prices in the scenario ([cost]; sim/report/cost.h) the holding probe's cost is in every
// CSV and on the screen, and --vary names the cheapest point: for another key than the rate (each
// point at its scenario's rate) the least per hour, for the rate the least per thousand requests
// within the SLOs at the rate found (a first point on a tie); the plot gains that figure. Returns 0
// whatever the answer; bad options are InputErrors.
#pragma once

#include <string>
#include <vector>

namespace kvtwin::sim::cli {

struct CapacityOptions {
  std::string key = "workload.rate_scale";  // --for
  bool most = false;   // --most: the most of the key that holds (the rate's default)
  bool least = false;  // --least: the least that holds (every other key's default)
  std::string scenario;
  std::string trace;
  std::vector<std::string> sets;
  std::vector<std::string> vary;  // --vary "key=v1,v2,...": one search per grid point
  double slo_attainment = 0.9;    // in (0, 1]
  double precision = 0.05;        // stop when hi / lo <= 1 + precision; in [0.001, 1]
  int probes = 3;                 // probes per round, 1 .. 64
  int jobs = 1;
  std::string out;  // empty: stdout only
  bool quiet = false;
};

int run_capacity(const CapacityOptions& options);

}  // namespace kvtwin::sim::cli
