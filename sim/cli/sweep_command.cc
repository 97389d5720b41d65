#include "sim/cli/sweep_command.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "sim/cli/common.h"
#include "sim/cli/grid.h"
#include "sim/cli/run_command.h"
#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
#include "sim/report/run_recorder.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::cli {
namespace {

struct Point {
  std::vector<std::string> values;  // one per axis
  report::Summary summary;
};
using Axis = GridAxis;

std::string csv_line(const std::vector<Axis>& axes, const Point* p) {
  std::string out;
  char buf[512];
  if (!p) {
    for (const std::string& key : grid_keys(axes)) out += key + ",";
    out +=
        "requests,finished,gpu_hit_rate,lmcache_hit_rate,total_hit_rate,ttft_p50_ms,"
        "ttft_p99_ms,tpot_p50_ms,e2e_p50_ms,output_tokens_per_s,requests_per_s,goodput,"
        "preemptions,rejected,failed,failed_load_rate";
    return out + resource_header() + ",offered_requests_per_s,queue_q1_ms,queue_q4_ms,saturated\n";
  }
  for (const std::string& v : p->values) out += v + ",";
  const report::Summary& s = p->summary;
  std::snprintf(
      buf, sizeof buf,
      "%llu,%llu,%.6f,%.6f,%.6f,%.3f,%.3f,%.3f,%.3f,%.3f,%.6f,%.6f,%llu,%llu,%llu,%.6f",
      static_cast<unsigned long long>(s.requests), static_cast<unsigned long long>(s.finished),
      s.gpu_hit_rate, s.lmcache_hit_rate, s.gpu_hit_rate + s.lmcache_hit_rate, s.ttft.p50,
      s.ttft.p99, s.tpot.p50, s.e2e.p50, s.output_token_throughput, s.request_throughput, s.goodput,
      static_cast<unsigned long long>(s.preemptions), static_cast<unsigned long long>(s.rejected),
      static_cast<unsigned long long>(s.failed), s.failed_load_rate);
  out += buf + resource_columns(s);
  std::snprintf(buf, sizeof buf, ",%.6f,%.3f,%.3f,%d\n", s.load.offered_rate,
                s.load.queue_ms_by_arrival_quarter[0], s.load.queue_ms_by_arrival_quarter[3],
                s.load.saturated ? 1 : 0);
  return out + buf;
}

// Whether some point sets a price: its table and plots then show the cost.
bool any_priced(const std::vector<Point>& points) {
  return std::any_of(points.begin(), points.end(),
                     [](const Point& p) { return p.summary.cost.priced; });
}

std::string screen_table(const std::vector<Axis>& axes, const std::vector<Point>& points) {
  const std::vector<std::string> keys = grid_keys(axes);
  std::vector<std::vector<std::string>> values;
  for (const Point& p : points) values.push_back(p.values);
  const std::vector<int> width = grid_widths(keys, values);
  std::string out;
  char buf[256];
  bool any_saturated = false, any_lost = false;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%-*s  ", width[i], keys[i].c_str());
    out += buf;
  }
  // With prices, each point's cost per hour and per million output tokens.
  const bool priced = any_priced(points);
  out += "   hit rate   TTFT p50 ms   TTFT p99 ms   out tok/s   goodput req/s";
  out += priced ? "     cost/h   /1M out   busiest link\n" : "   busiest link\n";
  for (const Point& p : points) {
    for (size_t i = 0; i < keys.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%-*s  ", width[i], p.values[i].c_str());
      out += buf;
    }
    const report::Summary& s = p.summary;
    std::snprintf(buf, sizeof buf, "%10.2f%% %13.1f %13.1f %11.0f %15.3f",
                  100 * (s.gpu_hit_rate + s.lmcache_hit_rate), s.ttft.p50, s.ttft.p99,
                  s.output_token_throughput, s.goodput);
    out += buf;
    if (priced) {
      std::snprintf(buf, sizeof buf, " %10s %9s", report::hourly_cell(s.cost).c_str(),
                    report::unit_cell(s.cost.per_million_output_tokens).c_str());
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "   %s%s", busiest_link(s).c_str(),
                  s.load.saturated ? "  saturated" : "");
    out += buf;
    // Requests the point never served: its latencies and hit rate flatter it by their absence.
    for (const auto& [count, what] : {std::pair{s.rejected, "rejected"}, {s.failed, "failed"}}) {
      if (count == 0) continue;
      std::snprintf(buf, sizeof buf, "  %llu %s", static_cast<unsigned long long>(count), what);
      out += buf;
    }
    out += "\n";
    any_saturated = any_saturated || s.load.saturated;
    any_lost = any_lost || s.rejected > 0 || s.failed > 0;
  }
  if (any_saturated)
    out +=
        "saturated: the queue grew by more than the TTFT SLO over the run; arrivals outpace "
        "service,\n           and the latencies grow with the trace's length\n";
  if (any_lost)
    out +=
        "rejected:  requests never served (a prompt over vllm.max_model_len or the GPU pool); "
        "failed:\n           ended by a failed KV load. Latencies and goodput count the finished "
        "ones only\n";
  return out;
}

void write_plots(const std::string& dir, const std::vector<Axis>& axes,
                 const std::vector<Point>& points) {
  std::string rows;  // sweep.csv without its header
  std::vector<std::vector<std::string>> values;
  for (const Point& p : points) {
    rows += csv_line(axes, &p);
    values.push_back(p.values);
  }
  std::vector<GridPlotPanel> panels = {{"hit rate (GPU + LMCache)", "total_hit_rate"},
                                       {"TTFT p50 (ms)", "ttft_p50_ms"},
                                       {"output tokens/s", "output_tokens_per_s"}};
  if (any_priced(points))
    panels.push_back({"cost per 1M output tokens", "cost_per_m_output_tokens"});
  write_grid_plots(dir, "sweep", "kvtwin sweep", axes, values, csv_line(axes, nullptr), rows,
                   panels);
}

}  // namespace

int run_sweep(const SweepOptions& o) {
  if (o.vary.empty()) throw InputError("--vary", 0, "", "at least one --vary key=v1,v2,...");
  scenario::Scenario base = load_scenario(o.scenario, o.sets);
  const std::vector<Axis> axes = parse_grid(o.vary, "--vary");
  // The grid, first axis outermost; every point is validated before anything runs.
  std::vector<Point> points;
  std::vector<scenario::Scenario> scenarios;
  for (std::vector<std::string>& values : grid_points(axes)) {
    scenarios.push_back(grid_scenario(base, axes, values, "--vary"));
    points.push_back(Point{std::move(values), {}});
  }
  PointsProgress progress("kvtwin sweep", o.quiet, points.size());
  parallel_for(points.size(), o.jobs, [&](size_t i) {
    std::string dir = o.out.empty() ? "" : o.out + "/points/" + std::to_string(i);
    scenario::Scenario s = scenarios[i];
    if (!dir.empty()) {  // keep each point's summary and scenario; skip the heavy outputs
      s.output.chrome_trace = false;
      s.output.plots = false;
    }
    points[i].summary = simulate(s, o.trace, dir, true, nullptr, {}, progress.reporter(i));
    progress.point(i, 1.0);
  });
  progress.finish();
  if (!o.quiet) std::fputs(screen_table(axes, points).c_str(), stdout);
  if (!o.out.empty()) {
    std::string csv = csv_line(axes, nullptr);
    for (const Point& p : points) csv += csv_line(axes, &p);
    io::write_output(o.out + "/sweep.csv", csv);
    if (base.output.plots) write_plots(o.out, axes, points);
  }
  return 0;
}

}  // namespace kvtwin::sim::cli
