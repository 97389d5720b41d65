#include "sim/workload/trace_stats.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/paths.h"

namespace kvtwin::sim::workload {
namespace {

TraceStats stats_of(const std::string& path, double window_s = 0) {
  Workload w(open_trace(path, TraceFormat::kAuto), WorkloadOptions{});
  return compute_trace_stats(&w, window_s);
}

// The statistics of a native trace of `rows` (arrival_s, prompt_tokens, output_tokens,
// block_size, block_ids; no header).
TraceStats stats_of_rows(const std::string& rows, double window_s = 0) {
  const std::string path = kvtwin::testing::scratch_subdir() + "/t.csv";
  std::ofstream(path) << "arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n" << rows;
  return stats_of(path, window_s);
}

TEST(TraceStats, PrefixReuseOfASmallTraceMatchesAHandCount) {
  TraceStats s = stats_of_rows(
      "0,40,1,16,1 2 3\n"    // all new
      "1,40,1,16,1 2 4\n"    // hits 1 2 (32 tokens)
      "2,20,1,16,5 2\n"      // 2 is known but the first miss stops the match
      "3,40,1,16,1 2 3\n");  // hits 3 blocks: 16+16+8 tokens
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.block_refs, 11u);
  EXPECT_EQ(s.unique_blocks, 5u);
  EXPECT_EQ(s.prefix_hit_blocks, 5u);
  EXPECT_EQ(s.prefix_hit_tokens, 32u + 40u);
  EXPECT_EQ(s.tokens_with_ids, 140u);
  EXPECT_EQ(s.prompt_tokens.max, 40);
  EXPECT_EQ(s.prompt_tokens.p50, 40);
}

// Oracle: ../shared/traces/README.md computed these from the files independently.
TEST(TraceStats, MooncakeConversationMatchesTheTraceReadme) {
  TraceStats s =
      stats_of(kvtwin::testing::source_path("traces/mooncake_fast25/conversation_trace.jsonl"));
  EXPECT_EQ(s.requests, 12031u);
  EXPECT_EQ(s.block_refs, 288500u);
  EXPECT_EQ(s.unique_blocks, 182790u);
  EXPECT_EQ(s.last_arrival, 3'536'999'000'000);
  EXPECT_NEAR(static_cast<double>(s.prefix_hit_blocks) / s.block_refs, 0.366, 0.0005);
  EXPECT_NEAR(static_cast<double>(s.prefix_hit_tokens) / s.tokens_with_ids, 0.374, 0.0005);
  EXPECT_NEAR(s.prompt_tokens.mean, 12035.1, 0.05);
}

TEST(TraceStats, MooncakeSyntheticMatchesTheTraceReadme) {
  TraceStats s =
      stats_of(kvtwin::testing::source_path("traces/mooncake_fast25/synthetic_trace.jsonl"));
  EXPECT_EQ(s.requests, 3993u);
  EXPECT_EQ(s.block_refs, 121877u);
  EXPECT_EQ(s.unique_blocks, 43924u);
  EXPECT_NEAR(static_cast<double>(s.prefix_hit_blocks) / s.block_refs, 0.640, 0.0005);
  EXPECT_NEAR(static_cast<double>(s.prefix_hit_tokens) / s.tokens_with_ids, 0.651, 0.0005);
}

TEST(TraceStats, WindowedWorkingSetNeverExceedsTheTotal) {
  TraceStats s =
      stats_of(kvtwin::testing::source_path("traces/mooncake_fast25/conversation_trace.jsonl"), 60);
  EXPECT_GT(s.max_window_unique_blocks, 0u);
  EXPECT_LT(s.max_window_unique_blocks, s.unique_blocks);
}

TEST(Percentiles, NearestRankOnSortedValues) {
  std::vector<double> v = {5, 1, 4, 2, 3, 6, 7, 8, 9, 10};
  Percentiles p = percentiles(&v);
  EXPECT_EQ(p.p50, 5);
  EXPECT_EQ(p.p90, 9);
  EXPECT_EQ(p.p99, 10);
  EXPECT_EQ(p.max, 10);
  EXPECT_DOUBLE_EQ(p.mean, 5.5);
}

// Linear percentiles equal numpy.percentile's (numpy 1.24, Debian 12's python3-numpy) to the last
// bit: values (7919·i mod 1000) + i/7 for i = 0..1000 and for i = 1..12, and one value.
TEST(Percentiles, LinearMatchesNumpyBitForBit) {
  auto values = [](int from, int to) {
    std::vector<double> v;
    for (int i = from; i <= to; ++i) v.push_back((i * 7919) % 1000 + i / 7.0);
    return v;
  };
  std::vector<double> v = values(0, 1000);
  Percentiles p = percentiles(&v, PercentileMethod::kLinear);
  EXPECT_EQ(p.p50, 570.0);
  EXPECT_EQ(p.p90, 969.4285714285714);
  EXPECT_EQ(p.p99, 1088.2857142857142);
  v = values(1, 12);
  p = percentiles(&v, PercentileMethod::kLinear);
  EXPECT_EQ(p.p50, 474.42857142857144);
  EXPECT_EQ(p.p90, 830.2);
  EXPECT_EQ(p.p99, 910.2485714285715);
  EXPECT_EQ(p.max, v.back());
  v = {42.5};
  p = percentiles(&v, PercentileMethod::kLinear);
  EXPECT_EQ(p.p99, 42.5);
  // The nearest rank of the same twelve: ranks 6, 11 and 12.
  v = values(1, 12);
  p = percentiles(&v);
  EXPECT_EQ(p.p50, v[5]);
  EXPECT_EQ(p.p90, v[10]);
  EXPECT_EQ(p.p99, v[11]);
}

TEST(TraceStats, WorkingSetTokensBelongToTheFirstWindowReachingTheMaximum) {
  // 5 s windows: window [0, 5) holds 3 unique blocks of 16 tokens (48 tokens); window [10, 15)
  // also 3 unique blocks, but its last block is partial (16 + 16 + 8 = 40 tokens). The maximum
  // (3 blocks) is reached first in window 0, and a later tie does not replace its token count.
  TraceStats s = stats_of_rows(
      "0,48,1,16,1 2 3\n"
      "10,40,1,16,4 5 6\n",
      5);
  EXPECT_EQ(s.max_window_unique_blocks, 3u);
  EXPECT_EQ(s.max_window_tokens, 48u);
  EXPECT_EQ(s.max_window_start_s, 0);
}

// The working set counts every prompt token no id covers: a request's tokens past its ids (after
// a synthetic prefix, say) and those of a request without ids are its own. Ids 1 and 2 cover 32
// distinct tokens; the uncovered ones are 40 − 32 = 8, 50 − 16 = 34 and 30: 32 + 72 = 104. In
// 5-s windows, [0, 5) is the busiest (2 ids) and holds 40 + 30 tokens: the request without ids
// arriving after the window reached its most ids counts too.
TEST(TraceStats, TheWorkingSetHoldsTheTokensNoIdCovers) {
  TraceStats s = stats_of_rows(
      "0,40,1,16,1 2\n"
      "3,30,1,,\n"
      "6,50,1,16,1\n",
      5);
  EXPECT_EQ(s.unique_block_tokens, 32u);
  EXPECT_EQ(s.uncovered_tokens, 72u);
  EXPECT_EQ(s.working_set_tokens(), 104u);
  EXPECT_EQ(s.max_window_unique_blocks, 2u);
  EXPECT_EQ(s.max_window_tokens, 70u);
  EXPECT_EQ(s.max_window_start_s, 0);
  EXPECT_NE(format_trace_stats(s, "u.csv", 0).find("working set           104 tokens"),
            std::string::npos);
}

// The busiest window's start is reported, so that workload.start_s can replay it: 5 s windows,
// [0, 5) holds 1 block, [10, 15) 3, [20, 25) 2.
TEST(TraceStats, TheBusiestWindowNamesItsStart) {
  TraceStats s = stats_of_rows(
      "1,16,1,16,1\n"
      "12,48,1,16,4 5 6\n"
      "21,32,1,16,7 8\n",
      5);
  EXPECT_EQ(s.max_window_unique_blocks, 3u);
  EXPECT_EQ(s.max_window_start_s, 10);
}

}  // namespace
}  // namespace kvtwin::sim::workload
