// Shared scaffolding of the engine tests: a profile step model whose fit is exactly
// step_us = 1000 + 1 · num_new_tokens (so step times can be computed by hand), a scenario
// built from TOML text on top of it, and one run of a Cluster on an in-memory trace that keeps
// every request's record.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario.h"
#include "sim/workload/workload.h"

namespace kvtwin::sim::engine::harness {

struct RunResult {
  std::map<uint64_t, report::RequestRecord> records;  // by trace index
  report::Summary summary;
};

// Writes dir/profile.csv (the exact 1000 µs + 1 µs per token profile); returns its path.
std::string write_profile(const std::string& dir);

// Loads `toml` (which should select `[step] model = "profile"`, `profile = "profile.csv"`) as
// the scenario `name` in a fresh scratch directory holding the profile, applies `sets`
// (key=value overrides) and validates it.
scenario::Scenario profile_scenario(const std::string& toml, const std::string& name,
                                    const std::vector<std::string>& sets);

// Llama-3.1-8B geometry (128 KiB of KV per token: 32 MiB per 256-token chunk), the profile above,
// 100 GPU blocks of 16 tokens, LMCache with 256-token chunks and a 1-GiB CPU tier, PCIe 35 GB/s
// to the GPU and 50 GB/s back with 10 µs of latency; then `sets`.
scenario::Scenario lmcache_cpu_scenario(const std::string& name,
                                        const std::vector<std::string>& sets);

// Runs the scenario on `trace` (any supported format, auto-detected) to completion, through the
// workload transforms `options` (none by default).
RunResult run_cluster(const scenario::Scenario& s, const std::string& trace,
                      const workload::WorkloadOptions& options = {});

// Runs the scenario on traces/examples/mooncake_conversation_10min.jsonl through the workload
// options `kvtwin run` takes from it (rate scale, request cap, window, synthetic prefixes).
RunResult run_on_example_trace(const scenario::Scenario& s);

}  // namespace kvtwin::sim::engine::harness
