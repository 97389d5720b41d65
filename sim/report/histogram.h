// LogHistogram: a fixed-memory histogram of non-negative durations with bounded relative error,
// for distributions too large to keep sample by sample (inter-token latencies: one per token).
//
// Buckets are geometric with ratio 1.01 from 1 µs up (values below 1 µs share bucket 0), so a
// reported quantile is within 1% of a true sample value. Quantiles use the nearest rank, as
// workload::percentiles does for exact samples; the value reported is the bucket's geometric
// midpoint, clamped to the smallest and largest samples: a quantile never lies outside the
// samples (a midpoint above the maximum once made an ITL p99 larger than the max reported beside
// it), and the clamp stays inside the bucket, so the 1% bound holds. Deterministic: no
// floating-point accumulation order issues beyond the sum.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/time.h"

namespace kvtwin::sim::report {

class LogHistogram {
 public:
  void add(SimDuration ns) {
    // Equal values come in runs (every request of a decode batch sees the step's duration), so
    // the last value's bucket is kept: same value, same bucket, no log().
    if (ns != last_ns_) {
      last_ns_ = ns;
      last_bucket_ = bucket(ns);
    }
    size_t b = last_bucket_;
    if (b >= counts_.size()) counts_.resize(b + 1, 0);
    ++counts_[b];
    ++count_;
    sum_ns_ += static_cast<double>(ns);
    max_ns_ = std::max(max_ns_, ns);
    min_ns_ = std::min(min_ns_, ns);
  }
  uint64_t count() const { return count_; }
  double mean_ns() const { return count_ ? sum_ns_ / static_cast<double>(count_) : 0; }
  SimDuration max_ns() const { return max_ns_; }
  // Nearest-rank quantile q in (0, 1].
  double quantile_ns(double q) const {
    if (count_ == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
    rank = std::max<uint64_t>(rank, 1);
    uint64_t seen = 0;
    for (size_t b = 0; b < counts_.size(); ++b) {
      seen += counts_[b];
      if (seen >= rank) {
        const double mid = b == 0 ? 500.0 : 1000.0 * std::pow(kRatio, b - 0.5);
        return std::clamp(mid, static_cast<double>(min_ns_), static_cast<double>(max_ns_));
      }
    }
    return static_cast<double>(max_ns_);
  }

 private:
  static constexpr double kRatio = 1.01;
  static size_t bucket(SimDuration ns) {
    if (ns < 1000) return 0;
    return 1 + static_cast<size_t>(std::log(static_cast<double>(ns) / 1000.0) / std::log(kRatio));
  }
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ns_ = 0;
  SimDuration max_ns_ = 0;
  SimDuration min_ns_ = std::numeric_limits<SimDuration>::max();
  SimDuration last_ns_ = 0;  // bucket(0) == 0
  size_t last_bucket_ = 0;
};

}  // namespace kvtwin::sim::report
