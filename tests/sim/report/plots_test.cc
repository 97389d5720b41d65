// The run directory's plots (issue 4: latency CDFs and occupancy over time, drawn by gnuplot from
// Debian's gnuplot-nox, which .ci/install-deps installs): each curve plots the column its title
// names, each CDF is the finished requests' latencies from requests.csv, and gnuplot draws both
// SVGs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/common.h"
#include "sim/cli/run_command.h"
#include "sim/report/run_recorder.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::report {
namespace {

using kvtwin::testing::read_csv;
using kvtwin::testing::slurp;

std::vector<std::string> header_of(const std::string& csv_path) {
  std::ifstream in(csv_path);
  std::string line, cell;
  std::getline(in, line);
  std::vector<std::string> out;
  std::istringstream cells(line);
  while (std::getline(cells, cell, ',')) out.push_back(cell);
  return out;
}

// Each "using X:Y ... title 'T'" of a gnuplot script, in order.
struct Curve {
  int x, y;
  std::string title;
};
std::vector<Curve> curves_of(const std::string& script) {
  std::vector<Curve> out;
  static const std::regex re(R"(using (\d+):(\d+)\S* with \w+(?: lw \d+)? title '([^']*)')");
  for (auto it = std::sregex_iterator(script.begin(), script.end(), re);
       it != std::sregex_iterator(); ++it)
    out.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), (*it)[3]});
  return out;
}

// A document gnuplot's svg terminal wrote, showing every text of `texts`.
void expect_svg(const std::string& path, std::initializer_list<const char*> texts) {
  const std::string svg = slurp(path);
  ASSERT_FALSE(svg.empty()) << path << " is missing: is gnuplot-nox installed (.ci/install-deps)?";
  EXPECT_NE(svg.find("<svg"), std::string::npos) << path;
  EXPECT_NE(svg.find("</svg>"), std::string::npos) << path;
  for (const char* t : texts) EXPECT_NE(svg.find(t), std::string::npos) << t << " in " << path;
}

TEST(Plots, OccupancyCurvesPlotTheTimeseriesColumnsTheirTitlesName) {
  const std::string dir = kvtwin::testing::scratch_dir() + "/run";
  const scenario::Scenario s = cli::load_scenario("", {"workload.max_requests=60"});
  cli::simulate(s, "", dir, /*quiet=*/true, nullptr);
  const std::vector<std::string> header = header_of(dir + "/timeseries.csv");
  const std::map<std::string, std::string> column_of_title = {
      {"mean over instances", "gpu_kv_usage_mean"},
      {"max", "gpu_kv_usage_max"},
      {"cpu", "cpu_gib"},
      {"disk", "disk_gib"},
      {"remote", "remote_gib"},
      {"running", "running"},
      {"waiting", "waiting"}};
  const std::string gp = slurp(dir + "/plots/plots.gp");
  const size_t from = gp.find("occupancy.svg");
  const std::string occupancy = gp.substr(from, gp.find("links.svg") - from);
  std::vector<std::string> titles;
  for (const Curve& c : curves_of(occupancy)) {
    titles.push_back(c.title);
    ASSERT_TRUE(column_of_title.count(c.title)) << c.title;
    ASSERT_GE(c.x, 1);
    ASSERT_GE(c.y, 1);
    ASSERT_LE(static_cast<size_t>(std::max(c.x, c.y)), header.size());
    EXPECT_EQ(header[c.x - 1], "t_s") << c.title;
    EXPECT_EQ(header[c.y - 1], column_of_title.at(c.title)) << c.title;
  }
  EXPECT_EQ(titles.size(), column_of_title.size());
  expect_svg(dir + "/plots/occupancy.svg", {"mean over instances", "remote", "waiting"});
}

