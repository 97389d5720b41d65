#include "sim/cli/sweep_command.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "sim/io/input_error.h"
#include "sim/scenario/scenario.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::cli {
namespace {

using kvtwin::testing::read_csv;
using kvtwin::testing::slurp;

// The grid's table follows the grid order whatever the number of threads, and each point is the
// same simulation as a plain run of that scenario.
TEST(Sweep, GridIsDeterministicAcrossJobCounts) {
  std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=60", "output.plots=false"};
  o.vary = {"cluster.instances=1,2", "cluster.router=round_robin,least_loaded"};
  o.quiet = true;
  o.jobs = 1;
  o.out = dir + "/a";
  ASSERT_EQ(run_sweep(o), 0);
  o.jobs = 3;
  o.out = dir + "/b";
  ASSERT_EQ(run_sweep(o), 0);
  std::string a = slurp(dir + "/a/sweep.csv");
  EXPECT_EQ(a, slurp(dir + "/b/sweep.csv"));
  std::istringstream lines(a);
  std::string header, l1, l2, l3, l4;
  std::getline(lines, header);
  std::getline(lines, l1);
  std::getline(lines, l2);
  std::getline(lines, l3);
  std::getline(lines, l4);
  EXPECT_EQ(header.rfind("cluster.instances,cluster.router,requests,", 0), 0u);
  EXPECT_EQ(l1.rfind("1,round_robin,60,", 0), 0u);
  EXPECT_EQ(l2.rfind("1,least_loaded,60,", 0), 0u);
  EXPECT_EQ(l3.rfind("2,round_robin,60,", 0), 0u);
  EXPECT_EQ(l4.rfind("2,least_loaded,60,", 0), 0u);
  // With one instance the router does not matter.
  EXPECT_EQ(l1.substr(l1.find(",60,")), l2.substr(l2.find(",60,")));
  EXPECT_EQ(slurp(dir + "/a/points/0/summary.json"), slurp(dir + "/b/points/0/summary.json"));
}

// A quiet two-point sweep into a scratch directory; sweep.csv's rows, each checked against its
// point's summary.json: the rejected and failed requests, and the failed-load share of the
// prompt tokens.
std::vector<std::map<std::string, std::string>> sweep_two_points(std::vector<std::string> sets,
                                                                 const std::string& vary) {
  using kvtwin::testing::number_after;
  const std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = std::move(sets);
  o.sets.push_back("output.plots=false");
  o.vary = {vary};
  o.quiet = true;
  o.out = dir;
  EXPECT_EQ(run_sweep(o), 0);
  const auto rows = read_csv(dir + "/sweep.csv");
  EXPECT_EQ(rows.size(), 2u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string summary = slurp(dir + "/points/" + std::to_string(i) + "/summary.json");
    for (const char* key : {"rejected", "failed"})
      EXPECT_EQ(number_after(summary, "\"" + std::string(key) + "\": "), std::stod(rows[i].at(key)))
          << key << " in " << summary;
    const double failed_tokens = number_after(summary, "\"failed_load_tokens\": ");
    const double prompt_tokens = number_after(summary, "\"prompt_tokens\": ");
    EXPECT_GT(prompt_tokens, 0);
    EXPECT_NEAR(std::stod(rows[i].at("failed_load_rate")), failed_tokens / prompt_tokens, 1e-6)
        << summary;
  }
  return rows;
}

// Runs a sweep into `dir`, its table captured into *table; returns sweep.csv's rows.
std::vector<std::map<std::string, std::string>> sweep_with_table(SweepOptions o,
                                                                 const std::string& dir,
                                                                 std::string* table) {
  o.out = dir;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_sweep(o), 0);
  *table = ::testing::internal::GetCapturedStdout();
  return read_csv(dir + "/sweep.csv");
}

// The table's lines: the header, one line per point, then the notes.
std::vector<std::string> table_lines(const std::string& table) {
  std::vector<std::string> out;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) out.push_back(line);
  return out;
}

