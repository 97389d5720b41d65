#include "sim/cli/cache_replay_command.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "sim/cli/common.h"
#include "sim/engine/cluster.h"
#include "sim/io/input_error.h"
#include "sim/io/output_file.h"
#include "sim/io/parse.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::cli {
namespace {

using scenario::kGiB;

using Point = CacheReplayPoint;

// The scenario of one point: one instance, one request at a time, no outputs beyond one token.
// The token budget stays the scenario's: LMCache stores each step's new chunks, and a store that
// cannot allocate CPU memory for all of them keeps only the leading ones, so how a prompt is
// split into steps changes what the tiers hold (one step per prompt once made a small CPU tier
// look better than a large one in front of a disk tier).
scenario::Scenario point_scenario(const scenario::Scenario& base, const std::string& tier,
                                  double gb) {
  scenario::Scenario s = base;
  s.cluster.instances = 1;
  s.vllm.max_num_seqs = 1;
  s.output.chrome_trace = false;
  s.output.plots = false;
  s.output.timeseries_interval_s = 1e6;
  if (tier == "cpu") s.lmcache.max_local_cpu_size_gb = gb;
  if (tier == "disk") s.lmcache.max_local_disk_size_gb = gb;
  if (tier == "gpu") {
    hw::ModelGeometry g = hw::derive_geometry(s);
    engine::KvCacheLayout layout = engine::derive_kv_cache_layout(s, g);
    s.vllm.num_gpu_blocks =
        std::max<int64_t>(2, static_cast<int64_t>(gb * kGiB / layout.block_bytes));
  }
  return s;
}

// `on_fraction`, when given, is told now and then what share of the trace's requests is done.
Point replay(const scenario::Scenario& base, const std::string& trace, const std::string& tier,
             double gb, const std::function<void(double)>& on_fraction) {
  Point p;
  p.capacity_gb = gb;
  scenario::Scenario s = point_scenario(base, tier, gb);
  hw::ModelGeometry g = hw::derive_geometry(s);
  engine::KvCacheLayout layout = engine::derive_kv_cache_layout(s, g);
  p.capacity_tokens =
      tier == "gpu" ? layout.kv_cache_tokens()
                    : static_cast<int64_t>(gb * kGiB / static_cast<double>(g.kv_bytes_per_token));
  workload::WorkloadOptions o = workload_options(s);
  o.spacing_s = 1000;  // every request (and its disk / remote writes) finishes before the next
  o.output_tokens = 1;
  workload::Workload w(open_scenario_trace(s, trace), o);
  report::RunRecorder rec(s, scenario_trace_name(s, trace), "");
  engine::Cluster cluster(s, &w, &rec);
  if (on_fraction) {
    const double expected = static_cast<double>(estimate_requests(s, trace));
    cluster.run(
        [&](uint64_t done) { on_fraction(std::min(1.0, static_cast<double>(done) / expected)); });
  } else {
    cluster.run(nullptr);
  }
  p.summary = rec.finish(cluster.now());
  return p;
}

std::string table(const std::vector<Point>& points, const std::string& tier, bool csv) {
  std::string out;
  char buf[256];
  if (csv)
    out +=
        "tier,capacity_gb,capacity_tokens,requests,gpu_hit_rate,lmcache_hit_rate,cpu_hit_rate,"
        "disk_hit_rate,remote_hit_rate,total_hit_rate,failed_load_rate,rejected\n";
  else
    out +=
        "tier   capacity GiB   capacity tokens   GPU hit   LMCache hit (cpu / disk / remote)"
        "    total   failed   rejected\n";
  for (const Point& p : points) {
    const report::Summary& s = p.summary;
    double total = s.gpu_hit_rate + s.lmcache_hit_rate;
    if (csv)
      std::snprintf(buf, sizeof buf, "%s,%.6g,%lld,%llu,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%llu\n",
                    tier.c_str(), p.capacity_gb, static_cast<long long>(p.capacity_tokens),
                    static_cast<unsigned long long>(s.requests), s.gpu_hit_rate, s.lmcache_hit_rate,
                    s.tier_hit_rate[0], s.tier_hit_rate[1], s.tier_hit_rate[2], total,
                    s.failed_load_rate, static_cast<unsigned long long>(s.rejected));
    else
      std::snprintf(buf, sizeof buf,
                    "%-6s %12.6g %17lld %8.2f%%   %7.2f%% (%.2f%% / %.2f%% / %.2f%%)   %6.2f%%"
                    " %6.2f%%   %8llu\n",
                    tier.c_str(), p.capacity_gb, static_cast<long long>(p.capacity_tokens),
                    100 * s.gpu_hit_rate, 100 * s.lmcache_hit_rate, 100 * s.tier_hit_rate[0],
                    100 * s.tier_hit_rate[1], 100 * s.tier_hit_rate[2], 100 * total,
                    100 * s.failed_load_rate, static_cast<unsigned long long>(s.rejected));
    out += buf;
  }
  return out;
}

}  // namespace

