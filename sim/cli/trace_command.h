// `kvtwin trace stats FILE` and `kvtwin trace convert IN OUT`.
//
// stats: reuse statistics of a trace (sim/workload/trace_stats.h) after the scenario's workload
// transforms (rate scale, limits, synthetic prefixes); the KV bytes per token of the scenario's
// model turn the working set into GiB.
// convert: rewrites a trace in another format (native CSV or Mooncake JSONL), after the same
// transforms; OUT "-" is stdout.
#pragma once

#include <string>
#include <vector>

namespace kvtwin::sim::cli {

struct TraceStatsOptions {
  std::string file;
  std::string format = "auto";
  std::string scenario;           // empty: the embedded default (its model sizes the working set)
  std::vector<std::string> sets;  // --set key=value
  double window_s = 60;
  bool json = false;
};
int run_trace_stats(const TraceStatsOptions& options);

struct TraceConvertOptions {
  std::string input;
  std::string output;
  std::string from = "auto";
  std::string to = "native";
  std::string scenario;
  std::vector<std::string> sets;
};
int run_trace_convert(const TraceConvertOptions& options);

}  // namespace kvtwin::sim::cli
