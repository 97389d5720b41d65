#include "sim/workload/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/io/input_error.h"
#include "sim/workload/spread_arrivals.h"

namespace kvtwin::sim::workload {

Workload::Workload(std::unique_ptr<TraceReader> reader, const WorkloadOptions& options)
    : reader_(std::move(reader)), options_(options), rng_(options.seed, "synthetic_prefix") {
  if (options_.spread_arrivals) reader_ = std::make_unique<SpreadArrivals>(std::move(reader_));
  if (options_.prefix_groups > 0) {
    zipf_cdf_.resize(static_cast<size_t>(options_.prefix_groups));
    double sum = 0;
    for (int g = 0; g < options_.prefix_groups; ++g) {
      sum += 1.0 / std::pow(static_cast<double>(g + 1), options_.prefix_zipf);
      zipf_cdf_[static_cast<size_t>(g)] = sum;
    }
    for (double& c : zipf_cdf_) c /= sum;
  }
}

uint64_t Workload::synthetic_id(uint64_t seed, uint64_t group, uint64_t block) {
  return (uint64_t{1} << 63) | mix64(mix64(seed ^ 0x7072656669786964ULL ^ group) + block);
}

uint64_t Workload::draw_group() {
  double u = rng_.next_double();
  auto it = std::upper_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
  if (it == zipf_cdf_.end()) --it;
  return static_cast<uint64_t>(it - zipf_cdf_.begin());
}

bool Workload::next(TraceRequest* out) {
  if (done_) return false;
  if (options_.max_requests > 0 && emitted_ >= options_.max_requests) {
    done_ = true;
    return false;
  }
  const SimTime start = from_seconds(options_.start_s);
  // The replay's origin; from_seconds is monotone, so warmup_s <= start_s keeps it >= 0.
  const SimTime origin = start - from_seconds(options_.warmup_s);
  while (true) {
    if (!reader_->next(out) || !transform(out)) {
      done_ = true;
      if (emitted_ == 0) no_request_in_window();
      return false;
    }
    if (out->arrival >= origin) break;  // else before the warm-up and the window: dropped
  }
  out->warmup = out->arrival < start;
  out->arrival -= origin;
  if (options_.spacing_s > 0)
    out->arrival = from_seconds(options_.spacing_s) * static_cast<SimTime>(spaced_);
  if (options_.output_tokens > 0) out->output_tokens = options_.output_tokens;
  ++spaced_;
  if (!out->warmup) {
    ++emitted_;
    groups_.add(out->arrival);
  }
  return true;
}

SimTime Workload::measure_from() const {
  if (options_.warmup_s <= 0) return 0;
  return options_.spacing_s > 0 ? kSimTimeMax : from_seconds(options_.warmup_s);
}

void Workload::no_request_in_window() const {
  // The reader has thrown already for a trace without requests: here the window is empty.
  char what[200];
  if (options_.max_duration_s > 0) {
    std::snprintf(what, sizeof what,
                  "no request arrives in the window [%.9g s, %.9g s) of workload.start_s and "
                  "workload.max_duration_s (scaled times)",
                  options_.start_s, options_.start_s + options_.max_duration_s);
  } else {
    std::snprintf(what, sizeof what,
                  "no request arrives at or after workload.start_s = %.9g s (scaled time)",
                  options_.start_s);
  }
  throw InputError(reader_->path(), 0, "", what);
}

bool Workload::transform(TraceRequest* out) {
  if (options_.rate_scale != 1.0) {
    const double scaled = static_cast<double>(out->arrival) / options_.rate_scale;
    if (!(scaled <= static_cast<double>(kMaxTraceArrival))) {
      char what[128];
      std::snprintf(what, sizeof what,
                    "arrival %.9g s divided by workload.rate_scale %g is more than 1e9 s",
                    to_seconds(out->arrival), options_.rate_scale);
      throw InputError(reader_->path(), reader_->line_number(), reader_->time_field(), what);
    }
    out->arrival = static_cast<SimTime>(std::llround(scaled));
  }
  if (options_.max_duration_s > 0 &&
      out->arrival >= from_seconds(options_.start_s + options_.max_duration_s))
    return false;
  if (options_.prefix_groups > 0 && out->block_ids.empty()) {
    uint64_t g = draw_group();
    int64_t bs = options_.prefix_block_size;
    int64_t n = std::min<int64_t>(options_.prefix_tokens, out->prompt_tokens) / bs;
    out->block_size = static_cast<int32_t>(bs);
    for (int64_t i = 0; i < n; ++i)
      out->block_ids.push_back(synthetic_id(options_.seed, g, static_cast<uint64_t>(i)));
    if (n == 0) out->block_size = 0;
  }
  return true;
}

}  // namespace kvtwin::sim::workload
