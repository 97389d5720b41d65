#include "sim/workload/spread_arrivals.h"

#include "sim/io/input_error.h"

namespace kvtwin::sim::workload {

bool SpreadArrivals::read(Entry* e) {
  if (!inner_->next(&e->request)) return false;
  e->line = inner_->line_number();
  return true;
}

bool SpreadArrivals::fill() {
  if (!started_) {
    started_ = true;
    Entry first;
    if (!read(&first)) return false;
    pending_ = std::move(first);
  }
  if (!pending_) return false;
  const SimTime t = pending_->request.arrival;
  group_.push_back(std::move(*pending_));
  pending_.reset();
  for (;;) {
    Entry e;
    if (!read(&e)) break;
    if (e.request.arrival != t) {
      pending_ = std::move(e);
      break;
    }
    if (group_.size() == max_group_)
      throw InputError(inner_->path(), e.line, inner_->time_field(),
                       "more than " + std::to_string(max_group_) +
                           " requests at one arrival time; workload.arrivals = \"spread\" "
                           "holds one such group in memory");
    group_.push_back(std::move(e));
  }
  // The gap the group spreads over: to the next recorded time, else the one before it.
  SimTime gap = 0;
  if (pending_)
    gap = pending_->request.arrival - t;
  else if (previous_time_)
    gap = t - *previous_time_;
  previous_time_ = t;
  // floor(k · gap / n) as k · q + floor(k · r / n) with gap = q · n + r: no overflow, since
  // k, r < n <= max_group_.
  const auto n = static_cast<SimTime>(group_.size());
  const SimTime q = gap / n, r = gap % n;
  for (SimTime k = 0; k < n; ++k)
    group_[static_cast<size_t>(k)].request.arrival = t + k * q + k * r / n;
  return true;
}

bool SpreadArrivals::next(TraceRequest* out) {
  if (group_.empty() && !fill()) return false;
  *out = std::move(group_.front().request);
  line_ = group_.front().line;
  group_.pop_front();
  return true;
}

}  // namespace kvtwin::sim::workload
