#include "tests/sim/engine/engine_harness.h"

#include <algorithm>
#include <fstream>

#include "sim/cli/common.h"
#include "sim/engine/cluster.h"
#include "sim/scenario/scenario_loader.h"
#include "tests/support/command.h"
#include "tests/support/paths.h"

namespace kvtwin::sim::engine::harness {

std::string write_profile(const std::string& dir) {
  std::string path = dir + "/profile.csv";
  std::ofstream out(path);
  out << "num_new_tokens,num_seqs,context_tokens,step_us\n";
  for (int t : {1, 10, 100, 1000})
    for (int s : {1, 2, 4})
      for (int c : {0, 5000}) out << t << "," << s << "," << c << "," << 1000 + t << "\n";
  return path;
}

scenario::Scenario profile_scenario(const std::string& toml, const std::string& name,
                                    const std::vector<std::string>& sets) {
  std::string dir = kvtwin::testing::scratch_dir();
  write_profile(dir);
  scenario::Scenario s = scenario::load_scenario_text(toml, name, dir);
  for (const std::string& set : sets) scenario::apply_override(&s, set);
  scenario::validate(s);
  return s;
}

scenario::Scenario lmcache_cpu_scenario(const std::string& name,
                                        const std::vector<std::string>& sets) {
  return profile_scenario(
      "[step]\nmodel = \"profile\"\nprofile = \"profile.csv\"\n"
      "[vllm]\nblock_size = 16\nnum_gpu_blocks = 100\n"
      "[lmcache]\nenabled = true\nchunk_size = 256\nmax_local_cpu_size_gb = 1\n"
      "[links]\npcie_h2d_gbps = 35\npcie_d2h_gbps = 50\npcie_latency_us = 10\n",
      name, sets);
}

namespace {

RunResult run_reader(const scenario::Scenario& s, std::unique_ptr<workload::TraceReader> reader,
                     const workload::WorkloadOptions& options,
                     const Cluster::MoverFactory& movers = {}, const std::string& out_dir = "") {
  workload::Workload w(std::move(reader), options);
  report::RunRecorder rec(s, "<t>", out_dir);
  Cluster c(s, &w, &rec, movers);
  RunResult r;
  c.set_request_observer([&](const report::RequestRecord& x) { r.records[x.index] = x; });
  c.run(nullptr);
  r.summary = rec.finish(c.now());
  return r;
}

}  // namespace

RunResult run_cluster(const scenario::Scenario& s, const std::string& trace,
                      const workload::WorkloadOptions& options, const Cluster::MoverFactory& movers,
                      const std::string& out_dir) {
  return run_reader(s, workload::open_trace_bytes("<t>", trace, workload::TraceFormat::kAuto),
                    options, movers, out_dir);
}

RunResult run_on_example_trace(const scenario::Scenario& s) {
  return run_cluster(s,
                     kvtwin::testing::slurp(kvtwin::testing::source_path(
                         "traces/examples/mooncake_conversation_10min.jsonl")),
                     cli::workload_options(s));
}

RunResult run_on_scenario_trace(const scenario::Scenario& s) {
  return run_reader(s, cli::open_scenario_trace(s, ""), cli::workload_options(s));
}

int64_t tokens_the_requests_need(const RunResult& r) {
  int64_t needed = 0;
  for (const auto& [index, rec] : r.records)
    if (!rec.rejected)
      needed += rec.prompt_tokens - rec.gpu_hit_tokens - rec.lmcache_hit_tokens +
                std::max<int64_t>(rec.output_tokens - 1, 0);
  return needed;
}

int64_t whole_chunk_load(const report::RequestRecord& rec, int64_t chunk) {
  const int64_t g = rec.gpu_hit_tokens, h = rec.lmcache_hit_tokens, p = rec.prompt_tokens;
  if (h == 0) return 0;
  const bool whole = g + h == p - 1 && p % chunk == 0;
  return g + h + (whole ? 1 : 0) - g / chunk * chunk;
}

}  // namespace kvtwin::sim::engine::harness
