// Reuse statistics of a trace (`kvtwin trace stats`): sizes, arrival rate, and the prefix reuse
// an infinite cache would see.
//
// Prefix reuse ratio: walk requests in order; for each, count its leading block ids already
// seen in any earlier request (first miss stops the match), then remember all its ids. Because
// ids are chained, that is the hit rate of a cache that never evicts, at the trace's block size.
// Working set: the tokens of distinct block ids plus every prompt token no id covers (a
// request's tokens past its ids, e.g. after a synthetic prefix, are its own), all time and
// within the busiest aligned window (the one with the most distinct ids).
//
// Memory grows with distinct block ids and requests (the tool's purpose is the whole trace), not
// with tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/workload/workload.h"

namespace kvtwin::sim::workload {

struct Percentiles {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

struct TraceStats {
  uint64_t requests = 0;
  SimTime first_arrival = 0;
  SimTime last_arrival = 0;
  // Recorded instants: distinct arrival times, the most requests at one, and the requests that
  // share their arrival time with another (a coarse clock's bursts; workload.arrivals).
  uint64_t arrival_instants = 0;
  uint64_t largest_arrival_group = 0;
  uint64_t requests_sharing_an_arrival = 0;
  Percentiles prompt_tokens;
  Percentiles output_tokens;
  uint64_t total_prompt_tokens = 0;
  uint64_t total_output_tokens = 0;
  uint64_t sessions = 0;  // distinct session ids
  // Prefix information.
  uint64_t requests_with_ids = 0;
  int32_t block_size = 0;  // of the first request with ids (0: none)
  uint64_t block_refs = 0;
  uint64_t unique_blocks = 0;
  uint64_t unique_block_tokens = 0;  // tokens covered by distinct ids (partial blocks counted)
  uint64_t uncovered_tokens = 0;     // prompt tokens no id covers (unique to their request)
  uint64_t prefix_hit_blocks = 0;
  uint64_t prefix_hit_tokens = 0;
  uint64_t tokens_with_ids = 0;  // prompt tokens of requests that carry ids
  double window_s = 0;           // window of the next field
  uint64_t max_window_unique_blocks = 0;
  uint64_t max_window_tokens = 0;  // tokens of those blocks and the window's uncovered tokens
  double max_window_start_s = 0;   // where that window starts (workload.start_s replays it)

  uint64_t working_set_tokens() const { return unique_block_tokens + uncovered_tokens; }
};

// Reads the whole workload. `window_s` > 0 sets the working-set window.
TraceStats compute_trace_stats(Workload* workload, double window_s);

// Human-readable report; `kv_bytes_per_token` > 0 adds the working set in bytes.
std::string format_trace_stats(const TraceStats& s, const std::string& name,
                               double kv_bytes_per_token);

// Percentiles of a sample. Nearest rank: the ceil(q·n)-th smallest value. Linear:
// numpy.percentile's default (as vllm bench serve reports): the virtual index q·(n − 1) blended
// between its two neighbours as numpy's _lerp does (from the upper one when the fraction is at
// least 1/2), so the result matches numpy to the last bit. Sorts *values.
enum class PercentileMethod { kNearestRank, kLinear };
Percentiles percentiles(std::vector<double>* values,
                        PercentileMethod method = PercentileMethod::kNearestRank);

}  // namespace kvtwin::sim::workload
