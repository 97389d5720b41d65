#include "sim/calibrate/fit.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <vector>

namespace kvtwin::sim::calibrate {
namespace {

// Samples measured exactly as `truth` predicts, over sizes, counts and depths.
std::vector<LinkSample> exact_samples(const LinkModel& truth, std::vector<int32_t> depths) {
  std::vector<LinkSample> out;
  for (int32_t d : depths)
    for (uint64_t size : {64u << 10, 1u << 20, 4u << 20, 32u << 20})
      for (uint64_t n : {1u, 2u, 4u, 8u, 16u}) {
        LinkModel at = truth;
        at.queue_depth = d;
        out.push_back({n, n * size, static_cast<double>(at.predict(n, n * size)), d});
      }
  return out;
}

void expect_close(double a, double b, const char* what) {
  if (std::isinf(a) || std::isinf(b)) {
    EXPECT_EQ(std::isinf(a), std::isinf(b)) << what << " " << a << " vs " << b;
    return;
  }
  EXPECT_NEAR(a, b, 1e-3 * std::max(1.0, std::abs(b))) << what;
}

TEST(Fit, RecoversTheModelThatProducedTheSamples) {
  LinkModel truth;
  truth.latency_us = 85;
  truth.object_us = 12;
  truth.object_serial_us = 30;
  truth.gbps = 1.9;
  truth.stream_gbps = 2.5;
  truth.queue_depth = 8;
  const LinkFit fit = fit_link_model(exact_samples(truth, {1, 4, 8}), 8);
  expect_close(fit.model.latency_us, truth.latency_us, "latency_us");
  expect_close(fit.model.object_us, truth.object_us, "object_us");
  expect_close(fit.model.object_serial_us, truth.object_serial_us, "object_serial_us");
  expect_close(fit.model.gbps, truth.gbps, "gbps");
  expect_close(fit.model.stream_gbps, truth.stream_gbps, "stream_gbps");
  EXPECT_EQ(fit.model.queue_depth, 8);
  EXPECT_LT(fit.mape_pct, 0.01);
  EXPECT_EQ(fit.num_samples, 60u);
}

TEST(Fit, AbsentTermsComeOutZeroNotNegative) {
  LinkModel truth;  // latency + bandwidth only
  truth.latency_us = 50;
  truth.gbps = 3;
  const LinkFit fit = fit_link_model(exact_samples(truth, {1, 8}), 8);
  EXPECT_NEAR(fit.model.latency_us, 50, 0.05);
  EXPECT_NEAR(fit.model.gbps, 3, 0.003);
  EXPECT_GE(fit.model.object_us, 0);
  EXPECT_GE(fit.model.object_serial_us, 0);
  EXPECT_LT(fit.model.object_us + fit.model.object_serial_us, 0.01);
  EXPECT_TRUE(std::isinf(fit.model.stream_gbps) || fit.model.stream_gbps > 1e4);
}

TEST(Fit, SamplesThatWantANegativeLatencyGetZero) {
  // One object size; time grows faster than the object count: the best unconstrained line,
  // -60 + 160 n, has a negative intercept. The fit must keep every coefficient non-negative.
  std::vector<LinkSample> s = {{1, 1000, 100, 1}, {2, 2000, 260, 1}, {4, 4000, 580, 1}};
  const LinkFit fit = fit_link_model(s, 1);
  EXPECT_EQ(fit.model.latency_us, 0);
  EXPECT_GE(fit.model.object_us, 0);
  EXPECT_GT(fit.model.gbps, 0);
  EXPECT_EQ(fit.model.spill_bytes, 0u);  // one size sampled: nothing to spill past
  EXPECT_LT(fit.model.object_us * 1e3 + 1000 / fit.model.gbps, 160.0 + 1e-6);
}

TEST(Fit, FindsTheSpillSizeAmongTheSampledSizes) {
  LinkModel truth;
  truth.latency_us = 20;
  truth.gbps = 2;
  truth.spill_bytes = 1 << 20;  // a sampled size
  truth.spill_gbps = 0.8;
  truth.queue_depth = 8;
  const LinkFit fit = fit_link_model(exact_samples(truth, {1, 8}), 8);
  EXPECT_EQ(fit.model.spill_bytes, truth.spill_bytes);
  EXPECT_EQ(fit.model.spill_scope, LinkModel::SpillScope::kObject);
  expect_close(fit.model.spill_gbps, truth.spill_gbps, "spill_gbps");
  expect_close(fit.model.gbps, truth.gbps, "gbps");
  EXPECT_LT(fit.mape_pct, 0.01);
}

TEST(Fit, TellsAWindowSpillFromAnObjectSpill) {
  LinkModel truth;
  truth.latency_us = 20;
  truth.gbps = 2;
  truth.spill_bytes = 4 << 20;  // four 1 MiB objects in flight, or one 4 MiB object
  truth.spill_scope = LinkModel::SpillScope::kWindow;
  truth.spill_gbps = 0.5;
  truth.queue_depth = 8;
  const LinkFit fit = fit_link_model(exact_samples(truth, {1, 8}), 8);
  EXPECT_EQ(fit.model.spill_scope, LinkModel::SpillScope::kWindow);
  EXPECT_EQ(fit.model.spill_bytes, truth.spill_bytes);
  expect_close(fit.model.spill_gbps, truth.spill_gbps, "spill_gbps");
  EXPECT_LT(fit.mape_pct, 0.01);
}

TEST(Fit, MedianPerPointKeepsTheMiddleMeasurement) {
  std::vector<LinkSample> s = {{2, 100, 30, 4}, {2, 100, 900, 4}, {2, 100, 10, 4},
                               {1, 100, 5, 4},  {1, 100, 7, 4},   {2, 100, 20, 1}};
  const std::vector<LinkSample> m = median_per_point(s);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].num_objects, 1u);
  EXPECT_EQ(m[0].measured_ns, 5);  // lower median of {5, 7}
  EXPECT_EQ(m[1].queue_depth, 1);
  EXPECT_EQ(m[1].measured_ns, 20);
  EXPECT_EQ(m[2].measured_ns, 30);  // the 900 outlier does not count
}