// The links plot has one curve per link kind that moved bytes (summary.json's links with bytes
// > 0; the default run's first 60 requests store over pcie_d2h only), titled by the kind,
// plotting that kind's timeseries.csv column against t_s. Without any link moving bytes there is
// no plot. Names are drawn as written (gnuplot's enhanced text would make "_d" a subscript).
TEST(Plots, TheLinksPlotHasACurveForEachLinkKindThatMovedBytes) {
  const std::string dir = kvtwin::testing::scratch_dir() + "/run";
  const scenario::Scenario s =
      cli::load_scenario("", {"workload.max_requests=60", "run.name=run_a"});
  cli::simulate(s, "", dir, /*quiet=*/true, nullptr);
  const std::vector<std::string> header = header_of(dir + "/timeseries.csv");
  const std::string gp = slurp(dir + "/plots/plots.gp");
  ASSERT_NE(gp.find("links.svg"), std::string::npos) << gp;
  std::vector<std::string> titles;
  for (const Curve& c : curves_of(gp.substr(gp.find("links.svg")))) {
    titles.push_back(c.title);
    ASSERT_LE(static_cast<size_t>(std::max(c.x, c.y)), header.size());
    EXPECT_EQ(header[c.x - 1], "t_s") << c.title;
    EXPECT_EQ(header[c.y - 1], c.title + "_gbps") << c.title;
  }
  EXPECT_EQ(titles, (std::vector<std::string>{"pcie_d2h"}));
  const std::string summary = slurp(dir + "/summary.json");
  for (const char* idle :
       {"pcie_h2d", "disk_read", "disk_write", "nic_rx", "nic_tx", "remote_rx", "remote_tx"})
    EXPECT_NE(summary.find("\"" + std::string(idle) + "\": {\n      \"bytes\": 0,"),
              std::string::npos)
        << idle << "\n"
        << summary;
  expect_svg(dir + "/plots/links.svg", {"run_a: the busiest link", "pcie_d2h", "GB/s"});
  expect_svg(dir + "/plots/occupancy.svg", {"run_a: occupancy over time"});

  const std::string none = kvtwin::testing::scratch_subdir();
  cli::simulate(cli::load_scenario("", {"workload.max_requests=60", "lmcache.enabled=false"}), "",
                none, /*quiet=*/true, nullptr);
  EXPECT_EQ(slurp(none + "/plots/plots.gp").find("links.svg"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(none + "/plots/links.svg"));
  EXPECT_TRUE(std::filesystem::exists(none + "/plots/occupancy.svg"));
}

// "value fraction" lines: the finished requests' latencies sorted (TTFT and E2E in seconds, TPOT
// in ms, 6 decimals), the i-th of n at fraction i / n.
void expect_cdf(const std::string& path, std::vector<double> values, double scale) {
  std::sort(values.begin(), values.end());
  std::ifstream in(path);
  double v = 0, f = 0;
  size_t i = 0;
  while (in >> v >> f) {
    ASSERT_LT(i, values.size()) << path;
    // requests.csv prints milliseconds with 3 decimals, the CDF 6 decimals of its unit.
    EXPECT_NEAR(v, values[i] * scale, 1e-3 * scale + 1e-6) << path << " line " << i + 1;
    EXPECT_NEAR(f, static_cast<double>(i + 1) / static_cast<double>(values.size()), 1e-6)
        << path << " line " << i + 1;
    ++i;
  }
  EXPECT_EQ(i, values.size()) << path;
}

TEST(Plots, LatencyCdfsAreTheFinishedRequestsLatencies) {
  const std::string dir = kvtwin::testing::scratch_dir() + "/run";
  const scenario::Scenario s = cli::load_scenario("", {"workload.max_requests=60"});
  cli::simulate(s, "", dir, /*quiet=*/true, nullptr);
  std::vector<double> ttft, tpot, e2e;
  for (const auto& r : read_csv(dir + "/requests.csv")) {
    if (r.at("ttft_ms").empty()) continue;
    ttft.push_back(std::stod(r.at("ttft_ms")));
    e2e.push_back(std::stod(r.at("e2e_ms")));
    if (!r.at("tpot_ms").empty()) tpot.push_back(std::stod(r.at("tpot_ms")));
  }
  ASSERT_EQ(ttft.size(), 60u);
  ASSERT_GT(tpot.size(), 50u);
  expect_cdf(dir + "/plots/ttft_cdf.dat", ttft, 1e-3);
  expect_cdf(dir + "/plots/tpot_cdf.dat", tpot, 1.0);
  expect_cdf(dir + "/plots/e2e_cdf.dat", e2e, 1e-3);
  // The script plots each file under its own title, with the unit its values are in.
  const std::string gp = slurp(dir + "/plots/plots.gp");
  for (const char* want : {"set xlabel 'TTFT (s)'\nplot 'plots/ttft_cdf.dat' using 1:2",
                           "set xlabel 'TPOT (ms)'\nplot 'plots/tpot_cdf.dat' using 1:2",
                           "set xlabel 'E2E (s)'\nplot 'plots/e2e_cdf.dat' using 1:2"})
    EXPECT_NE(gp.find(want), std::string::npos) << want << "\n" << gp;
  expect_svg(dir + "/plots/latency_cdf.svg", {"TTFT (s)", "TPOT (ms)", "E2E (s)"});
}

TEST(Plots, CsvColumnCountsFromOneAsGnuplotDoes) {
  EXPECT_EQ(csv_column("t_s,running,waiting\n", "t_s"), 1);
  EXPECT_EQ(csv_column("t_s,running,waiting\n", "waiting"), 3);
  EXPECT_EQ(csv_column("a,ab,b", "b"), 3);
}

}  // namespace
}  // namespace kvtwin::sim::report