std::vector<double> parse_capacities_gb(const std::vector<std::string>& items) {
  std::vector<double> out;
  for (const std::string& arg : items)
    for (std::string_view item : io::split(arg, ',')) {
      if (item.empty()) throw InputError("--capacity-gb", 0, "", "empty item in the list");
      auto v = io::parse_double(item);  // finite or nullopt
      if (!v || *v <= 0 || *v > 1e9)
        throw InputError("--capacity-gb", 0, std::string(item),
                         "expected a number of GiB in (0, 1e9]");
      out.push_back(*v);
    }
  return out;
}

std::vector<CacheReplayPoint> cache_replay(const CacheReplayOptions& o) {
  if (o.tier != "gpu" && o.tier != "cpu" && o.tier != "disk")
    throw InputError("--tier", 0, o.tier, "expected gpu, cpu or disk");
  scenario::Scenario base = load_scenario(o.scenario, o.sets);
  if (o.tier != "gpu" && !base.lmcache.enabled)
    throw InputError("--tier", 0, o.tier, "varying an LMCache tier needs lmcache.enabled = true");
  // The GPU pool's block size (and, with no --capacity-gb, its size) from the base scenario.
  std::optional<engine::KvCacheLayout> gpu;
  if (o.tier == "gpu") gpu = engine::derive_kv_cache_layout(base, hw::derive_geometry(base));
  std::vector<double> caps = o.capacity_gb;
  if (caps.empty()) {
    caps = {o.tier == "cpu"    ? base.lmcache.max_local_cpu_size_gb
            : o.tier == "disk" ? base.lmcache.max_local_disk_size_gb
                               : static_cast<double>(gpu->num_blocks()) *
                                     static_cast<double>(gpu->block_bytes) / kGiB};
  }
  for (double c : caps) {
    if (!(c > 0 && c <= 1e9))
      throw InputError("--capacity-gb", 0, std::to_string(c), "expected GiB in (0, 1e9]");
    // The point's scenario must pass the scenario's own checks (a CPU pool below one byte does
    // not); the error names the capacity and the check.
    try {
      scenario::validate(point_scenario(base, o.tier, c));
    } catch (const InputError& e) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", c);
      const std::string what = e.what();
      throw InputError("--capacity-gb", 0, text, what.substr(what.find(e.field())));
    }
    if (gpu && c * kGiB / static_cast<double>(gpu->block_bytes) >
                   static_cast<double>(engine::kMaxGpuBlocksPerInstance))
      throw InputError("--capacity-gb", 0, std::to_string(c),
                       "more GPU blocks than the simulator holds (" +
                           std::to_string(engine::kMaxGpuBlocksPerInstance) + ")");
  }
  std::vector<Point> points(caps.size());
  PointsProgress progress("kvtwin cache-replay", o.quiet, caps.size());
  parallel_for(caps.size(), o.jobs, [&](size_t i) {
    points[i] = replay(base, o.trace, o.tier, caps[i], progress.reporter(i));
    progress.point(i, 1.0);
  });
  progress.finish();
  return points;
}

int run_cache_replay(const CacheReplayOptions& o) {
  std::vector<Point> points = cache_replay(o);
  if (!o.quiet) std::fputs(table(points, o.tier, false).c_str(), stdout);
  if (!o.csv.empty()) {
    io::write_output(o.csv, table(points, o.tier, true));
  }
  return 0;
}

}  // namespace kvtwin::sim::cli
