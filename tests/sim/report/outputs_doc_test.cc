// sim/report/README.md documents every field of summary.json and every column of requests.csv,
// timeseries.csv and sweep.csv. These tests hold the page to what the writer emits, both ways: a
// field the writer adds, renames or drops without the page, or a page entry the writer never emits,
// fails.
//
// The page's summary.json table names fields by path ("lmcache.<tier>.peak_bytes"); its
// placeholder lines ("- `<tier>`: `cpu`, `disk`, `remote`") list what each placeholder stands for.
// The writer's side is a Summary with every optional block switched on, and every link kind a
// modelled mover can report (page cache included).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/capacity_command.h"
#include "sim/cli/sweep_command.h"
#include "sim/hw/modeled_mover.h"
#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario_loader.h"
#include "sim/simulator.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::report {
namespace {

using kvtwin::testing::slurp;

// The text of the page's section "## <title>", up to the next "## ".
std::string section(const std::string& page, const std::string& title) {
  const std::string head = "\n## " + title + "\n";
  size_t at = page.find(head);
  if (at == std::string::npos) return "";
  at += head.size();
  size_t end = page.find("\n## ", at);
  return page.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The column names of the CSV file at `path` (its first line).
std::vector<std::string> header_columns(const std::string& path) {
  std::vector<std::string> columns;
  std::istringstream in(lines_of(slurp(path)).at(0));
  for (std::string c; std::getline(in, c, ',');) columns.push_back(c);
  return columns;
}

// Every `...` span of `text`, in order.
std::vector<std::string> ticked(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = text.find('`'); at != std::string::npos;) {
    size_t end = text.find('`', at + 1);
    if (end == std::string::npos) break;
    out.push_back(text.substr(at + 1, end - at - 1));
    at = text.find('`', end + 1);
  }
  return out;
}

// The first cell's name of each table row whose first cell is `name` (header rows have none).
std::vector<std::string> table_names(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("| `", 0) != 0) continue;
    out.push_back(ticked(line.substr(0, line.find('|', 1))).at(0));
  }
  return out;
}

// The placeholder lines "- `<name>`: `a`, `b`, ..." of a section.
std::map<std::string, std::vector<std::string>> placeholders(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind("- `<", 0) != 0) continue;
    std::vector<std::string> names = ticked(line);
    out[names.at(0)] = std::vector<std::string>(names.begin() + 1, names.end());
  }
  return out;
}

// `path` with every placeholder replaced by each of its names (all combinations).
void expand(const std::string& path, const std::map<std::string, std::vector<std::string>>& ph,
            std::set<std::string>* out) {
  size_t open = path.find('<');
  if (open == std::string::npos) {
    out->insert(path);
    return;
  }
  size_t close = path.find('>', open);
  const std::string name = path.substr(open, close - open + 1);
  auto it = ph.find(name);
  ASSERT_NE(it, ph.end()) << "placeholder " << name << " of " << path << " is not listed";
  for (const std::string& v : it->second)
    expand(path.substr(0, open) + v + path.substr(close + 1), ph, out);
}

// Leaf paths of a JSON value: "a.b" for objects, "a[].b" for the members of an array's objects.
void leaves(simdjson::dom::element e, const std::string& prefix, std::set<std::string>* out) {
  simdjson::dom::object object;
  simdjson::dom::array array;
  if (e.get(object) == simdjson::SUCCESS) {
    for (simdjson::dom::key_value_pair field : object)
      leaves(field.value, (prefix.empty() ? "" : prefix + ".") + std::string(field.key), out);
  } else if (e.get(array) == simdjson::SUCCESS) {
    for (simdjson::dom::element child : array) leaves(child, prefix + "[]", out);
  } else {
    out->insert(prefix);
  }
}

std::string listed(const std::set<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += " " + n;
  return out;
}

const std::string& page() {
  static const std::string text = slurp(kvtwin::testing::source_path("sim/report/README.md"));
  return text;
}

// The summary.json paths the page documents, placeholders expanded.
std::set<std::string> documented_summary_paths() {
  const std::string text = section(page(), "summary.json");
  EXPECT_FALSE(text.empty()) << "no \"## summary.json\" section";
  const auto ph = placeholders(text);
  std::set<std::string> documented;
  for (const std::string& path : table_names(text)) expand(path, ph, &documented);
  return documented;
}

// The leaf paths of the summary.json that `s` gives.
std::set<std::string> emitted_paths(const Summary& s) {
  const std::string json = RunRecorder::summary_json(s);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  std::set<std::string> emitted;
  EXPECT_EQ(parser.parse(json).get(root), simdjson::SUCCESS) << json;
  leaves(root, "", &emitted);
  return emitted;
}

// A summary with every optional block present: a warm-up, two priority classes, async loading,
// the health monitor, memory waits, blocking-GET timeouts, a leaked disk reservation, the page
// cache, a cost, and the link kinds of a modelled mover with a page cache.
Summary every_block() {
  Summary s;
  s.has_warmup = true;
  s.by_priority.resize(2);
  s.by_priority[1].priority = 1;
  s.async_loading.lookups = 1;
  s.health.failed_remote_gets = 1;
  s.memory_waits.loads = 1;
  s.blocking_get_timeouts.fetches = 1;
  s.disk_leaked_bytes = 1;
  s.page_cache.capacity_bytes = 1;
  s.gpu_evictions = 0;
  s.cost.priced = true;
  Simulator sim;
  scenario::LinksConfig links;
  links.page_cache_gb = 1;
  hw::ModeledMover mover(&sim, links, 2);
  for (const hw::ModeledMover::LinkReport& l : mover.link_reports()) {
    s.link_bytes[l.kind] = 0;
    s.link_busy_fraction[l.kind] = 0;
  }
  return s;
}

