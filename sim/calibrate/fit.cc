#include "sim/calibrate/fit.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "model/check.h"

namespace kvtwin::sim::calibrate {
namespace {

constexpr int kNumCoefficients = 6;

LinkModel model_from(const Eigen::VectorXd& x, int32_t queue_depth, uint64_t spill_bytes,
                     LinkModel::SpillScope scope) {
  LinkModel m;
  m.queue_depth = queue_depth;
  m.latency_us = x[0] / 1e3;
  m.object_us = x[1] / 1e3;
  m.object_serial_us = x[2] / 1e3;
  m.gbps = x[3] > 0 ? 1.0 / x[3] : kNoLimit;
  m.stream_gbps = x[4] > 0 ? 1.0 / x[4] : kNoLimit;
  m.spill_gbps = x[5] > 0 ? 1.0 / x[5] : kNoLimit;
  m.spill_bytes = x[5] > 0 ? spill_bytes : 0;
  m.spill_scope = x[5] > 0 ? scope : LinkModel::SpillScope::kObject;
  return m;
}

struct Solution {
  Eigen::VectorXd x = Eigen::VectorXd::Zero(kNumCoefficients);
  double residual = std::numeric_limits<double>::infinity();
  int size = kNumCoefficients + 1;

  // Smaller residual wins; a tie (to 1e-9) goes to fewer coefficients.
  bool better_than(const Solution& o) const {
    return residual < o.residual * (1 - 1e-9) ||
           (residual <= o.residual * (1 + 1e-9) && size < o.size);
  }
};

// min |a x - y| with x >= 0 over the columns in `allowed` (a bit mask), exactly: every subset
// of free columns is solved by least squares and the best feasible one kept.
Solution solve_nonnegative(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, int allowed) {
  Solution best;
  for (int mask = 1; mask < (1 << kNumCoefficients); ++mask) {
    if ((mask & ~allowed) != 0) continue;
    std::vector<int> cols;
    for (int j = 0; j < kNumCoefficients; ++j)
      if (mask & (1 << j)) cols.push_back(j);
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(cols.size()));
    for (size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
    const Eigen::VectorXd z = sub.colPivHouseholderQr().solve(y);
    if ((z.array() < 0).any() || !z.allFinite()) continue;
    Solution candidate;
    candidate.residual = (sub * z - y).squaredNorm();
    candidate.size = static_cast<int>(cols.size());
    for (size_t k = 0; k < cols.size(); ++k) candidate.x[cols[k]] = z[static_cast<Eigen::Index>(k)];
    if (candidate.better_than(best)) best = candidate;
  }
  return best;
}

// The fit for one spill size and scope (0 with spill = false: no spill column).
Solution fit_at(std::span<const LinkSample> samples, int32_t queue_depth, bool spill,
                uint64_t spill_bytes, LinkModel::SpillScope scope) {
  const auto rows = static_cast<Eigen::Index>(samples.size());
  // Weighted design: row i is features_i / m_i, target 1 (relative error). Columns in ns units:
  // [latency, object, object_serial, ns per byte, ns per byte serial, ns per spilled byte].
  LinkModel shape;
  shape.spill_bytes = spill_bytes;
  shape.spill_scope = scope;
  Eigen::MatrixXd a(rows, kNumCoefficients);
  const Eigen::VectorXd y = Eigen::VectorXd::Ones(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const LinkSample& s = samples[static_cast<size_t>(i)];
    KVTWIN_CHECK(s.measured_ns > 0 && s.num_objects >= 1);
    shape.queue_depth = s.queue_depth > 0 ? s.queue_depth : queue_depth;
    const std::vector<double> f = shape.features(s.num_objects, s.bytes);
    for (int j = 0; j < kNumCoefficients; ++j) a(i, j) = f[static_cast<size_t>(j)] / s.measured_ns;
  }
  // Column scaling for conditioning (bytes and counts differ by seven orders of magnitude).
  Eigen::VectorXd scale(kNumCoefficients);
  for (int j = 0; j < kNumCoefficients; ++j) {
    const double norm = a.col(j).norm();
    scale[j] = norm > 0 ? norm : 1.0;
    a.col(j) /= scale[j];
  }
  const int all = (1 << kNumCoefficients) - 1;
  Solution sol = solve_nonnegative(a, y, spill ? all : all & ~(1 << 5));
  for (int j = 0; j < kNumCoefficients; ++j) sol.x[j] /= scale[j];
  return sol;
}

}  // namespace

std::vector<LinkSample> median_per_point(std::span<const LinkSample> samples) {
  std::map<std::tuple<uint64_t, uint64_t, int32_t>, std::vector<double>> groups;
  for (const LinkSample& s : samples)
    groups[{s.num_objects, s.bytes, s.queue_depth}].push_back(s.measured_ns);
  std::vector<LinkSample> out;
  for (auto& [key, times] : groups) {
    std::sort(times.begin(), times.end());
    out.push_back(
        {std::get<0>(key), std::get<1>(key), times[(times.size() - 1) / 2], std::get<2>(key)});
  }
  return out;
}

double repeat_spread_pct(std::span<const LinkSample> samples, uint64_t min_object_bytes) {
  std::map<std::tuple<uint64_t, uint64_t, int32_t>, double> medians;
  for (const LinkSample& m : median_per_point(samples))
    medians[{m.num_objects, m.bytes, m.queue_depth}] = m.measured_ns;
  double sum = 0;
  size_t count = 0;
  for (const LinkSample& s : samples) {
    if (s.bytes < min_object_bytes * s.num_objects) continue;
    sum +=
        std::abs(medians[{s.num_objects, s.bytes, s.queue_depth}] - s.measured_ns) / s.measured_ns;
    ++count;
  }
  return count == 0 ? 0.0 : 100.0 * sum / static_cast<double>(count);
}

double mape_pct(const LinkModel& model, std::span<const LinkSample> samples) {
  double sum = 0;
  for (const LinkSample& s : samples) {
    LinkModel at_depth = model;
    if (s.queue_depth > 0) at_depth.queue_depth = s.queue_depth;
    sum += std::abs(static_cast<double>(at_depth.predict(s.num_objects, s.bytes)) - s.measured_ns) /
           s.measured_ns;
  }
  return samples.empty() ? 0.0 : 100.0 * sum / static_cast<double>(samples.size());
}

LinkFit fit_link_model(std::span<const LinkSample> samples, int32_t queue_depth) {
  KVTWIN_CHECK(!samples.empty());
  KVTWIN_CHECK_GE(queue_depth, 1);
  // Candidate spill sizes: per object, every object size sampled but the largest; per window,
  // every window sampled (objects in flight times object size) but the largest. Ties keep the
  // earlier candidate: no spill, then per object, then per window.
  using Scope = LinkModel::SpillScope;
  std::set<uint64_t> objects, windows;
  for (const LinkSample& s : samples) {
    const uint64_t n = std::max<uint64_t>(s.num_objects, 1);
    const uint64_t depth = static_cast<uint64_t>(s.queue_depth > 0 ? s.queue_depth : queue_depth);
    objects.insert(s.bytes / n);
    windows.insert(std::min(n, depth) * (s.bytes / n));
  }
  Solution best = fit_at(samples, queue_depth, false, 0, Scope::kObject);
  uint64_t best_spill = 0;
  Scope best_scope = Scope::kObject;
  for (const auto& [scope, sizes] :
       {std::pair{Scope::kObject, &objects}, {Scope::kWindow, &windows}})
    for (auto it = sizes->begin(); it != sizes->end() && std::next(it) != sizes->end(); ++it) {
      Solution sol = fit_at(samples, queue_depth, true, *it, scope);
      if (sol.better_than(best)) {
        best = sol;
        best_spill = *it;
        best_scope = scope;
      }
    }
  LinkFit fit;
  fit.model = model_from(best.x, queue_depth, best_spill, best_scope);
  fit.num_samples = samples.size();
  fit.mape_pct = mape_pct(fit.model, samples);
  return fit;
}

}  // namespace kvtwin::sim::calibrate
