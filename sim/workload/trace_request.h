// TraceRequest: one request of a workload trace, as every reader hands it to the simulator.
//
// Prefix information is carried as chained block ids (Mooncake's `hash_ids` convention): entry i
// covers prompt tokens [i*block_size, (i+1)*block_size) and commits to every token before it, so
// two requests with equal ids at position i share their first (i+1)*block_size tokens (the last
// block may be partial). Ids are opaque 64-bit values and are never narrowed: distinct ids must
// stay distinct (Dynamo PR #12046 merged prefixes by truncating them to 32 bits).
//
// Invariants (checked by the readers, which throw InputError otherwise):
//   prompt_tokens >= 1, output_tokens >= 1;
//   block_ids.empty() == (block_size == 0);
//   block_ids.size() <= ceil(prompt_tokens / block_size)   (uncovered tokens are request-unique).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/time.h"

namespace kvtwin::sim::workload {

struct TraceRequest {
  uint64_t index = 0;   // 0-based position in the trace (request order)
  SimTime arrival = 0;  // ns since the trace's time origin (first row of Azure; 0 otherwise)
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  bool has_session = false;
  uint64_t session_id = 0;  // conversation / session, when the trace has one
  int32_t block_size = 0;   // tokens per block id (0 when the trace carries none)
  std::vector<uint64_t> block_ids;
  // vLLM's request priority (lower runs first under vllm.scheduling_policy = "priority"; the
  // FCFS policy ignores it; LMCache's priority_limit skips saving above it). 0 when absent.
  int64_t priority = 0;
  // Replayed before the window to fill the caches, and left out of every report (Workload's
  // warmup_s).
  bool warmup = false;
};

}  // namespace kvtwin::sim::workload
