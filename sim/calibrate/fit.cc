#include "sim/calibrate/fit.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "model/check.h"

namespace kvtwin::sim::calibrate {
namespace {

constexpr int kNumCoefficients = 5;

LinkModel model_from(const Eigen::VectorXd& x, int32_t queue_depth) {
  LinkModel m;
  m.queue_depth = queue_depth;
  m.latency_us = x[0] / 1e3;
  m.object_us = x[1] / 1e3;
  m.object_serial_us = x[2] / 1e3;
  m.gbps = x[3] > 0 ? 1.0 / x[3] : kNoLimit;
  m.stream_gbps = x[4] > 0 ? 1.0 / x[4] : kNoLimit;
  return m;
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
  const auto rows = static_cast<Eigen::Index>(samples.size());
  // Weighted design: row i is features_i / m_i, target 1 (relative error). Columns in ns units:
  // [latency_ns, object_ns, object_serial_ns, ns_per_byte, ns_per_byte_serial].
  LinkModel shape;
  Eigen::MatrixXd a(rows, kNumCoefficients);
  Eigen::VectorXd y = Eigen::VectorXd::Ones(rows);
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
  Eigen::VectorXd best = Eigen::VectorXd::Zero(kNumCoefficients);
  double best_residual = std::numeric_limits<double>::infinity();
  int best_size = kNumCoefficients + 1;
  for (int mask = 1; mask < (1 << kNumCoefficients); ++mask) {
    std::vector<int> cols;
    for (int j = 0; j < kNumCoefficients; ++j)
      if (mask & (1 << j)) cols.push_back(j);
    Eigen::MatrixXd sub(rows, static_cast<Eigen::Index>(cols.size()));
    for (size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
    const Eigen::VectorXd z = sub.colPivHouseholderQr().solve(y);
    if ((z.array() < 0).any() || !z.allFinite()) continue;
    const double residual = (sub * z - y).squaredNorm();
    const int size = static_cast<int>(cols.size());
    const bool better = residual < best_residual * (1 - 1e-9) ||
                        (residual <= best_residual * (1 + 1e-9) && size < best_size);
    if (!better) continue;
    best_residual = residual;
    best_size = size;
    best.setZero();
    for (size_t k = 0; k < cols.size(); ++k) best[cols[k]] = z[static_cast<Eigen::Index>(k)];
  }
  for (int j = 0; j < kNumCoefficients; ++j) best[j] /= scale[j];
  LinkFit fit;
  fit.model = model_from(best, queue_depth);
  fit.num_samples = samples.size();
  fit.mape_pct = mape_pct(fit.model, samples);
  return fit;
}

}  // namespace kvtwin::sim::calibrate