// sweep.csv says how many requests each point rejected (a pool smaller than their prompts) or
// failed, and the share of prompt tokens whose KV load failed, as the point's summary.json does;
// the table flags the points that lost requests.
TEST(Sweep, TheTableCountsRejectedAndFailedRequests) {
  const std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=20", "output.plots=false"};
  o.vary = {"vllm.num_gpu_blocks=200,100000"};
  std::string table;
  const auto rows = sweep_with_table(o, dir, &table);
  ASSERT_EQ(rows.size(), 2u);
  // 200 blocks of 16 tokens hold 3,184 tokens: most of the first 20 prompts do not fit.
  EXPECT_GT(std::stoi(rows[0].at("rejected")), 0);
  EXPECT_EQ(rows[1].at("rejected"), "0");
  // The screen's table flags them after the busiest link, and a note says what they are.
  const std::vector<std::string> lines = table_lines(table);
  ASSERT_GE(lines.size(), 4u) << table;
  EXPECT_TRUE(lines[1].ends_with("%  " + rows[0].at("rejected") + " rejected")) << table;
  EXPECT_EQ(lines[2].find("rejected"), std::string::npos) << table;
  EXPECT_EQ(lines[3].rfind("rejected:  requests never served (a prompt over vllm.max_model_len", 0),
            0u)
      << table;
}

// Failed LMCache loads, recomputed (kv_load_failure_policy = recompute): a 1-GiB CPU tier cannot
// stage some retrieves (upstream would wait forever), and with remote_get_failure_rate = 1 every
// Redis read fails as well, so that every LMCache hit is recomputed. (A request may count more:
// from its first bad block, which can be a GPU hit on a block another request of its step was
// loading, as vLLM counts it.)
TEST(Sweep, TheTableGivesTheShareOfPromptTokensWhoseLoadFailed) {
  const auto rows = sweep_two_points(
      {"workload.max_requests=200", "lmcache.remote=true", "lmcache.max_local_cpu_size_gb=1",
       "cluster.router=round_robin", "vllm.kv_load_failure_policy=recompute"},
      "links.remote_get_failure_rate=0,1");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GT(std::stod(rows[0].at("failed_load_rate")), 0);
  EXPECT_LT(std::stod(rows[0].at("failed_load_rate")), std::stod(rows[0].at("lmcache_hit_rate")));
  EXPECT_GE(std::stod(rows[1].at("failed_load_rate")), std::stod(rows[1].at("lmcache_hit_rate")));
  EXPECT_GT(std::stod(rows[1].at("failed_load_rate")), std::stod(rows[0].at("failed_load_rate")));
}

// Point i's summary.json, parsed by `parser` (which must outlive the element).
simdjson::dom::element point_summary(simdjson::dom::parser* parser, const std::string& dir,
                                     size_t i) {
  const std::string path = dir + "/points/" + std::to_string(i) + "/summary.json";
  simdjson::dom::element s;
  EXPECT_EQ(parser->load(path).get(s), simdjson::SUCCESS) << path;
  return s;
}

