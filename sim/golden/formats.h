// The op-log formats `kvtwin golden` knows, keyed by the header's "format" value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/golden/replay.h"

namespace kvtwin::sim::golden {

// Speed of the model alone (`kvtwin golden --bench`): loads the whole op-log into memory, then
// executes it `repeat` times without comparison and reports the best run.
struct BenchResult {
  uint64_t num_ops = 0;
  double seconds = 0;      // wall time
  double cpu_seconds = 0;  // CPU time of the executing thread (less sensitive to a busy machine)
  std::string by_op;       // optional: time per op kind, one line per kind, from an extra run
};
using BenchFn = BenchResult (*)(const std::string& path, int repeat);

struct GoldenFormat {
  std::string_view name;  // header "format"
  int version;            // header "format_version"
  ReplayFn replay;
  BenchFn bench = nullptr;  // optional
};

const std::vector<GoldenFormat>& golden_formats();

}  // namespace kvtwin::sim::golden