TEST(OutputsDoc, SummaryJsonFieldsAreTheWritersFields) {
  const std::set<std::string> documented = documented_summary_paths();
  const std::set<std::string> emitted = emitted_paths(every_block());
  std::set<std::string> undocumented, never_emitted;
  for (const std::string& p : emitted)
    if (!documented.count(p)) undocumented.insert(p);
  for (const std::string& p : documented)
    if (!emitted.count(p)) never_emitted.insert(p);
  EXPECT_TRUE(undocumented.empty()) << "emitted, not on the page:" << listed(undocumented);
  EXPECT_TRUE(never_emitted.empty()) << "on the page, never emitted:" << listed(never_emitted);
  EXPECT_GT(emitted.size(), 100u);  // the flattening saw the whole document
}

// Without the optional blocks the writer emits a subset of the same fields (what the page marks
// "only when ..." is what disappears).
TEST(OutputsDoc, APlainSummaryEmitsNoFieldOutsideThePage) {
  const std::set<std::string> documented = documented_summary_paths();
  const std::set<std::string> emitted = emitted_paths(Summary{});
  ASSERT_FALSE(emitted.empty());
  for (const std::string& p : emitted) EXPECT_TRUE(documented.count(p)) << p;
  for (const char* optional :
       {"warmup.requests", "lmcache.health.unhealthy_s", "lmcache.async_loading.lookups",
        "by_priority[].priority", "lmcache.blocking_get_timeouts.fetches",
        "lmcache.disk.page_cache.hit_bytes", "lmcache.disk_leaked_bytes", "cost.per_hour"})
    EXPECT_FALSE(emitted.count(optional)) << optional;
}

// The CSV files' columns, in order, are the page's tables' rows.
TEST(OutputsDoc, CsvColumnsAreThePagesInOrder) {
  const std::string dir = kvtwin::testing::scratch_dir() + "/run";
  scenario::Scenario s = scenario::load_scenario_text(
      "[output]\nplots = false\nchrome_trace = false\n", "s.toml", ".");
  {
    RunRecorder rec(s, "trace.csv", dir);
    rec.finish(0);
  }
  for (const char* file : {"requests.csv", "timeseries.csv"}) {
    const std::string text = section(page(), file);
    ASSERT_FALSE(text.empty()) << "no \"## " << file << "\" section";
    EXPECT_EQ(table_names(text), header_columns(dir + "/" + file)) << file;
  }
}

// sweep.csv's header is the page's table: the `<key>` row stands for the varied keys, in order.
TEST(OutputsDoc, SweepCsvColumnsAreThePagesInOrder) {
  const std::string dir = kvtwin::testing::scratch_dir();
  cli::SweepOptions o;
  o.sets = {"workload.max_requests=3", "output.plots=false"};
  o.vary = {"cluster.instances=1", "cluster.router=round_robin"};
  o.quiet = true;
  o.out = dir;
  ASSERT_EQ(cli::run_sweep(o), 0);
  const std::string text = section(page(), "sweep.csv");
  ASSERT_FALSE(text.empty()) << "no \"## sweep.csv\" section";
  std::vector<std::string> documented = table_names(text);
  ASSERT_FALSE(documented.empty());
  ASSERT_EQ(documented[0], "<key>");
  documented[0] = "cluster.router";
  documented.insert(documented.begin(), "cluster.instances");
  EXPECT_EQ(documented, header_columns(dir + "/sweep.csv"));
}

// capacity.csv's header is the page's table.
TEST(OutputsDoc, CapacityCsvColumnsAreThePagesInOrder) {
  const std::string dir = kvtwin::testing::scratch_dir();
  cli::CapacityOptions o;
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "workload.rate_scale=5e5"};
  o.quiet = true;
  o.out = dir;
  ASSERT_EQ(cli::run_capacity(o), 0);
  const std::string text = section(page(), "capacity.csv");
  ASSERT_FALSE(text.empty()) << "no \"## capacity.csv\" section";
  std::vector<std::string> documented = table_names(text);
  ASSERT_GE(documented.size(), 2u);
  ASSERT_EQ(documented[1], "<key>");
  documented[1] = "workload.rate_scale";
  EXPECT_EQ(documented, header_columns(dir + "/capacity.csv"));
}

// frontier.csv's header is the page's table: the `<key>` row stands for the varied keys, in
// order.
TEST(OutputsDoc, FrontierCsvColumnsAreThePagesInOrder) {
  const std::string dir = kvtwin::testing::scratch_dir();
  cli::CapacityOptions o;
  o.sets = {"workload.max_requests=3", "slo.ttft_ms=1e9", "workload.rate_scale=5e5",
            "output.plots=false"};
  o.vary = {"cluster.instances=1", "cluster.router=round_robin"};
  o.quiet = true;
  o.out = dir;
  ASSERT_EQ(cli::run_capacity(o), 0);
  const std::string text = section(page(), "frontier.csv");
  ASSERT_FALSE(text.empty()) << "no \"## frontier.csv\" section";
  std::vector<std::string> documented = table_names(text);
  ASSERT_GE(documented.size(), 2u);
  ASSERT_EQ(documented[1], "<key>");
  documented[1] = "cluster.router";
  documented.insert(documented.begin() + 1, "cluster.instances");
  EXPECT_EQ(documented, header_columns(dir + "/frontier.csv"));
}

}  // namespace
}  // namespace kvtwin::sim::report