// sweep.csv says what each point needed: the fullest instance's KV usage, each LMCache tier's
// peak and how busy the busiest instance's links were, as the point's summary.json says. A 1-GiB
// CPU tier per instance fills (4 instances: 4 GiB); a 200-GiB one holds these 150 requests' chunks
// without filling; both write every stored chunk to the disk and the remote store. The table on
// stdout names each point's busiest link: the busy column of sweep.csv with the largest share.
TEST(Sweep, TheTableGivesWhatEachPointNeeded) {
  const std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=150", "lmcache.remote=true", "lmcache.max_local_disk_size_gb=20",
            "output.plots=false"};
  o.vary = {"lmcache.max_local_cpu_size_gb=1,200"};
  std::string table;
  const auto rows = sweep_with_table(o, dir, &table);
  ASSERT_EQ(rows.size(), 2u);
  using scenario::kGiB;
  for (size_t i = 0; i < rows.size(); ++i) {
    simdjson::dom::parser parser;
    const simdjson::dom::element s = point_summary(&parser, dir, i);
    const auto& row = rows[i];
    EXPECT_NEAR(std::stod(row.at("kv_usage_peak")),
                double(s["gpu_prefix_cache"]["kv_usage_peak"].get_double()), 5e-5);
    for (const char* tier : {"cpu", "disk", "remote"}) {
      const double peak = double(s["lmcache"][tier]["peak_bytes"].get_double()) / kGiB;
      EXPECT_NEAR(std::stod(row.at(std::string(tier) + "_peak_gib")), peak, 5e-4) << tier;
    }
    simdjson::dom::object links = s["links"].get_object();
    std::string busiest;
    double busiest_share = 0;
    for (const char* link : {"pcie_h2d", "pcie_d2h", "disk_read", "disk_write", "nic_rx", "nic_tx",
                             "remote_rx", "remote_tx"}) {
      const double busy = double(links[link]["busiest_busy_fraction"].get_double());
      const double column = std::stod(row.at(std::string(link) + "_busy"));
      EXPECT_NEAR(column, busy, 5e-7) << link;
      const double peak = double(links[link]["peak_gbps"].get_double());
      EXPECT_NEAR(std::stod(row.at(std::string(link) + "_peak_gbps")), peak, 5e-4) << link;
      if (column > busiest_share) {
        busiest_share = column;
        busiest = link;
      }
    }
    // The table's line of this point (after the header) ends with its busiest link, then the
    // requests it failed (the 1-GiB tier fails one: a load it cannot stage) or rejected.
    std::string want =
        "   " + busiest + " " + std::to_string(std::lround(100 * busiest_share)) + "%";
    if (row.at("failed") != "0") want += "  " + row.at("failed") + " failed";
    EXPECT_EQ(row.at("rejected"), "0");
    EXPECT_EQ(row.at("failed") != "0", i == 0);
    const std::string line = table_lines(table).at(i + 1);
    EXPECT_TRUE(line.size() >= want.size() && line.ends_with(want)) << want << "\n" << table;
    EXPECT_GT(std::stod(row.at("disk_write_busy")), 0);
    EXPECT_GT(std::stod(row.at("nic_tx_busy")), 0);
    EXPECT_GT(std::stod(row.at("nic_tx_peak_gbps")), 0);
    EXPECT_GT(std::stod(row.at("remote_peak_gib")), 0);
  }
  EXPECT_NE(table.find("busiest link\n"), std::string::npos) << table;
  EXPECT_GT(std::stod(rows[0].at("cpu_peak_gib")), 3.9);
  EXPECT_LE(std::stod(rows[0].at("cpu_peak_gib")), 4.0);
  EXPECT_GT(std::stod(rows[1].at("cpu_peak_gib")), 4.0);
  EXPECT_LT(std::stod(rows[1].at("cpu_peak_gib")), 800.0);
}

// sweep.csv gives each point's offered rate, the first and last quarter of arrivals' queue delay
// and whether the point saturated, as its summary.json does. Half the trace's rate, the default
// scenario keeps up; at eight times, its queue grows through the run, and the table marks the
// point and says what that means.
TEST(Sweep, TheTableMarksThePointsWhoseQueueGrewThroughTheRun) {
  const std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=300", "output.plots=false"};
  o.vary = {"workload.rate_scale=0.5,8"};
  std::string table;
  const auto rows = sweep_with_table(o, dir, &table);
  ASSERT_EQ(rows.size(), 2u);
  for (size_t i = 0; i < rows.size(); ++i) {
    simdjson::dom::parser parser;
    simdjson::dom::element load = point_summary(&parser, dir, i)["load"];
    EXPECT_NEAR(std::stod(rows[i].at("offered_requests_per_s")),
                double(load["offered_requests_per_s"].get_double()), 5e-7);
    simdjson::dom::array quarters = load["queue_ms_by_arrival_quarter"].get_array();
    // sweep.csv prints 3 decimals: a value ending in 5 at the 4th rounds by up to 5e-4.
    EXPECT_NEAR(std::stod(rows[i].at("queue_q1_ms")), double(quarters.at(0).get_double()), 6e-4);
    EXPECT_NEAR(std::stod(rows[i].at("queue_q4_ms")), double(quarters.at(3).get_double()), 6e-4);
    EXPECT_EQ(rows[i].at("saturated"), bool(load["saturated"].get_bool()) ? "1" : "0");
  }
  EXPECT_EQ(rows[0].at("saturated"), "0");
  EXPECT_EQ(rows[1].at("saturated"), "1");
  // The offered rate follows the scale: 16 times the first point's.
  EXPECT_NEAR(std::stod(rows[1].at("offered_requests_per_s")),
              16 * std::stod(rows[0].at("offered_requests_per_s")), 1e-3);
  EXPECT_GT(std::stod(rows[1].at("queue_q4_ms")), 10 * std::stod(rows[1].at("queue_q1_ms")));
  const std::vector<std::string> lines = table_lines(table);
  ASSERT_GE(lines.size(), 4u) << table;
  EXPECT_FALSE(lines[1].ends_with("saturated")) << table;
  EXPECT_TRUE(lines[2].ends_with("%  saturated")) << table;
  EXPECT_EQ(lines[3].rfind("saturated: the queue grew by more than the TTFT SLO", 0), 0u) << table;
}

