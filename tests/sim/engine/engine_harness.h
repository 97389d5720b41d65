// Shared scaffolding of the engine tests: a profile step model whose fit is exactly
// step_us = 1000 + 1 · num_new_tokens (so step times can be computed by hand), a scenario
// built from TOML text on top of it, and one run of a Cluster on an in-memory trace that keeps
// every request's record.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/engine/cluster.h"
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
// workload transforms `options` (none by default); `movers`, when given, supplies each instance's
// Mover (Cluster::MoverFactory); `out_dir`, when given, receives the run directory's files.
RunResult run_cluster(const scenario::Scenario& s, const std::string& trace,
                      const workload::WorkloadOptions& options = {},
                      const Cluster::MoverFactory& movers = {}, const std::string& out_dir = "");

// Runs the scenario on traces/examples/mooncake_conversation_10min.jsonl through the workload
// options `kvtwin run` takes from it (rate scale, request cap, window, synthetic prefixes).
RunResult run_on_example_trace(const scenario::Scenario& s);

// Runs the scenario on its own workload.trace (relative to its file; the embedded default trace
// when none) through the same workload options, as `kvtwin run --scenario` does.
RunResult run_on_scenario_trace(const scenario::Scenario& s);

// What the engine must compute for r's requests when none was preempted and no load failed:
// each served prompt's tokens that neither vLLM's prefix cache nor LMCache held, then one decode
// token per output token after the first (the prefill's last position samples the first).
int64_t tokens_the_requests_need(const RunResult& r);

// The tokens a request admitted once loads from LMCache's tiers: whole `chunk`-token chunks from
// the one holding vLLM's last hit token on. With vLLM's hit g and LMCache's hit h beyond it (of a
// p-token prompt): g + h, plus the last token when the hit was the whole prompt (vLLM recomputes
// it, LMCache loads it), less g rounded down to the chunk; nothing without an LMCache hit.
// LMCache holds full chunks only (save_unfull_chunk off), so a hit ending at p - 1 was the whole
// prompt exactly when p is a multiple of the chunk.
int64_t whole_chunk_load(const report::RequestRecord& rec, int64_t chunk);

}  // namespace kvtwin::sim::engine::harness
