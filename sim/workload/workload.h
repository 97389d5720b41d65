// Workload: the request stream a simulation consumes — a trace reader plus the scenario's
// workload transforms, applied in this order per request:
//
//   0. with spread_arrivals, the requests recorded at one instant spread over the gap to the next
//      (SpreadArrivals, sim/workload/spread_arrivals.h);
//   1. arrival time divided by rate_scale (rounded to the nearest ns);
//   2. stop at max_requests, or at the first arrival at or after start_s + max_duration_s;
//   3. requests without block ids get a synthetic shared prefix when prefix_groups > 0:
//      group g ~ Zipf(prefix_zipf) over prefix_groups, drawn from the seeded stream
//      "synthetic_prefix" in request order; the first floor(min(prefix_tokens, prompt) /
//      prefix_block_size) blocks get group g's ids, the rest of the prompt stays unique;
//   4. a window: requests arriving before start_s are read and dropped (after step 3, so the
//      rest keep the groups a whole replay gives them), the others arrive start_s earlier.
//      Trace indices (and so synthesized tokens) stay those of the whole trace. A window that
//      holds no request is an input error (the trace's requests all lie outside it).
//   5. a warm-up (warmup_s > 0, at most start_s): the requests arriving in
//      [start_s - warmup_s, start_s) are kept too, flagged `warmup`, and the replay starts at
//      start_s - warmup_s instead, so the window's requests arrive from measure_from() on.
//      max_requests and the empty-window error count the window's requests only.
//
// Streaming: holds one request (with spread_arrivals, one group of equal recorded times); memory
// does not grow with the trace.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "sim/random.h"
#include "sim/workload/trace_reader.h"

namespace kvtwin::sim::workload {

// Requests that share their arrival time, counted over a stream of requests in arrival order (a
// coarse trace clock's bursts): the distinct times, the most requests at one, and the requests
// at a time that another shares.
struct ArrivalGroups {
  uint64_t instants = 0;
  uint64_t largest = 0;
  uint64_t sharing = 0;
  // The next request's arrival, never earlier than the one before.
  void add(SimTime arrival) {
    current_ = instants > 0 && arrival == time_ ? current_ + 1 : 1;
    if (current_ == 1) ++instants;
    time_ = arrival;
    largest = std::max(largest, current_);
    sharing += current_ == 2 ? 2 : (current_ > 2 ? 1 : 0);
  }

 private:
  SimTime time_ = 0;
  uint64_t current_ = 0;  // requests at time_ so far
};

struct WorkloadOptions {
  bool spread_arrivals = false;  // workload.arrivals = "spread"
  double rate_scale = 1.0;
  int64_t max_requests = 0;   // 0 = all
  double max_duration_s = 0;  // 0 = all; else the window's length from start_s
  double start_s = 0;         // window start (scaled seconds): earlier arrivals are dropped
  double warmup_s = 0;        // replayed before the window, flagged warmup (<= start_s)
  int prefix_groups = 0;
  int prefix_tokens = 0;
  double prefix_zipf = 1.0;
  int prefix_block_size = 16;
  uint64_t seed = 0;
  // Cache replay (kvtwin cache-replay): request i arrives at i · spacing_s regardless of the
  // trace's times, and generates output_tokens tokens (0 = the trace's value).
  double spacing_s = 0;
  int64_t output_tokens = 0;
};

class Workload {
 public:
  Workload(std::unique_ptr<TraceReader> reader, const WorkloadOptions& options);

  // Next request after the transforms; false at the end. Throws the reader's InputErrors, one for
  // an arrival that rate_scale pushes past kMaxTraceArrival, and one when the window holds none.
  bool next(TraceRequest* out);
  const TraceReader& reader() const { return *reader_; }
  // The arrival instants of the window's requests given so far (after every transform: a coarse
  // trace clock's bursts, or groups of 1 once spread).
  const ArrivalGroups& arrival_groups() const { return groups_; }

  // Where the window starts on the replay's clock: warmup_s, or 0 without a warm-up. With
  // spacing_s the arrivals ignore the trace's times, and the window starts at the arrival of its
  // first request instead (kSimTimeMax here).
  SimTime measure_from() const;

  // Synthetic block id of block i of group g (high bit set, so it never meets a trace's small
  // remapped ids in practice).
  static uint64_t synthetic_id(uint64_t seed, uint64_t group, uint64_t block);

 private:
  uint64_t draw_group();
  // Steps 1 and 3 on a request just read; false at the end of the window (step 2's time limit).
  bool transform(TraceRequest* out);
  // Throws the InputError of a window (start_s, max_duration_s) that holds no request.
  [[noreturn]] void no_request_in_window() const;

  std::unique_ptr<TraceReader> reader_;
  WorkloadOptions options_;
  Rng rng_;
  std::vector<double> zipf_cdf_;  // cumulative popularity of groups 0..n-1
  int64_t emitted_ = 0;           // the window's requests (not the warm-up's)
  int64_t spaced_ = 0;            // every request, for spacing_s
  ArrivalGroups groups_;          // the window's requests
  bool done_ = false;
};

}  // namespace kvtwin::sim::workload