// The sweep's plots: hit rate, TTFT p50 and output throughput against the first varied key, one
// curve per value of the other keys. Each panel plots the sweep.csv column its label names, from
// plots/sweep.dat (sweep.csv without its header): series s takes every `series`-th row from row
// s, as the grid's order puts the first key outermost. gnuplot draws plots/sweep.svg.
TEST(Sweep, ThePlotsDrawEachMetricAgainstTheFirstKeyWithOneCurvePerOtherValue) {
  const std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=60"};
  o.vary = {"lmcache.max_local_cpu_size_gb=1,4", "cluster.router=round_robin,least_loaded"};
  o.quiet = true;
  o.out = dir;
  ASSERT_EQ(run_sweep(o), 0);
  const std::string csv = slurp(dir + "/sweep.csv");
  const std::string header_line = csv.substr(0, csv.find('\n'));
  EXPECT_EQ(slurp(dir + "/plots/sweep.dat"), csv.substr(header_line.size() + 1));
  std::vector<std::string> header;
  std::istringstream cells(header_line);
  for (std::string c; std::getline(cells, c, ',');) header.push_back(c);

  const std::string gp = slurp(dir + "/plots/sweep.gp");
  static const std::regex re(
      R"(set ylabel '([^']*)'\nplot ((?:,? ?'plots/sweep\.dat' every \d+::\d+ using \d+:\d+ with linespoints lw 2 title '[^']*')+))");
  static const std::regex curve_re(
      R"('plots/sweep\.dat' every (\d+)::(\d+) using (\d+):(\d+) with linespoints lw 2 title '([^']*)')");
  const std::vector<std::pair<std::string, std::string>> panels = {
      {"hit rate (GPU + LMCache)", "total_hit_rate"},
      {"TTFT p50 (ms)", "ttft_p50_ms"},
      {"output tokens/s", "output_tokens_per_s"}};
  size_t panel = 0;
  for (auto it = std::sregex_iterator(gp.begin(), gp.end(), re); it != std::sregex_iterator();
       ++it, ++panel) {
    ASSERT_LT(panel, panels.size()) << gp;
    EXPECT_EQ((*it)[1], panels[panel].first);
    const std::string plot = (*it)[2];
    int series = 0;
    for (auto c = std::sregex_iterator(plot.begin(), plot.end(), curve_re);
         c != std::sregex_iterator(); ++c, ++series) {
      EXPECT_EQ(std::stoi((*c)[1]), 2);       // two values of the second key
      EXPECT_EQ(std::stoi((*c)[2]), series);  // from its own row
      EXPECT_EQ(header.at(std::stoul((*c)[3]) - 1), "lmcache.max_local_cpu_size_gb");
      EXPECT_EQ(header.at(std::stoul((*c)[4]) - 1), panels[panel].second) << (*it)[1];
      EXPECT_EQ((*c)[5],
                series == 0 ? "cluster.router=round_robin" : "cluster.router=least_loaded");
    }
    EXPECT_EQ(series, 2) << plot;
  }
  EXPECT_EQ(panel, panels.size()) << gp;
  const std::string svg = slurp(dir + "/plots/sweep.svg");
  ASSERT_FALSE(svg.empty()) << "plots/sweep.svg is missing: is gnuplot-nox installed?";
  for (const char* text : {"<svg", "</svg>", "TTFT p50 (ms)", "cluster.router=least_loaded"})
    EXPECT_NE(svg.find(text), std::string::npos) << text;
}

