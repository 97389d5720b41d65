// When LMCache's blocking remote read gives up (RemoteBackend.batched_get_blocking, f4261ef6).
//
// For Redis, which has no batched get, upstream submits one GET future per key at once and then
// waits for them in key order, each with future.result(blocking_timeout_secs): the wait for key i
// starts when key i-1's result returned (key 0's at the submission). The first wait that runs
// out fails that key; the later futures are cancelled and their keys fail too, so the retrieve
// keeps the keys before it and vLLM recomputes the rest.
//
//   returned_0 = start
//   key i times out  iff  finish_i - returned_i > timeout
//   returned_{i+1} = max(returned_i, finish_i)
//
// kvtwin does not model that outcome (its LMCache model decides what a retrieve loads when the
// step starts, before the links have charged the GETs' time); the connector counts the fetches
// it would have cut short (LmcacheTierStats::blocking_get_timeouts).
#pragma once

#include <cstddef>
#include <span>

#include "sim/time.h"

namespace kvtwin::sim::engine {

// The index of the first key whose GET, finishing at finish[i], upstream's wait gives up on, or
// finish.size() when every wait is within `timeout`.
inline size_t first_blocking_get_timeout(SimTime start, std::span<const SimTime> finish,
                                         SimDuration timeout) {
  SimTime returned = start;
  for (size_t i = 0; i < finish.size(); ++i) {
    if (finish[i] - returned > timeout) return i;
    if (finish[i] > returned) returned = finish[i];
  }
  return finish.size();
}

}  // namespace kvtwin::sim::engine