TEST(Fit, RepeatSpreadIsTheMeanDistanceOfRepeatsFromTheirMedian) {
  std::vector<LinkSample> s = {{1, 4 << 20, 100, 1},
                               {1, 4 << 20, 80, 1},
                               {1, 4 << 20, 125, 1},
                               {1, 1000, 10, 1},
                               {1, 1000, 30, 1}};
  // Large point: median 100; |100-100|/100, |100-80|/80, |100-125|/125 -> 0, 25 %, 20 %.
  EXPECT_DOUBLE_EQ(repeat_spread_pct(s, 1 << 20), 15.0);
  // With the small point (median 10): 0 and |10-30|/30 = 66.67 % join.
  EXPECT_NEAR(repeat_spread_pct(s), (0 + 25 + 20 + 0 + 200.0 / 3) / 5, 1e-9);
}

RC_GTEST_PROP(Fit, ExactSamplesOfAnyNonNegativeModelAreFitWithinAPercent, ()) {
  LinkModel truth;
  truth.latency_us = *rc::gen::inRange(0, 2000);
  truth.object_us = *rc::gen::inRange(0, 200);
  truth.object_serial_us = *rc::gen::inRange(0, 200);
  truth.gbps = 0.1 + *rc::gen::inRange(0, 400) / 10.0;
  truth.stream_gbps = *rc::gen::element(0.5, 2.0, 10.0, kNoLimit);
  truth.queue_depth = *rc::gen::element(1, 4, 16);
  const LinkFit fit =
      fit_link_model(exact_samples(truth, {1, 4, truth.queue_depth}), truth.queue_depth);
  RC_ASSERT(fit.mape_pct < 1.0);
}

}  // namespace
}  // namespace kvtwin::sim::calibrate