// An axis of keys varied together ("k1/k2=a1/b1,a2/b2") gives each key a column and sets them
// together at each of its values: a two-value linked axis times a two-value axis is four points,
// each the same simulation as a plain run with the point's values set. The plot's x is the first
// key, and the other axis's columns title the curves.
TEST(Sweep, ALinkedAxisSetsItsKeysTogether) {
  const std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=60"};
  o.vary = {"cluster.instances/cluster.router=1/round_robin,2/prefix_aware",
            "lmcache.max_local_cpu_size_gb/lmcache.chunk_size=1/256,4/512"};
  o.quiet = true;
  o.out = dir;
  ASSERT_EQ(run_sweep(o), 0);
  const auto rows = read_csv(dir + "/sweep.csv");
  ASSERT_EQ(rows.size(), 4u);
  const char* expect[4][4] = {{"1", "round_robin", "1", "256"},
                              {"1", "round_robin", "4", "512"},
                              {"2", "prefix_aware", "1", "256"},
                              {"2", "prefix_aware", "4", "512"}};
  const char* keys[4] = {"cluster.instances", "cluster.router", "lmcache.max_local_cpu_size_gb",
                         "lmcache.chunk_size"};
  const std::string csv = slurp(dir + "/sweep.csv");
  EXPECT_EQ(csv.rfind("cluster.instances,cluster.router,lmcache.max_local_cpu_size_gb,"
                      "lmcache.chunk_size,requests,",
                      0),
            0u);
  for (size_t i = 0; i < 4; ++i) {
    std::vector<std::string> sets = o.sets;
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(rows[i].at(keys[k]), expect[i][k]) << i << " " << keys[k];
      sets.push_back(std::string(keys[k]) + "=" + expect[i][k]);
    }
    // The point is the plain run with its four values set.
    const std::string plain = dir + "/plain" + std::to_string(i);
    const kvtwin::testing::CommandRun r = kvtwin::testing::run_kvtwin(
        "run -q --set " + sets[0] + " --set " + sets[1] + " --set " + sets[2] + " --set " +
        sets[3] + " --set " + sets[4] + " --set output.plots=false --out " + plain);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(slurp(dir + "/points/" + std::to_string(i) + "/summary.json"),
              slurp(plain + "/summary.json"))
        << i;
  }
  const std::string gp = slurp(dir + "/plots/sweep.gp");
  EXPECT_NE(gp.find("set xlabel 'cluster.instances'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("title 'lmcache.max_local_cpu_size_gb=4, lmcache.chunk_size=512'"),
            std::string::npos)
      << gp;
}

