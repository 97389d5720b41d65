// The "vllm-kv-golden" format (version 1) of `kvtwin golden`: vLLM v0.17.0 KV-cache manager
// op-logs (../shared/golden/README.md §4).
//
//   replay_vllm_kv_golden  streams the log (read, gunzip, parse, execute, compare op by op) and
//                          returns the verdict; memory stays bounded by one line plus the model.
//   preparse_vllm_log +    load every op into memory first, then execute them without
//   execute_vllm_log       comparison: the speed of the model alone, hashing included.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/golden/formats.h"
#include "sim/golden/replay.h"
#include "sim/golden/vllm_ops.h"
#include "sim/golden/vllm_replayer.h"

namespace kvtwin::sim::golden {

inline constexpr std::string_view kVllmGoldenFormat = "vllm-kv-golden";
inline constexpr int kVllmGoldenVersion = 1;

CaseOutcome replay_vllm_kv_golden(io::LineReader& reader, std::string_view header_line,
                                  const ReplayOptions& options);

struct VllmPreparsedLog {
  std::string path;
  std::string case_name;
  VllmReplayConfig config;
  VllmOpArena arena;
  std::vector<VllmOp> ops;
};

// Reads and parses the whole op-log (footer verified). Throws InputError on bad input.
VllmPreparsedLog preparse_vllm_log(const std::string& path);

// Executes every op on a fresh manager, without comparison; returns the number of ops.
uint64_t execute_vllm_log(const VllmPreparsedLog& log);

// BenchFn of the format: preparses once, executes `repeat` times, returns the best run.
BenchResult bench_vllm_kv_golden(const std::string& path, int repeat);

}  // namespace kvtwin::sim::golden
