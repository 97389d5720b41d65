// SpreadArrivals: a trace reader over another that spreads the requests recorded at one instant
// over the gap to the next recorded instant (workload.arrivals = "spread").
//
// A trace with a coarse clock records bursts that never were: the Mooncake conversation trace's
// 12,031 requests share 1,180 timestamps, whole seconds apart, up to 28 at one. Replayed as
// recorded, each such group arrives at once and queues behind itself at any rate_scale. Spread,
// the n requests of a group at time t, the next recorded time being t', arrive at
//
//     t + floor(k · (t' − t) / n)   ns,   k = 0 .. n − 1 in file order,
//
// so the group keeps its count and its place, and arrival order is the file's. The last group
// has no t': it spreads over the gap before it (t − t_prev), and stays at t when the trace has a
// single recorded time. A group of one is unchanged.
//
// Memory: one group and the request after it; a group of more than `max_group` requests
// (kMaxGroup unless a test says otherwise) is an InputError at its first request past the limit.
// Errors name the line of the request they concern; line_number() is that of the request last
// returned.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "sim/workload/trace_reader.h"

namespace kvtwin::sim::workload {

class SpreadArrivals : public TraceReader {
 public:
  static constexpr size_t kMaxGroup = 1 << 20;

  explicit SpreadArrivals(std::unique_ptr<TraceReader> inner, size_t max_group = kMaxGroup)
      : inner_(std::move(inner)), max_group_(max_group) {}

  bool next(TraceRequest* out) override;
  TraceFormat format() const override { return inner_->format(); }
  const std::string& path() const override { return inner_->path(); }
  uint64_t line_number() const override { return line_; }
  const char* time_field() const override { return inner_->time_field(); }

 private:
  struct Entry {
    TraceRequest request;
    uint64_t line = 0;
  };
  // Reads the next group (the pending request and those at its time) into group_ and spreads it.
  bool fill();
  bool read(Entry* e);

  std::unique_ptr<TraceReader> inner_;
  const size_t max_group_;
  std::deque<Entry> group_;
  std::optional<Entry> pending_;          // the first request of the next group
  std::optional<SimTime> previous_time_;  // the recorded time of the group before
  bool started_ = false;
  uint64_t line_ = 0;
};

}  // namespace kvtwin::sim::workload
