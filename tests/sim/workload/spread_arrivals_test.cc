#include "sim/workload/spread_arrivals.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "sim/io/input_error.h"
#include "sim/workload/trace_stats.h"
#include "sim/workload/workload.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::workload {
namespace {

std::string native_trace(const std::string& arrivals_s) {
  std::string path = kvtwin::testing::scratch_dir() + "/t.csv";
  std::ofstream out(path);
  out << "arrival_s,prompt_tokens,output_tokens\n";
  size_t from = 0;
  while (from < arrivals_s.size()) {
    size_t to = arrivals_s.find(' ', from);
    if (to == std::string::npos) to = arrivals_s.size();
    out << arrivals_s.substr(from, to - from) << ",10,1\n";
    from = to + 1;
  }
  return path;
}

// (arrival ns, line) of every request.
std::vector<std::pair<SimTime, uint64_t>> spread(const std::string& path, size_t max_group = 64) {
  SpreadArrivals reader(open_trace(path, TraceFormat::kNative), max_group);
  std::vector<std::pair<SimTime, uint64_t>> out;
  TraceRequest r;
  while (reader.next(&r)) out.emplace_back(r.arrival, reader.line_number());
  return out;
}

constexpr SimTime kS = 1'000'000'000;

// Three requests at 0 s spread over the second to the next instant; the one at 1 s is alone; the
// last group (two at 2 s) spreads over the gap before it, 1 s. Lines stay each request's own.
TEST(SpreadArrivals, EachGroupSpreadsEvenlyOverTheGapToTheNextInstant) {
  const auto got = spread(native_trace("0 0 0 1 2 2"));
  const std::vector<std::pair<SimTime, uint64_t>> want = {
      {0, 2}, {333'333'333, 3}, {666'666'666, 4}, {kS, 5}, {2 * kS, 6}, {2 * kS + kS / 2, 7}};
  EXPECT_EQ(got, want);
}

// A trace of one recorded instant has no gap to spread over; a trace without groups is unchanged.
TEST(SpreadArrivals, OneInstantOrNoGroupLeavesTheTimes) {
  EXPECT_EQ(spread(native_trace("5 5 5")),
            (std::vector<std::pair<SimTime, uint64_t>>{{5 * kS, 2}, {5 * kS, 3}, {5 * kS, 4}}));
  EXPECT_EQ(spread(native_trace("0.5 1.25 7")), (std::vector<std::pair<SimTime, uint64_t>>{
                                                    {kS / 2, 2}, {kS + kS / 4, 3}, {7 * kS, 4}}));
}

// floor(k · gap / n) without overflow: 7 requests over a gap of 1e9 s (1e18 ns).
TEST(SpreadArrivals, LongGapsDoNotOverflow) {
  const auto got = spread(native_trace("0 0 0 0 0 0 0 1000000000"));
  ASSERT_EQ(got.size(), 8u);
  const SimTime gap = SimTime{1'000'000'000} * kS;
  for (SimTime k = 0; k < 7; ++k)
    EXPECT_EQ(got[static_cast<size_t>(k)].first, gap / 7 * k + gap % 7 * k / 7) << k;
  EXPECT_EQ(got[6].first, 857'142'857'142'857'142);
}

TEST(SpreadArrivals, AGroupLargerThanTheLimitIsAnInputErrorAtItsLine) {
  const std::string path = native_trace("0 1 1 1 2");
  try {
    spread(path, 2);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path +
                  ":5: arrival_s: more than 2 requests at one arrival time; "
                  "workload.arrivals = \"spread\" holds one such group in memory");
  }
}

// Spread comes before rate_scale: the group at 0 s spreads over 0 .. 3000 s, then every time is
// divided by 1e-6, and the second request (line 3) is the one past 1e9 s: the error names it, not
// the line the reader has read ahead to.
TEST(SpreadArrivals, TheWorkloadSpreadsBeforeScalingAndErrorsNameTheirRequestsLine) {
  const std::string path = native_trace("0 0 3000");
  WorkloadOptions o;
  o.spread_arrivals = true;
  o.rate_scale = 2;
  {
    Workload w(open_trace(path, TraceFormat::kNative), o);
    std::vector<SimTime> got;
    TraceRequest r;
    while (w.next(&r)) got.push_back(r.arrival);
    EXPECT_EQ(got, (std::vector<SimTime>{0, 750 * kS, 1500 * kS}));
  }
  o.rate_scale = 1e-6;
  Workload w(open_trace(path, TraceFormat::kNative), o);
  TraceRequest r;
  ASSERT_TRUE(w.next(&r));
  try {
    w.next(&r);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ":3: arrival_s: arrival 1500 s divided by", 0), 0u)
        << e.what();
  }
}

