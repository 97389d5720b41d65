#include <gtest/gtest.h>

#include "sim/report/chrome_trace.h"
#include "sim/report/histogram.h"
#include "sim/report/json_writer.h"
#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::report {
namespace {

using kvtwin::testing::slurp;

TEST(JsonWriter, WritesNestedValuesWithOneNumberFormat) {
  JsonWriter j;
  j.begin_object();
  j.field("a", 1.5);
  j.field("n", int64_t{-3});
  j.key("list");
  j.begin_array();
  j.value(0.1 + 0.2);
  j.value("q\"\n");
  j.end_array();
  j.key("empty");
  j.begin_object();
  j.end_object();
  j.field("nan", 0.0 / 0.0);
  j.end_object();
  EXPECT_EQ(j.str(),
            "{\n  \"a\": 1.5,\n  \"n\": -3,\n  \"list\": [\n    0.3,\n    \"q\\\"\\n\"\n  ],\n"
            "  \"empty\": {},\n  \"nan\": null\n}\n");
}

// Byte counts are doubles in the summary; a whole one prints in full, not rounded to 9 digits.
TEST(JsonWriter, PrintsWholeDoublesInFullAndOthersWithNineDigits) {
  EXPECT_EQ(JsonWriter::number(343597383680.0), "343597383680");  // 320 GiB
  EXPECT_EQ(JsonWriter::number(-29218360524800.0), "-29218360524800");
  EXPECT_EQ(JsonWriter::number(9007199254740992.0), "9007199254740992");  // 2^53
  EXPECT_EQ(JsonWriter::number(18014398509481984.0), "1.80143985e+16");   // 2^54: not exact
  EXPECT_EQ(JsonWriter::number(1083933338453.75), "1.08393334e+12");
  EXPECT_EQ(JsonWriter::number(3571.551634), "3571.55163");
  EXPECT_EQ(JsonWriter::number(-0.0), "0");
  EXPECT_EQ(JsonWriter::number(1e-12), "1e-12");
}

// The one-screen summary gives each link kind that moved bytes in a row of its own, with the
// share of the time the busiest instance's link of that kind was busy.
TEST(RunRecorder, TheScreenSaysHowBusyEachLinkWas) {
  Summary s;
  s.link_bytes = {{"disk_write", 5.0 * 1024 * 1024 * 1024}, {"nic_rx", 0}, {"pcie_d2h", 1e9}};
  s.link_busy_fraction = {{"disk_write", 0.41596}, {"nic_rx", 0}, {"pcie_d2h", 0.0104}};
  s.link_peak_rate = {{"disk_write", 4.8761e9}, {"pcie_d2h", 0.5e9}};
  s.link_capacity = {{"disk_write", 5e9}, {"pcie_d2h", 50e9}};
  const std::string screen = RunRecorder::screen(s);
  const size_t at = screen.find("links ");
  ASSERT_NE(at, std::string::npos) << screen;
  EXPECT_EQ(screen.substr(at),
            "links                  GiB moved   busiest busy   peak GB/s of link\n"
            "  disk_write                 5.0          41.6%        4.88 of 5.00\n"
            "  pcie_d2h                   0.9           1.0%        0.50 of 50.00\n")
      << screen;
  // Tensor parallelism: the PCIe rows are one GPU's bytes, and say so; the others are not.
  s.tensor_parallel = 4;
  const std::string tp = RunRecorder::screen(s);
  EXPECT_EQ(tp.substr(tp.find("links ")),
            "links                  GiB moved   busiest busy   peak GB/s of link\n"
            "  disk_write                 5.0          41.6%        4.88 of 5.00\n"
            "  pcie_d2h per GPU           0.9           1.0%        0.50 of 50.00\n")
      << tp;
}

// A cache that is off says so instead of a hit rate of 0; the LMCache lines of failures, health,
// timeouts, async loading, bounded tiers and the page cache appear only when there is something
// to say, each with its figures.
TEST(RunRecorder, TheScreenSaysWhichCacheIsOffAndGivesOnlyTheFiguresThatHappened) {
  Summary s;
  s.prefix_caching = false;
  std::string screen = RunRecorder::screen(s);
  EXPECT_NE(
      screen.find("\nGPU cache   prefix caching off, KV usage peak 0% mean 0%, 0 preemptions\n"
                  "LMCache     off\n"),
      std::string::npos)
      << screen;
  s.prefix_caching = true;
  s.lmcache_enabled = true;
  s.gpu_hit_rate = 0.25;
  s.lmcache_hit_rate = 0.125;
  s.tier_hit_rate = {0.1, 0.025, 0};
  screen = RunRecorder::screen(s);
  const std::string caches =
      "GPU cache   25.0% prefix hit rate, KV usage peak 0% mean 0%, 0 preemptions\n"
      "LMCache     12.5% hit rate beyond the GPU (cpu 10.0%, disk 2.5%, remote 0.0%)\n";
  EXPECT_TRUE(screen.ends_with(caches)) << screen;  // nothing happened: no further line
  s.failed_load_tokens = 512;
  s.stalled_loads = 3;
  s.failed_remote_writes = 7;
  s.failed_stores = 2;
  s.health = {.failed_remote_gets = 10, .unhealthy_periods = 2, .unhealthy_s = 600.5};
  s.blocking_get_timeouts = {.timeout_s = 10, .fetches = 4, .chunks = 9};
  s.memory_waits = {.loads = 6, .wait_s = 1.5};
  s.async_loading.lookups = 100;
  s.async_loading.timeouts = 1;
  s.async_loading.prefetch_bytes = 3ull << 30;
  s.async_loading.busy_waits = 5;
  s.tier_capacity_bytes = {80.0 * scenario::kGiB, 8.0 * scenario::kGiB, 0};
  s.tier_bytes_peak = {40.0 * scenario::kGiB, 8.0 * scenario::kGiB, 0};
  s.tier_bytes_mean = {20.0 * scenario::kGiB, 6.0 * scenario::kGiB, 0};
  s.tier_evictions = {11, 12, 0};
  s.disk_leaked_bytes = 1.5 * scenario::kGiB;
  s.page_cache.capacity_bytes = 64.0 * scenario::kGiB;
  s.page_cache.peak_bytes = 32.0 * scenario::kGiB;
  s.page_cache.hit_bytes = static_cast<uint64_t>(2 * scenario::kGiB);
  s.page_cache.miss_bytes = static_cast<uint64_t>(scenario::kGiB);
  screen = RunRecorder::screen(s);
  EXPECT_TRUE(screen.ends_with(
      caches +
      "  failures  512 tokens recomputed after failed loads, 3 loads upstream would block on\n"
      "  failures  LMCache stores raised in 2 steps, where upstream's engine stops; kvtwin\n"
      "            dropped the rest of those steps' stores and went on\n"
      "  failures  7 layerwise objects never reached the remote tier: LMCache f4261ef6\n"
      "            cannot serialize them (lmcache.upstream_fixes = true applies the fix)\n"
      "  health    10 failed Redis reads; the health check failed 2 times, for 600.5 s\n"
      "            in all (summed over instances)\n"
      "  waits     6 loads slept 1.5 s in all for CPU memory (upstream's busy loop) until\n"
      "            disk / Redis writes freed some\n"
      "  timeouts  4 remote fetches waited over 10 s for a GET: upstream fails their\n"
      "            last 9 chunks, kvtwin loads them\n"
      "  async     100 lookups, 1 timed out, 3.0 GiB prefetched per rank, 5 busy waits\n"
      "  cpu       peak 40.0 GiB of 80.0 GiB, mean 20.0 GiB, 11 evictions\n"
      "  disk      peak 8.0 GiB of 8.0 GiB, mean 6.0 GiB, 12 evictions\n"
      "            1.5 GiB of it held no chunk at the end (LMCache f4261ef6's accounting;\n"
      "            lmcache.upstream_fixes = true applies the fixes)\n"
      "  page cache 2.0 GiB of disk reads from memory, 1.0 GiB from the device\n"
      "             peak 32.0 GiB of 64.0 GiB\n"))
      << screen;
  s.failed_stores = 1;
  screen = RunRecorder::screen(s);
  EXPECT_NE(screen.find("  failures  LMCache stores raised in 1 step, where upstream's engine "
                        "stops; kvtwin\n            dropped the rest of that step's stores and "
                        "went on\n"),
            std::string::npos)
      << screen;
}

// With every conditional line and figures a long run can reach (a trace of ten million
// requests, ten-digit token counts, seven-digit event counts, 116 days, terabytes), no line of the
// screen is wider than 100 columns.
TEST(RunRecorder, NoLineOfTheScreenIsWiderThan100Columns) {
  Summary s;
  s.scenario_name = "llama31-70b-tp4-cpu-disk-redis";
  s.instances = 1024;
  s.tensor_parallel = 8;
  s.scheduling = "async";
  s.trace = "traces/mooncake_fast25/conversation_trace.jsonl";
  const uint64_t count = 9'999'999;
  const uint64_t tokens = 9'999'999'999;
  const double seconds = 9'999'999.9;
  const double tib = static_cast<double>(1ull << 40);
  s.finished = s.rejected = s.failed = count;
  s.duration_s = seconds;
  s.has_warmup = true;
  s.warmup_requests = count;
  s.measured_from_s = seconds;
  s.request_throughput = s.goodput = 99'999.99;
  s.input_token_throughput = s.output_token_throughput = static_cast<double>(tokens);
  s.slo_attainment = 1;
  s.ttft = s.tpot = s.itl = s.e2e = {.mean = seconds * 1e3,
                                     .p50 = seconds * 1e3,
                                     .p90 = seconds * 1e3,
                                     .p99 = seconds * 1e3,
                                     .max = 0,
                                     .count = 1};
  s.prefix_caching = s.lmcache_enabled = true;
  s.gpu_kv_usage_peak = s.gpu_kv_usage_mean = 1;
  s.preemptions = count;
  s.failed_load_tokens = tokens;
  s.stalled_loads = s.failed_stores = s.failed_remote_writes = count;
  s.health = {.failed_remote_gets = count, .unhealthy_periods = count, .unhealthy_s = seconds};
  s.blocking_get_timeouts = {.timeout_s = 1'000'000, .fetches = count, .chunks = count};
  s.memory_waits = {.loads = count, .wait_s = seconds};
  s.async_loading = {.lookups = count,
                     .timeouts = count,
                     .prefetch_bytes = 99ull << 40,
                     .busy_waits = count,
                     .wrong_kv_chunks = 0};
  s.tier_capacity_bytes = {999 * tib, 999 * tib, 999 * tib};
  s.tier_bytes_peak = s.tier_bytes_mean = s.tier_capacity_bytes;
  s.tier_evictions = {tokens, tokens, tokens};
  s.disk_leaked_bytes = 999 * tib;
  s.load.offered_rate = 99'999.99;
  s.load.queue_ms_by_arrival_quarter = {seconds * 1e3, seconds * 1e3, seconds * 1e3, seconds * 1e3};
  s.load.saturated = true;
  s.load.largest_arrival_group = count;
  s.page_cache = {.capacity_bytes = 999 * tib,
                  .peak_bytes = 999 * tib,
                  .hit_bytes = 999ull << 40,
                  .miss_bytes = 999ull << 40,
                  .buffered_write_bytes = 0};
  for (const char* link : {"disk_read", "disk_write", "nic_rx", "nic_tx", "pcie_d2h", "pcie_h2d",
                           "remote_rx", "remote_tx"})
    s.link_bytes[link] = 999 * tib;
  const std::string screen = RunRecorder::screen(s);
  size_t lines = 0;
  for (size_t start = 0; start < screen.size(); ++lines) {
    const size_t end = screen.find('\n', start);
    ASSERT_NE(end, std::string::npos);
    EXPECT_LE(end - start, 100u) << screen.substr(start, end - start);
    start = end + 1;
  }
  EXPECT_GE(lines, 30u);  // every conditional line is there
}

TEST(LogHistogram, QuantilesAreWithinOnePercentOfASample) {
  LogHistogram h;
  for (int i = 1; i <= 1000; ++i) h.add(SimDuration{i} * 1'000'000);  // 1..1000 ms
  EXPECT_EQ(h.count(), 1000u);
  EXPECT_NEAR(h.quantile_ns(0.5), 500e6, 500e6 * 0.01);
  EXPECT_NEAR(h.quantile_ns(0.99), 990e6, 990e6 * 0.01);
  EXPECT_DOUBLE_EQ(h.mean_ns(), 500.5e6);
  EXPECT_EQ(h.max_ns(), 1'000'000'000);
}

// Nearest rank, as workload::percentiles: rank = ceil(q * n). Samples 1..10 ms: q = 0.99 is rank
// ceil(9.9) = 10 (10 ms), q = 0.25 rank ceil(2.5) = 3 (3 ms), q = 0.05 rank ceil(0.5) = 1 (1 ms).
TEST(LogHistogram, QuantilesUseTheNearestRankRoundedUp) {
  LogHistogram h;
  for (int i = 1; i <= 10; ++i) h.add(SimDuration{i} * 1'000'000);
  EXPECT_NEAR(h.quantile_ns(0.99), 10e6, 10e6 * 0.01);
  EXPECT_NEAR(h.quantile_ns(0.25), 3e6, 3e6 * 0.01);
  EXPECT_NEAR(h.quantile_ns(0.05), 1e6, 1e6 * 0.01);
  EXPECT_NEAR(h.quantile_ns(1.0), 10e6, 10e6 * 0.01);
}

// A quantile is a bucket's midpoint clamped to the samples: never above the largest sample nor
// below the smallest. 2,728,994 ns lies below its bucket's midpoint (2,739,384 ns: the ITL max
// of a fuzz case whose p99 came out above it), 4,000,000 ns above its own (3,998,205 ns), 700 ns
// in bucket 0 (midpoint 500 ns); runs of each value report it exactly at every quantile.
TEST(LogHistogram, QuantilesStayWithinTheSmallestAndLargestSample) {
  for (SimDuration v : {SimDuration{2'728'994}, SimDuration{4'000'000}, SimDuration{700}}) {
    LogHistogram h;
    for (int i = 0; i < 5; ++i) h.add(v);
    for (double q : {0.01, 0.5, 0.9, 0.99, 1.0}) EXPECT_EQ(h.quantile_ns(q), double(v)) << v;
  }
  // 4 ms and 4.012 ms share a bucket: every quantile lies between them.
  LogHistogram h;
  for (int i = 0; i < 99; ++i) h.add(4'012'000);
  h.add(4'000'000);
  for (double q : {0.01, 0.5, 1.0}) {
    EXPECT_GE(h.quantile_ns(q), 4'000'000.0) << q;
    EXPECT_LE(h.quantile_ns(q), 4'012'000.0) << q;
  }
}

TEST(ChromeTrace, PrintsExactMicrosecondsAndCapsEvents) {
  EXPECT_EQ(ChromeTrace::micros(1'234'567), "1234.567");
  EXPECT_EQ(ChromeTrace::micros(5'000), "5");
  EXPECT_EQ(ChromeTrace::micros(5'010), "5.01");
  EXPECT_EQ(ChromeTrace::micros(7), "0.007");
  EXPECT_EQ(ChromeTrace::micros(0), "0");
  EXPECT_EQ(ChromeTrace::micros(1'000'000'000'100), "1000000000.1");
  EXPECT_EQ(ChromeTrace::micros(-1'500), "-1.5");
  EXPECT_EQ(ChromeTrace::micros(-999), "-0.999");
  std::string appended = "ts=";
  ChromeTrace::append_micros(&appended, 12'340);
  EXPECT_EQ(appended, "ts=12.34");
  std::string path = kvtwin::testing::scratch_dir() + "/t.json";
  {
    ChromeTrace t(path, 2);
    t.name_process(1, "instance 0");
    for (int i = 0; i < 5; ++i) t.complete(1, 0, "step", i * 1000, 500, "\"tokens\": 3");
    EXPECT_EQ(t.written(), 2);
    EXPECT_EQ(t.dropped(), 3);
  }
  {  // an event without arguments and a name that needs escaping, written after a long one
    ChromeTrace t(path + ".2", 10);
    t.complete(2, 7, std::string(300, 'x'), 1, 2, "\"a\": 1");
    t.complete(-3, 12, "say \"hi\"\n", 123'456'789, 1'000, "");
  }
  EXPECT_NE(slurp(path + ".2")
                .find(",\n{\"ph\": \"X\", \"pid\": -3, \"tid\": 12, \"name\": "
                      "\"say \\\"hi\\\"\\n\", \"ts\": 123456.789, \"dur\": 1},\n"),
            std::string::npos)
      << slurp(path + ".2");
  std::string text = slurp(path);
  EXPECT_NE(text.find("{\"ph\": \"X\", \"pid\": 1, \"tid\": 0, \"name\": \"step\", \"ts\": 1, "
                      "\"dur\": 0.5, \"args\": {\"tokens\": 3}}"),
            std::string::npos);
  EXPECT_NE(text.find("\"dropped\": 3"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 4), "\n]}\n");
}

RequestRecord record(uint64_t index, SimTime arrival, SimTime first_token, SimTime finish,
                     int64_t out) {
  RequestRecord r;
  r.index = index;
  r.arrival = arrival;
  r.first_scheduled = arrival;
  r.first_token = first_token;
  r.finish = finish;
  r.prompt_tokens = 100;
  r.output_tokens = out;
  r.gpu_hit_tokens = 40;
  return r;
}

// SLOs of 100 ms TTFT and 10 ms TPOT; no plots, no trace.
scenario::Scenario slo_scenario() {
  return scenario::load_scenario_text(
      "[slo]\nttft_ms = 100\ntpot_ms = 10\n[output]\nplots = false\nchrome_trace = false\n",
      "s.toml", ".");
}

TEST(RunRecorder, SummaryFollowsTheRecordsAndTheSlos) {
  scenario::Scenario s = slo_scenario();
  std::string dir = kvtwin::testing::scratch_dir() + "/run";
  RunRecorder rec(s, "trace.csv", dir);
  // TTFT 50 ms, TPOT (250-50)/20 = 10 ms: meets both SLOs.
  rec.on_request_done(record(0, 0, 50'000'000, 250'000'000, 21));
  // TTFT 200 ms: misses the TTFT SLO; one output token, no TPOT.
  rec.on_request_done(record(1, 1'000'000'000, 1'200'000'000, 1'200'000'000, 1));
  RequestRecord rejected;
  rejected.index = 2;
  rejected.arrival = 0;
  rejected.prompt_tokens = 100;
  rejected.rejected = true;
  rec.on_request_done(rejected);
  // Ended by a failed KV load (no token, 64 tokens lost): counted apart, out of every latency.
  RequestRecord failed = record(3, 0, -1, 1'500'000'000, 0);
  failed.load_error = true;
  failed.failed_load_tokens = 64;
  failed.priority = -3;
  rec.on_request_done(failed);
  const Summary& sum = rec.finish(2'000'000'000);
  EXPECT_EQ(sum.requests, 4u);
  EXPECT_EQ(sum.finished, 2u);
  EXPECT_EQ(sum.rejected, 1u);
  EXPECT_EQ(sum.failed, 1u);
  EXPECT_EQ(sum.failed_load_tokens, 64u);
  EXPECT_EQ(sum.ttft.count, 2u);
  EXPECT_EQ(sum.e2e.count, 2u);
  EXPECT_DOUBLE_EQ(sum.duration_s, 1.2);
  EXPECT_DOUBLE_EQ(sum.ttft.p50, 50);
  EXPECT_DOUBLE_EQ(sum.ttft.max, 200);
  EXPECT_EQ(sum.tpot.count, 1u);
  EXPECT_DOUBLE_EQ(sum.tpot.mean, 10);
  EXPECT_DOUBLE_EQ(sum.slo_attainment, 0.5);
  EXPECT_DOUBLE_EQ(sum.goodput, 1 / 1.2);
  // Throughput counts the finished requests' tokens, as vllm bench serve does: the rejected and
  // the failed request's prompts were never served.
  EXPECT_DOUBLE_EQ(sum.request_throughput, 2 / 1.2);
  EXPECT_DOUBLE_EQ(sum.input_token_throughput, 200 / 1.2);
  EXPECT_DOUBLE_EQ(sum.output_token_throughput, 22 / 1.2);
  // Every request's hits count (the failed one had its 40 before its load failed), over every
  // request's prompt tokens: the summary's counts are requests.csv's column sums.
  EXPECT_EQ(sum.gpu_hit_tokens, 120u);
  EXPECT_DOUBLE_EQ(sum.gpu_hit_rate, 120.0 / 400.0);
  std::string csv = slurp(dir + "/requests.csv");
  EXPECT_NE(csv.find(",preemptions,rejected,load_error,priority\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n3,0,0.000000,0.000000,,1.500000,,,,100,0,40,0,0,0,0,64,0,0,1,-3\n"),
            std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\n0,0,0.000000,0.000000,0.050000,0.250000,50.000,10.000,250.000,100,21,40,"),
            std::string::npos);
  EXPECT_NE(slurp(dir + "/summary.json").find("\"slo_attainment\": 0.5"), std::string::npos);
  EXPECT_EQ(scenario::load_scenario_file(dir + "/scenario.toml").slo.ttft_ms, 100);
}

// Requests of several trace priorities get a class each (lowest first): counts, SLO attainment and
// latencies of their own finished requests; a run of one priority gets none.
TEST(RunRecorder, SummarySplitsTheLatenciesByPriority) {
  scenario::Scenario s = slo_scenario();
  std::string dir = kvtwin::testing::scratch_dir() + "/run";
  RunRecorder rec(s, "trace.csv", dir);
  RequestRecord a = record(0, 0, 50'000'000, 250'000'000, 21);  // TTFT 50 ms, meets the SLOs
  a.priority = 2;
  RequestRecord b = record(1, 0, 200'000'000, 400'000'000, 21);  // TTFT 200 ms, misses
  b.priority = 2;
  RequestRecord c = record(2, 0, 30'000'000, 230'000'000, 21);  // TTFT 30 ms
  c.priority = -1;
  c.lmcache_hit_tokens = 7;
  RequestRecord d;  // rejected: counted in its class, out of its latencies
  d.index = 3;
  d.priority = -1;
  d.rejected = true;
  for (const RequestRecord& r : {a, b, c, d}) rec.on_request_done(r);
  const Summary& sum = rec.finish(1'000'000'000);
  ASSERT_EQ(sum.by_priority.size(), 2u);
  const auto& lo = sum.by_priority[0];
  const auto& hi = sum.by_priority[1];
  EXPECT_EQ(lo.priority, -1);
  EXPECT_EQ(lo.requests, 2u);
  EXPECT_EQ(lo.finished, 1u);
  EXPECT_EQ(lo.lmcache_hit_tokens, 7u);
  EXPECT_DOUBLE_EQ(lo.ttft.mean, 30);
  EXPECT_DOUBLE_EQ(lo.slo_attainment, 1);
  EXPECT_EQ(hi.priority, 2);
  EXPECT_EQ(hi.finished, 2u);
  EXPECT_DOUBLE_EQ(hi.ttft.mean, 125);
  EXPECT_DOUBLE_EQ(hi.ttft.max, 200);
  EXPECT_DOUBLE_EQ(hi.e2e.max, 400);
  EXPECT_DOUBLE_EQ(hi.slo_attainment, 0.5);
  const std::string json = slurp(dir + "/summary.json");
  const size_t classes = json.find("\"by_priority\": [");
  ASSERT_NE(classes, std::string::npos) << json;
  EXPECT_LT(json.find("\"priority\": -1,", classes), json.find("\"priority\": 2,", classes));
  EXPECT_NE(RunRecorder::screen(sum).find("  prio 2"), std::string::npos);

  RunRecorder one(s, "trace.csv", dir);
  one.on_request_done(a);
  one.on_request_done(b);
  EXPECT_TRUE(one.finish(1'000'000'000).by_priority.empty());
  EXPECT_EQ(slurp(dir + "/summary.json").find("by_priority"), std::string::npos);
}

// The run says which engine loop it modelled, in summary.json and on the screen.
TEST(RunRecorder, SummaryNamesTheEngineLoop) {
  for (bool async : {true, false}) {
    scenario::Scenario s = scenario::load_scenario_text(
        std::string("[vllm]\nasync_scheduling = ") + (async ? "true" : "false") +
            "\n[output]\nplots = false\nchrome_trace = false\n",
        "s.toml", ".");
    std::string dir = kvtwin::testing::scratch_dir() + "/run";
    RunRecorder rec(s, "trace.csv", dir);
    rec.on_request_done(record(0, 0, 50'000'000, 250'000'000, 21));
    const Summary& sum = rec.finish(1'000'000'000);
    const char* loop = async ? "async" : "sync";
    EXPECT_EQ(sum.scheduling, loop);
    EXPECT_NE(slurp(dir + "/summary.json").find(std::string("\"scheduling\": \"") + loop + "\""),
              std::string::npos);
    EXPECT_NE(RunRecorder::screen(sum).find(std::string(loop) + " scheduling)"), std::string::npos);
  }
}

// summary.json's `load`: the finished requests in arrival order (they end out of it), cut into
// quarters of two, each with its mean queue delay; the rejected request arrives last. Saturated
// when the last quarter waited more than slo.ttft_ms (100 ms) longer than the first (exactly
// 100 ms longer is not) and the last request to finish ended more than 100 ms after the last
// arrival.
TEST(RunRecorder, LoadComparesTheQueueOfTheFirstAndLastQuartersOfArrivals) {
  const SimTime s1 = 1'000'000'000, ms1 = 1'000'000;
  for (SimTime last_queue_ms : {130, 131}) {
    scenario::Scenario s = slo_scenario();
    std::string dir = kvtwin::testing::scratch_dir() + "/run";
    RunRecorder rec(s, "trace.csv", dir);
    // Arrivals 0 .. 7 s, queue delays 10, 20 | 30, 30 | 50, 70 | 100, last_queue_ms; each ends
    // 2 s after its arrival. They are given latest arrival first.
    const SimTime queue_ms[] = {10, 20, 30, 30, 50, 70, 100, last_queue_ms};
    for (int i = 7; i >= 0; --i) {
      RequestRecord r = record(i, i * s1, 0, i * s1 + 2 * s1, 1);
      r.first_scheduled = r.arrival + queue_ms[i] * ms1;
      r.first_token = r.first_scheduled;
      rec.on_request_done(r);
    }
    RequestRecord rejected;
    rejected.index = 8;
    rejected.arrival = 8 * s1;
    rejected.rejected = true;
    rec.on_request_done(rejected);
    const Summary& sum = rec.finish(10 * s1);
    EXPECT_DOUBLE_EQ(sum.load.arrival_span_s, 8);
    EXPECT_DOUBLE_EQ(sum.load.offered_rate, 9.0 / 8);
    // At 8 s only the request that arrived at 7 s is unfinished (the one of 6 s ends at 8 s).
    EXPECT_EQ(sum.load.in_system_at_last_arrival, 1u);
    EXPECT_DOUBLE_EQ(sum.load.drain_s, 1);
    const auto& q = sum.load.queue_ms_by_arrival_quarter;
    EXPECT_DOUBLE_EQ(q[0], 15);
    EXPECT_DOUBLE_EQ(q[1], 30);
    EXPECT_DOUBLE_EQ(q[2], 60);
    EXPECT_DOUBLE_EQ(q[3], (100 + last_queue_ms) / 2.0);
    const bool saturated = last_queue_ms == 131;
    EXPECT_EQ(sum.load.saturated, saturated);
    const std::string json = slurp(dir + "/summary.json");
    EXPECT_NE(json.find(std::string("\"saturated\": ") + (saturated ? "true" : "false")),
              std::string::npos)
        << json;
    const std::string screen = RunRecorder::screen(sum);
    EXPECT_NE(
        screen.find("\nload        1.12 req/s offered; queue 0.0 s first quarter of arrivals, "
                    "0.1 s last\n"),
        std::string::npos)
        << screen;
    EXPECT_EQ(screen.find("  saturated the queue grew") != std::string::npos, saturated) << screen;

    // The same requests with the rejected one arriving at 8.9 s: 100 ms before the last finished
    // request's end, which is not more than the TTFT target.
    RunRecorder late(s, "trace.csv", "");
    for (int i = 7; i >= 0; --i) {
      RequestRecord r = record(i, i * s1, 0, i * s1 + 2 * s1, 1);
      r.first_scheduled = r.arrival + queue_ms[i] * ms1;
      r.first_token = r.first_scheduled;
      late.on_request_done(r);
    }
    rejected.arrival = 8'900 * ms1;
    late.on_request_done(rejected);
    const Summary& drained = late.finish(10 * s1);
    EXPECT_DOUBLE_EQ(drained.load.drain_s, 0.1);
    EXPECT_DOUBLE_EQ(drained.load.queue_ms_by_arrival_quarter[3], q[3]);
    EXPECT_FALSE(drained.load.saturated);
  }
}

// From kBurstHint requests at one instant on, the screen points to workload.arrivals = "spread";
// summary.json gives the count either way.
TEST(RunRecorder, TheScreenPointsToSpreadArrivalsFromEightAtOnce) {
  for (uint64_t group : {7, 8}) {
    scenario::Scenario s = slo_scenario();
    std::string dir = kvtwin::testing::scratch_dir() + "/run";
    RunRecorder rec(s, "trace.csv", dir);
    rec.on_request_done(record(0, 0, 50'000'000, 250'000'000, 21));
    rec.set_largest_arrival_group(group);
    const Summary& sum = rec.finish(1'000'000'000);
    EXPECT_EQ(sum.load.largest_arrival_group, group);
    EXPECT_NE(slurp(dir + "/summary.json")
                  .find("\"largest_arrival_group\": " + std::to_string(group) + "\n"),
              std::string::npos);
    const std::string screen = RunRecorder::screen(sum);
    const std::string hint =
        "\n  bursts    up to 8 requests arrive at one instant; "
        "workload.arrivals = \"spread\"\n";
    EXPECT_EQ(screen.find(hint) != std::string::npos, group == 8) << screen;
  }
}

TEST(RunRecorder, ARequestExactlyAtBothSloLimitsMeetsThem) {
  // The SLOs are upper bounds met with equality (TTFT <= ttft_ms, TPOT <= tpot_ms): TTFT 100 ms
  // and TPOT (300 − 100) / 20 = 10 ms count toward goodput.
  scenario::Scenario s = slo_scenario();
  RunRecorder rec(s, "trace.csv", kvtwin::testing::scratch_dir() + "/run");
  rec.on_request_done(record(0, 0, 100'000'000, 300'000'000, 21));
  const Summary& sum = rec.finish(1'000'000'000);
  EXPECT_DOUBLE_EQ(sum.slo_attainment, 1.0);
  EXPECT_DOUBLE_EQ(sum.goodput, 1 / 0.3);
}

TEST(RunRecorder, RepeatedSamplesWeighTheMeansByTheirCount) {
  // An idle gap's collapsed samples count `count` times: usage 0.5 once, 0.5 three more times
  // (on_repeated_samples), then 0.1 → mean (0.5 + 3·0.5 + 0.1) / 5 = 0.42; CPU tier bytes
  // (100 + 3·100 + 600) / 5 = 200.
  scenario::Scenario s = scenario::load_scenario_text(
      "[output]\nplots = false\nchrome_trace = false\n", "s.toml", ".");
  RunRecorder rec(s, "trace.csv", kvtwin::testing::scratch_dir() + "/run");
  Sample a;
  a.gpu_kv_usage_mean = 0.5;
  a.tier_bytes[kTierCpu] = 100;
  rec.on_sample(a);
  rec.on_repeated_samples(a, 3);
  Sample b = a;
  b.t = 2'000'000'000;
  b.gpu_kv_usage_mean = 0.1;
  b.tier_bytes[kTierCpu] = 600;
  rec.on_sample(b);
  const Summary& sum = rec.finish(2'000'000'000);
  EXPECT_DOUBLE_EQ(sum.gpu_kv_usage_mean, 0.42);
  EXPECT_DOUBLE_EQ(sum.tier_bytes_mean[kTierCpu], 200);
}

// Each link's rate over an interval is the bytes it moved since the previous sample over the
// interval's length. timeseries.csv gives, per kind, the busiest link's (two pcie_h2d links: the
// first is busier in the first interval, the second in the second); summary.json gives each
// kind's highest over the window. The window's first row counts from the warm-up's last sample,
// and the warm-up's own interval (10 GB/s on disk_write) reaches no figure. A kind without a
// column (the page cache's) is in the summary only.
TEST(RunRecorder, LinkRatesAreBytesPerIntervalAndTheirPeaksTheHighestInTheWindow) {
  scenario::Scenario s = scenario::load_scenario_text(
      "[workload]\nstart_s = 10\nwarmup_s = 2\n[output]\nplots = false\nchrome_trace = false\n",
      "s.toml", ".");
  const std::string dir = kvtwin::testing::scratch_dir() + "/run";
  RunRecorder rec(s, "trace.csv", dir);
  rec.set_link_kinds({"pcie_h2d", "pcie_h2d", "disk_write", "page_cache"});
  auto sample = [&](SimTime t, std::vector<double> bytes) {
    Sample x;
    x.t = t;
    x.link_bytes = std::move(bytes);
    rec.on_sample(x);
  };
  sample(0, {0, 0, 0, 0});
  sample(1'000'000'000, {0, 0, 10e9, 0});  // warm-up: 10 GB/s on disk_write
  rec.begin_measurement(1'000'000'000);
  sample(1'500'000'000, {1.5e9, 0.5e9, 10e9, 0});       // 0.5 s: 3 and 1 GB/s
  sample(2'500'000'000, {2.5e9, 3.0e9, 12e9, 7.25e9});  // 1 s: 1, 2.5, 2, 7.25 GB/s
  rec.set_link_stats("pcie_h2d", 3.0e9 + 5.5e9 - 2e9, 0.5, 35e9);
  const Summary& sum = rec.finish(2'500'000'000);
  EXPECT_DOUBLE_EQ(sum.link_peak_rate.at("pcie_h2d"), 3e9);
  EXPECT_DOUBLE_EQ(sum.link_peak_rate.at("disk_write"), 2e9);
  EXPECT_DOUBLE_EQ(sum.link_peak_rate.at("page_cache"), 7.25e9);
  EXPECT_DOUBLE_EQ(sum.peak_gbps("pcie_h2d"), 3);
  EXPECT_DOUBLE_EQ(sum.peak_gbps("nic_rx"), 0);
  const std::string series = slurp(dir + "/timeseries.csv");
  EXPECT_EQ(series.substr(series.find('\n') + 1),
            "1.500,0,0,0.0000,0.0000,0.000,0.000,0.000,0.0,0.000,3.000,0.000,0.000,0.000,0.000,"
            "0.000,0.000,0.000\n"
            "2.500,0,0,0.0000,0.0000,0.000,0.000,0.000,0.0,0.000,2.500,0.000,0.000,2.000,0.000,"
            "0.000,0.000,0.000\n");
  EXPECT_NE(slurp(dir + "/summary.json")
                .find("\"pcie_h2d\": {\n      \"bytes\": 6500000000,\n      "
                      "\"busiest_busy_fraction\": 0.5,\n      \"peak_gbps\": 3,\n      "
                      "\"capacity_gbps\": 35\n    }"),
            std::string::npos)
      << slurp(dir + "/summary.json");
}

// A warm-up (workload.warmup_s > 0): nothing is reported before begin_measurement, and from there
// on only what starts at or after it. The warm-up's samples give no row and no weight in the
// means, but the first row's rates count from the last of them (1 s before: 600 tokens/s, and
// no window request ended yet); the step that started before the window and ended in it is left
// out, as is a warm-up request's record (counted apart, and named in summary.json and on screen).
TEST(RunRecorder, AWarmupIsLeftOutOfEverySampleStepAndRequest) {
  scenario::Scenario s = scenario::load_scenario_text(
      "[workload]\nstart_s = 10\nwarmup_s = 2\n[output]\nplots = false\n", "s.toml", ".");
  std::string dir = kvtwin::testing::scratch_dir() + "/run";
  RunRecorder rec(s, "trace.csv", dir);
  EXPECT_FALSE(rec.measuring());
  Sample a;
  a.t = 1'000'000'000;
  a.gpu_kv_usage_mean = 0.9;
  a.gpu_kv_usage_max = 0.9;
  a.computed_tokens = 400;
  rec.on_sample(a);
  rec.on_repeated_samples(a, 5);
  rec.on_step(0, 1'000'000'000, 500'000'000, 400, 1);
  RequestRecord warm = record(7, 0, 50'000'000, 1'200'000'000, 21);
  warm.warmup = true;
  rec.on_request_done(warm);
  rec.begin_measurement(2'000'000'000);
  EXPECT_TRUE(rec.measuring());
  rec.on_step(0, 1'999'000'000, 2'000'000, 99, 1);  // began in the warm-up
  rec.on_step(0, 2'001'000'000, 1'000'000, 64, 2);
  Sample b = a;
  b.t = 2'000'000'000;
  b.gpu_kv_usage_mean = 0.3;
  b.gpu_kv_usage_max = 0.4;
  b.computed_tokens = 1000;
  rec.on_sample(b);
  rec.on_request_done(record(8, 2'000'000'000, 2'050'000'000, 2'250'000'000, 21));
  const Summary& sum = rec.finish(3'000'000'000);
  EXPECT_EQ(sum.requests, 1u);
  EXPECT_EQ(sum.warmup_requests, 1u);
  EXPECT_DOUBLE_EQ(sum.measured_from_s, 2.0);
  EXPECT_EQ(sum.prompt_tokens, 100u);
  EXPECT_DOUBLE_EQ(sum.ttft.max, 50);
  EXPECT_EQ(sum.steps, 1u);
  EXPECT_DOUBLE_EQ(sum.mean_batch_tokens, 64);
  EXPECT_DOUBLE_EQ(sum.gpu_kv_usage_mean, 0.3);
  EXPECT_DOUBLE_EQ(sum.gpu_kv_usage_peak, 0.4);
  const std::string series = slurp(dir + "/timeseries.csv");
  EXPECT_EQ(series.substr(series.find('\n') + 1),
            "2.000,0,0,0.3000,0.4000,0.000,0.000,0.000,600.0,0.000,0.000,0.000,0.000,0.000,0.000,"
            "0.000,0.000,0.000\n");
  const std::string csv = slurp(dir + "/requests.csv");
  EXPECT_EQ(csv.find("\n7,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n8,"), std::string::npos) << csv;
  EXPECT_NE(slurp(dir + "/summary.json")
                .find("\"warmup\": {\n    \"requests\": 1,\n    \"measured_from_s\": 2\n  }"),
            std::string::npos)
      << slurp(dir + "/summary.json");
  EXPECT_NE(RunRecorder::screen(sum).find("warm-up     1 requests replayed first; figures from "
                                          "2.0 s on\n"),
            std::string::npos);
}

}  // namespace
}  // namespace kvtwin::sim::report
