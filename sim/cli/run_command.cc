#include "sim/cli/run_command.h"

#include <chrono>
#include <cstdio>

#include "sim/cli/common.h"
#include "sim/engine/cluster.h"

namespace kvtwin::sim::cli {

report::Summary simulate(const scenario::Scenario& s, const std::string& trace_override,
                         const std::string& out_dir, bool quiet, double* wall_s,
                         const engine::Cluster::MoverFactory& movers,
                         const std::function<void(double)>& on_fraction) {
  auto start = std::chrono::steady_clock::now();
  std::string trace_name = scenario_trace_name(s, trace_override);
  workload::Workload workload(open_scenario_trace(s, trace_override), workload_options(s));
  report::RunRecorder recorder(s, trace_name, out_dir);
  engine::Cluster cluster(s, &workload, &recorder, movers);
  for (int t = 0; t < report::kNumTiers; ++t) recorder.set_tier_capacity(t, 0);
  Progress progress("kvtwin run", quiet);
  const uint64_t expected =
      progress.enabled() || on_fraction ? estimate_requests(s, trace_override) : 1;
  cluster.run([&](uint64_t done) {
    const double fraction =
        std::min(1.0, static_cast<double>(done) / static_cast<double>(expected));
    if (on_fraction) on_fraction(fraction);
    progress.update(fraction, std::to_string(done) + " requests done, t = " +
                                  std::to_string(static_cast<int64_t>(to_seconds(cluster.now()))) +
                                  " s simulated");
  });
  progress.finish();
  recorder.set_largest_arrival_group(workload.arrival_groups().largest);
  report::Summary summary = recorder.finish(cluster.now());
  if (wall_s)
    *wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

int run_run(const RunOptions& o) {
  scenario::Scenario s = load_scenario(o.scenario, o.sets);
  std::string out = o.no_outputs ? "" : (o.out.empty() ? "runs/" + s.run.name : o.out);
  double wall = 0;
  report::Summary summary = simulate(s, o.trace, out, o.quiet, &wall);
  if (!o.quiet) {
    std::string text = report::RunRecorder::screen(summary);
    char buf[160];
    std::snprintf(buf, sizeof buf, "wall time   %.2f s (%.0fx faster than real time)\n", wall,
                  wall > 0 ? summary.duration_s / wall : 0.0);
    text += buf;
    if (!out.empty()) text += "outputs     " + out + "/\n";
    std::fputs(text.c_str(), stdout);
  }
  return 0;
}

}  // namespace kvtwin::sim::cli
