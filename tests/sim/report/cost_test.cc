// What a deployment costs (sim/report/cost.h): the priced quantities from a summary, the hourly
// price and what a unit of service cost; summary.json's `cost` block, the one-screen lines, and
// a run whose prices change no other byte.
#include "sim/report/cost.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <string>

#include "sim/cli/run_command.h"
#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::report {
namespace {

using scenario::kGiB;

// Three instances of two GPUs each, an LMCache CPU pool of 40 GiB in all, page caches of 8 GiB,
// disk tiers of 600 GiB, a remote store that held 12 GiB at most; 1,000 output tokens/s, 0.5
// requests/s within the SLOs.
Summary deployment() {
  Summary s;
  s.instances = 3;
  s.tensor_parallel = 2;
  s.tier_capacity_bytes[kTierCpu] = 40 * kGiB;
  s.page_cache.capacity_bytes = 8 * kGiB;
  s.tier_capacity_bytes[kTierDisk] = 600 * kGiB;
  s.tier_bytes_peak[kTierRemote] = 12 * kGiB;
  s.tier_bytes_peak[kTierCpu] = 39 * kGiB;  // what a tier held is not what it costs
  s.output_token_throughput = 1000;
  s.goodput = 0.5;
  return s;
}

// By hand: GPUs 6 · 2.5 = 15, instances 3 · 1 = 3, memory 48 GiB · 0.01 = 0.48, disk 600 ·
// 0.0005 = 0.3, remote 12 · 0.02 = 0.24; 19.02 an hour. An hour serves 3.6 M output tokens
// (19.02 / 3.6 = 5.283333 per million) and 1,800 requests within the SLOs (19.02 / 1.8 =
// 10.566667 per thousand).
TEST(Cost, IsThePriceOfEachQuantityTheDeploymentHolds) {
  const scenario::CostConfig prices{.gpu_per_hour = 2.5,
                                    .instance_per_hour = 1,
                                    .cpu_memory_gib_per_hour = 0.01,
                                    .disk_gib_per_hour = 0.0005,
                                    .remote_gib_per_hour = 0.02};
  const Cost c = deployment_cost(prices, deployment());
  ASSERT_TRUE(c.priced);
  EXPECT_DOUBLE_EQ(c.gpus, 6);
  EXPECT_DOUBLE_EQ(c.instances, 3);
  EXPECT_DOUBLE_EQ(c.cpu_memory_gib, 48);
  EXPECT_DOUBLE_EQ(c.disk_gib, 600);
  EXPECT_DOUBLE_EQ(c.remote_gib, 12);
  EXPECT_DOUBLE_EQ(c.gpu_per_hour, 15);
  EXPECT_DOUBLE_EQ(c.instance_per_hour, 3);
  EXPECT_DOUBLE_EQ(c.cpu_memory_per_hour, 0.48);
  EXPECT_DOUBLE_EQ(c.disk_per_hour, 0.3);
  EXPECT_DOUBLE_EQ(c.remote_per_hour, 0.24);
  EXPECT_DOUBLE_EQ(c.per_hour, 19.02);
  ASSERT_TRUE(c.per_million_output_tokens && c.per_thousand_good_requests);
  EXPECT_NEAR(*c.per_million_output_tokens, 5.283333, 1e-6);
  EXPECT_NEAR(*c.per_thousand_good_requests, 10.566667, 1e-6);

  // One price alone counts one quantity alone.
  const Cost g = deployment_cost({.gpu_per_hour = 2.5}, deployment());
  EXPECT_DOUBLE_EQ(g.per_hour, 15);
  EXPECT_DOUBLE_EQ(g.cpu_memory_per_hour, 0);
}

TEST(Cost, NothingPricedIsNoCostAndNoJsonBlock) {
  const Cost c = deployment_cost(scenario::CostConfig{}, deployment());
  EXPECT_FALSE(c.priced);
  EXPECT_EQ(c.per_hour, 0);
  EXPECT_FALSE(c.per_million_output_tokens);
  Summary s = deployment();
  s.cost = c;
  EXPECT_EQ(RunRecorder::summary_json(s).find("\"cost\""), std::string::npos);
  EXPECT_EQ(RunRecorder::screen(s).find("cost "), std::string::npos);
}

// A deployment that served nothing has an hourly price and no price per unit served: null in
// summary.json, "nothing served" on the screen; one that met no SLO has no price per request.
TEST(Cost, NothingServedHasNoPricePerUnit) {
  const scenario::CostConfig prices{.gpu_per_hour = 2};
  Summary s = deployment();
  s.output_token_throughput = 0;
  s.goodput = 0;
  s.cost = deployment_cost(prices, s);
  EXPECT_DOUBLE_EQ(s.cost.per_hour, 12);
  EXPECT_FALSE(s.cost.per_million_output_tokens);
  EXPECT_FALSE(s.cost.per_thousand_good_requests);
  const std::string json = RunRecorder::summary_json(s);
  EXPECT_NE(json.find("\"per_million_output_tokens\": null"), std::string::npos) << json;
  EXPECT_NE(json.find("\"per_thousand_good_requests\": null"), std::string::npos) << json;
  EXPECT_NE(RunRecorder::screen(s).find("cost        12.00 per hour: GPUs 12.00\n"
                                        "            nothing served\n"),
            std::string::npos)
      << RunRecorder::screen(s);
  s.output_token_throughput = 1000;
  s.cost = deployment_cost(prices, s);
  EXPECT_NE(RunRecorder::screen(s).find("            3.333 per 1M output tokens; no request met "
                                        "the SLOs\n"),
            std::string::npos)
      << RunRecorder::screen(s);
}

// The screen lists the priced parts after the total and continues them under it rather than
// pass 100 columns.
TEST(Cost, TheScreenLineStaysWithinAHundredColumns) {
  Summary s = deployment();
  s.cost = deployment_cost({.gpu_per_hour = 123456,
                            .instance_per_hour = 23456,
                            .cpu_memory_gib_per_hour = 3456,
                            .disk_gib_per_hour = 456,
                            .remote_gib_per_hour = 56},
                           s);
  const std::string screen = RunRecorder::screen(s);
  const size_t at = screen.find("cost        ");
  ASSERT_NE(at, std::string::npos) << screen;
  const std::string block = screen.substr(at, screen.find("load ", at) - at);
  EXPECT_EQ(block,
            "cost        1251264.00 per hour: GPUs 740736.00, instances 70368.00, CPU memory "
            "165888.00,\n"
            "            disk 273600.00, remote 672.00\n"
            "            347573 per 1M output tokens, 695147 per 1k requests within the SLOs\n");
  for (size_t from = 0; from < screen.size();) {
    const size_t end = screen.find('\n', from);
    EXPECT_LE(end - from, 100u) << screen.substr(from, end - from);
    from = end + 1;
  }
}

// A run with prices: summary.json's cost is the formula over the run's own figures, and without
// its `cost` block the summary is byte for byte the unpriced run's (prices change no decision).
TEST(Cost, APricedRunCostsItsOwnFiguresAndChangesNothingElse) {
  const std::string plain_dir = kvtwin::testing::scratch_subdir();
  const std::string priced_dir = kvtwin::testing::scratch_subdir();
  const std::string base =
      "[workload]\nmax_requests = 120\n[output]\nplots = false\nchrome_trace = false\n"
      "[cluster]\ninstances = 2\n[lmcache]\nenabled = true\nmax_local_cpu_size_gb = 8\n"
      "max_local_disk_size_gb = 50\n[links]\npage_cache_gb = 4\n";
  const scenario::Scenario plain = scenario::load_scenario_text(base, "s.toml", ".");
  const scenario::Scenario priced = scenario::load_scenario_text(
      base +
          "[cost]\ngpu_per_hour = 3\ninstance_per_hour = 0.5\ncpu_memory_gib_per_hour = 0.004\n"
          "disk_gib_per_hour = 0.0001\n",
      "s.toml", ".");
  const Summary a = cli::simulate(plain, "", plain_dir, true, nullptr);
  const Summary b = cli::simulate(priced, "", priced_dir, true, nullptr);
  EXPECT_FALSE(a.cost.priced);
  ASSERT_TRUE(b.cost.priced);

  const std::string json = kvtwin::testing::slurp(priced_dir + "/summary.json");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  ASSERT_EQ(parser.parse(json).get(root), simdjson::SUCCESS);
  auto num = [&](const char* path) {
    double v = 0;
    EXPECT_EQ(root.at_pointer(path).get(v), simdjson::SUCCESS) << path;
    return v;
  };
  const double instances = num("/instances");
  const double memory_gib =
      (num("/lmcache/cpu/capacity_bytes") + num("/lmcache/disk/page_cache/capacity_bytes")) / kGiB;
  const double disk_gib = num("/lmcache/disk/capacity_bytes") / kGiB;
  EXPECT_GT(memory_gib, 0);
  EXPECT_GT(disk_gib, 0);
  const double per_hour = instances * 3 + instances * 0.5 + memory_gib * 0.004 + disk_gib * 0.0001;
  EXPECT_NEAR(num("/cost/per_hour"), per_hour, 1e-6 * per_hour);
  EXPECT_NEAR(num("/cost/per_million_output_tokens"),
              per_hour / (num("/throughput/output_tokens_per_s") * 3600) * 1e6, 1e-6);
  EXPECT_NEAR(num("/cost/per_thousand_good_requests"),
              per_hour / (num("/goodput/requests_per_s") * 3600) * 1e3, 1e-6);

  // Without the block, the unpriced run's bytes.
  std::string stripped = json;
  const size_t from = stripped.find("\n  \"cost\": {");
  ASSERT_NE(from, std::string::npos);
  const size_t to = stripped.find("\n  },", from);
  stripped.erase(from, to + 5 - from);  // the block and its comma
  EXPECT_EQ(stripped, kvtwin::testing::slurp(plain_dir + "/summary.json"));
  for (const char* file : {"/requests.csv", "/timeseries.csv"})
    EXPECT_EQ(kvtwin::testing::slurp(priced_dir + file), kvtwin::testing::slurp(plain_dir + file))
        << file;
}

TEST(Cost, ANegativePriceIsAnErrorNamingItsLine) {
  try {
    scenario::load_scenario_text("[cost]\n\ngpu_per_hour = -1\n", "s.toml", ".");
    FAIL() << "accepted a negative price";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("s.toml:3: cost.gpu_per_hour"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace kvtwin::sim::report