// The Mooncake conversation trace records 12,031 requests at 1,180 instants, up to 28 at one
// (counted independently with Python's json module); spread, every request has a time of its
// own, the count is kept, and no request moves past the next recorded instant.
TEST(SpreadArrivals, TheConversationTracesGroupsBecomeDistinctArrivals) {
  const std::string path =
      kvtwin::testing::source_path("traces/mooncake_fast25/conversation_trace.jsonl");
  Workload recorded(open_trace(path, TraceFormat::kAuto), WorkloadOptions{});
  const TraceStats a = compute_trace_stats(&recorded, 0);
  EXPECT_EQ(a.requests, 12031u);
  EXPECT_EQ(a.arrival_instants, 1180u);
  EXPECT_EQ(a.largest_arrival_group, 28u);
  EXPECT_EQ(a.requests_sharing_an_arrival, 12031u);
  WorkloadOptions o;
  o.spread_arrivals = true;
  Workload spread_w(open_trace(path, TraceFormat::kAuto), o);
  const TraceStats b = compute_trace_stats(&spread_w, 0);
  EXPECT_EQ(b.requests, 12031u);
  EXPECT_EQ(b.arrival_instants, 12031u);
  EXPECT_EQ(b.largest_arrival_group, 1u);
  EXPECT_EQ(b.requests_sharing_an_arrival, 0u);
  EXPECT_EQ(b.first_arrival, a.first_arrival);
  // The last group spreads over the gap before it, so the last arrival moves later.
  EXPECT_GT(b.last_arrival, a.last_arrival);
  EXPECT_EQ(b.prompt_tokens.mean, a.prompt_tokens.mean);
  // Request by request: at or after its recorded time, before the next recorded instant.
  Workload x(open_trace(path, TraceFormat::kAuto), WorkloadOptions{});
  Workload y(open_trace(path, TraceFormat::kAuto), o);
  std::vector<SimTime> t, u;
  TraceRequest r;
  while (x.next(&r)) t.push_back(r.arrival);
  while (y.next(&r)) u.push_back(r.arrival);
  ASSERT_EQ(t.size(), u.size());
  SimTime next_instant = kSimTimeMax;
  for (size_t i = t.size(); i-- > 0;) {
    if (i + 1 < t.size() && t[i + 1] != t[i]) next_instant = t[i + 1];
    EXPECT_GE(u[i], t[i]) << i;
    if (next_instant != kSimTimeMax) {
      EXPECT_LT(u[i], next_instant) << i;
    }
  }
}

// The workload counts the most of the window's requests that arrive at one instant, as replayed:
// 19 in the default trace's first 10 minutes (counted independently with Python's json module),
// 3 in its first three requests (all at 0 ms), 1 once spread.
TEST(SpreadArrivals, TheWorkloadCountsItsLargestGroupAsReplayed) {
  const std::string path =
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl");
  auto largest = [&](const WorkloadOptions& o) {
    Workload w(open_trace(path, TraceFormat::kAuto), o);
    TraceRequest r;
    while (w.next(&r)) {
    }
    return w.arrival_groups().largest;
  };
  WorkloadOptions o;
  EXPECT_EQ(largest(o), 19u);
  o.max_requests = 3;
  EXPECT_EQ(largest(o), 3u);
  o.max_requests = 0;
  o.spread_arrivals = true;
  EXPECT_EQ(largest(o), 1u);
}

}  // namespace
}  // namespace kvtwin::sim::workload
