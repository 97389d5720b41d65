// `kvtwin cache-replay`: the cache layers alone, in request order, without timing — the hit rate
// against capacity that planners ask first.
//
// Each request is served alone and completely before the next one arrives: vLLM's prefix cache
// (get_computed_blocks, allocate_slots, cache, free: the same model/vllm code as `kvtwin run`),
// then LMCache's lookup, retrieve of the hit chunks and store of the prompt through the same
// connector, every disk / remote write finished before the next request. A prompt runs in the
// steps the scenario's token budget gives it (LMCache stores per step, so the split matters).
// Only prompts are cached: each request generates one token (outputs are not part of any
// trace's prefix ids). One instance (cluster.instances is ignored).
//
// Hit rates divide by every request's prompt tokens. A request that cannot fit the pool even when
// nothing else holds a block (a GPU tier smaller than its prompt) is rejected, with no hits, and
// counted in the table's `rejected` column: it caches nothing, so a small tier that rejects many
// long prompts can show a higher hit rate on the rest than a larger one. LMCache's hit rate is
// what its lookups found; the `failed` column is the share of prompt tokens whose load failed
// and was recomputed (e.g. a disk retrieve that needs more CPU memory than the CPU tier has,
// which upstream would wait for forever), so that hits minus failed is what was served.
//
// The capacity of one tier varies over --capacity-gb (per rank, GiB): gpu sets vllm.num_gpu_blocks
// to that many bytes of KV blocks, cpu / disk set lmcache.max_local_{cpu,disk}_size_gb. The
// points run in parallel (--jobs), each deterministic; the table is printed in input order.
#pragma once

#include <string>
#include <vector>

#include "sim/report/run_recorder.h"

namespace kvtwin::sim::cli {

struct CacheReplayOptions {
  std::string scenario;
  std::string trace;
  std::vector<std::string> sets;
  std::string tier = "gpu";  // gpu | cpu | disk
  std::vector<double> capacity_gb;
  int jobs = 1;
  std::string csv;  // also write the table as CSV here
  bool quiet = false;
};

struct CacheReplayPoint {
  double capacity_gb = 0;
  // Tokens the tier holds: GPU as vLLM logs its "GPU KV cache size" (the blocks over the KV
  // cache groups, times the smallest block size); CPU and disk: GiB over the KV bytes per token.
  int64_t capacity_tokens = 0;
  report::Summary summary;
};
// The values of --capacity-gb as given on the command line (each argument a comma-separated
// list): each a finite number of GiB in (0, 1e9]. Throws InputError naming the bad item.
std::vector<double> parse_capacities_gb(const std::vector<std::string>& items);

// The replays behind run_cache_replay, one per capacity, in input order.
std::vector<CacheReplayPoint> cache_replay(const CacheReplayOptions& options);

int run_cache_replay(const CacheReplayOptions& options);

}  // namespace kvtwin::sim::cli
