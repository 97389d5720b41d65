// EngineRequest: one request inside a simulated serving instance — vLLM's Request (tokens, block
// hashes, computed tokens; model/vllm) plus the scheduler's status and the metrics the run
// reports. Owned by the Cluster from arrival to completion; the scheduler and the KV connector
// hold raw pointers while it is live.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/vllm/request.h"
#include "sim/report/run_recorder.h"
#include "sim/time.h"

namespace kvtwin::sim::engine {

// vLLM's RequestStatus, reduced to what the scheduler distinguishes.
enum class RequestStatus { kWaiting, kWaitingForRemoteKvs, kRunning, kPreempted, kFinished };

struct EngineRequest {
  std::unique_ptr<model::vllm::Request> req;
  RequestStatus status = RequestStatus::kWaiting;
  int instance = 0;
  int64_t num_cached_tokens = -1;  // tokens computed at first schedule (local + external hits)
  int64_t num_external_computed_tokens = 0;
  int64_t num_encoder_tokens = 0;  // encoder input (encoder-decoder models)
  int64_t priority = 0;            // vLLM's request priority (the trace's; lower runs first)
  // Async scheduling: tokens scheduled but not yet sampled (upstream's num_output_placeholders).
  int64_t num_output_placeholders = 0;
  // Async scheduling: batches in flight that hold this request. A request that leaves while one
  // does (a failed load's error, a rejection) is reported done only after the last has ended.
  int in_flight_batches = 0;
  bool done_deferred = false;
  SimTime last_token = -1;
  // The gaps between its consecutive tokens so far, for the run's ITL figures (kept until the
  // request ends: only a finished request's count; none for a warm-up request).
  std::vector<SimDuration> itl;
  report::RequestRecord record;
  // The instance's connector may keep its per-request state here (it sets and clears it) to spare
  // a look-up by request id per scheduled request and step. Opaque to everyone else.
  mutable void* connector_state = nullptr;

  const std::string& id() const { return req->request_id(); }
  bool finished() const { return status == RequestStatus::kFinished; }
};

}  // namespace kvtwin::sim::engine