// With prices, sweep.csv's cost columns are each point's summary.json cost, empty at a point
// that sets none; the table gives each priced point's cost per hour and per million output
// tokens ("-" for the unpriced ones), and the plots gain the cost panel.
TEST(Sweep, GivesWhatEachPricedPointCosts) {
  const std::string dir = kvtwin::testing::scratch_dir();
  SweepOptions o;
  o.sets = {"workload.max_requests=40"};
  o.vary = {"cluster.instances=1,2", "cost.gpu_per_hour=0,3"};
  std::string table;
  const auto rows = sweep_with_table(o, dir, &table);
  ASSERT_EQ(rows.size(), 4u);
  std::istringstream lines(table);
  std::string line;
  std::getline(lines, line);  // the header
  for (size_t i = 0; i < rows.size(); ++i) {
    simdjson::dom::parser parser;
    const simdjson::dom::element s = point_summary(&parser, dir, i);
    std::getline(lines, line);
    if (i % 2 == 0) {  // GPUs at 0: nothing priced
      EXPECT_TRUE(s["cost"].error()) << i;
      EXPECT_EQ(rows[i].at("cost_per_hour"), "");
      EXPECT_EQ(rows[i].at("cost_per_m_output_tokens"), "");
      EXPECT_EQ(rows[i].at("cost_per_k_good_requests"), "");
      EXPECT_NE(line.find("          -         -   "), std::string::npos) << line;
      continue;
    }
    const double per_hour = 3.0 * double(s["instances"].get_int64());
    EXPECT_EQ(double(s["cost"]["per_hour"].get_double()), per_hour);
    EXPECT_EQ(std::stod(rows[i].at("cost_per_hour")), per_hour) << i;
    EXPECT_NEAR(std::stod(rows[i].at("cost_per_m_output_tokens")),
                double(s["cost"]["per_million_output_tokens"].get_double()), 5e-7);
    EXPECT_NEAR(std::stod(rows[i].at("cost_per_k_good_requests")),
                double(s["cost"]["per_thousand_good_requests"].get_double()), 5e-7);
    char want[64];
    std::snprintf(want, sizeof want, " %10.2f ", per_hour);
    EXPECT_NE(line.find(want), std::string::npos) << want << "\n" << line;
  }
  EXPECT_NE(table.find("goodput req/s     cost/h   /1M out   busiest link\n"), std::string::npos)
      << table;
  const std::string gp = slurp(dir + "/plots/sweep.gp");
  EXPECT_NE(gp.find("set ylabel 'cost per 1M output tokens'"), std::string::npos) << gp;

  // No price at all: empty columns, and the table and plots as before.
  o.sets = {"workload.max_requests=40"};
  o.vary = {"cluster.instances=1,2", "cluster.router=round_robin,least_loaded"};
  const std::string plain = kvtwin::testing::scratch_subdir();
  const auto unpriced = sweep_with_table(o, plain, &table);
  ASSERT_EQ(unpriced.size(), 4u);
  for (const auto& row : unpriced) {
    EXPECT_EQ(row.at("cost_per_hour"), "");
    EXPECT_EQ(row.at("cost_per_m_output_tokens"), "");
    EXPECT_EQ(row.at("cost_per_k_good_requests"), "");
  }
  EXPECT_NE(table.find("goodput req/s   busiest link\n"), std::string::npos) << table;
  const std::string plain_gp = slurp(plain + "/plots/sweep.gp");
  ASSERT_FALSE(plain_gp.empty());
  EXPECT_EQ(plain_gp.find("cost"), std::string::npos);
}

TEST(Sweep, RefusesALinkedAxisWhoseValuesDoNotMatchItsKeys) {
  auto refused = [](const std::vector<std::string>& vary, const std::string& message) {
    SweepOptions o;
    o.vary = vary;
    o.quiet = true;
    try {
      run_sweep(o);
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), message);
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused({"cluster.instances/cluster.router=1/round_robin,2"},
                      "--vary: cluster.instances/cluster.router: value 2 has 1 parts for 2 keys"));
  EXPECT_TRUE(refused({"cluster.instances/cluster.router=1/round_robin/x"},
                      "--vary: cluster.instances/cluster.router: value 1/round_robin/x has 3 "
                      "parts for 2 keys"));
  EXPECT_TRUE(refused({"cluster.instances/cluster.router=1/"},
                      "--vary: cluster.instances/cluster.router: empty part in value 1/"));
  EXPECT_TRUE(refused({"cluster.instances//cluster.router=1//x"},
                      "--vary: cluster.instances//cluster.router: empty key in k1/k2/..."));
  EXPECT_TRUE(refused({"cluster.instances/cluster.router=1/round_robin", "cluster.router=x"},
                      "--vary: cluster.router: varied twice (list its values once)"));
  EXPECT_TRUE(refused({"cluster.instances/cluster.instances=1/2"},
                      "--vary: cluster.instances: varied twice (list its values once)"));
}

// A point vLLM would not start with (one request of 524,288 tokens does not fit 80 GB) is refused
// with the grid's other errors, before any point runs: the first point, which would run, leaves
// nothing behind.
TEST(Sweep, RefusesAPointVllmWouldNotStartWithBeforeAnyRuns) {
  SweepOptions o;
  o.sets = {"workload.max_requests=20", "output.plots=false"};
  o.vary = {"vllm.max_model_len=8192,524288"};
  o.quiet = true;
  o.out = kvtwin::testing::scratch_subdir();
  std::string message;
  try {
    run_sweep(o);
  } catch (const InputError& e) {
    message = e.what();
  }
  EXPECT_EQ(message.rfind("--vary: vllm.max_model_len: one request of 524288 tokens needs", 0), 0u)
      << message;
  EXPECT_FALSE(std::filesystem::exists(o.out + "/points/0"));
}

}  // namespace
}  // namespace kvtwin::sim::cli
