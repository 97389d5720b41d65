// Fitting a LinkModel to measured transfers (the only place kvtwin uses Eigen).
//
// The fit minimises the sum of squared *relative* errors, sum_i ((t(n_i, B_i) - m_i) / m_i)^2,
// with every coefficient >= 0 (a latency or a per-byte cost cannot be negative). Relative
// weighting keeps a 64 KiB transfer of 100 us as important as a 32 MiB one of 20 ms, which is
// what the validation report's MAPE measures. With six coefficients the non-negative problem is
// solved exactly by trying every subset of free coefficients (63 small least-squares solves) and
// keeping the best feasible one; ties go to the subset with fewer coefficients. The spill size and
// scope are chosen among the object sizes and the windows sampled (objects in flight times object
// size), and "no spill", by the same criterion.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/calibrate/link_model.h"

namespace kvtwin::sim::calibrate {

struct LinkSample {
  uint64_t num_objects = 0;
  uint64_t bytes = 0;
  double measured_ns = 0;
  int32_t queue_depth = 0;  // the link's depth when measured; 0: the fitted model's own
};

struct LinkFit {
  LinkModel model;
  double mape_pct = 0;  // mean |predicted - measured| / measured over the samples, in percent
  size_t num_samples = 0;
};

// Fits one model whose queue_depth is `queue_depth` (the depth the link will run with); samples
// taken at other depths inform the depth terms.
// REQUIRES: samples non-empty, every measured_ns > 0 and num_objects >= 1; queue_depth >= 1.
LinkFit fit_link_model(std::span<const LinkSample> samples, int32_t queue_depth);

// One sample per distinct (num_objects, bytes, queue_depth): the median of its measurements (the
// lower median for an even count), in key order. Repeated measurements on a shared machine have
// outliers several times the typical time; the median keeps them from steering the fit.
std::vector<LinkSample> median_per_point(std::span<const LinkSample> samples);

// The noise floor of a set of repeated measurements: the mean of |median - m| / m (percent) over
// every sample whose objects are at least min_object_bytes, the median being that of its point.
// No model predicts a sample better, on average, than its own point's median does.
double repeat_spread_pct(std::span<const LinkSample> samples, uint64_t min_object_bytes = 0);

// Mean absolute percentage error of `model` on `samples` (each predicted at its own depth).
double mape_pct(const LinkModel& model, std::span<const LinkSample> samples);

}  // namespace kvtwin::sim::calibrate
