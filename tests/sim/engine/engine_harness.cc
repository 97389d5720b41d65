#include "tests/sim/engine/engine_harness.h"

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

RunResult run_cluster(const scenario::Scenario& s, const std::string& trace,
                      const workload::WorkloadOptions& options) {
  workload::Workload w(workload::open_trace_bytes("<t>", trace, workload::TraceFormat::kAuto),
                       options);
  report::RunRecorder rec(s, "<t>", "");
  Cluster c(s, &w, &rec);
  RunResult r;
  c.set_request_observer([&](const report::RequestRecord& x) { r.records[x.index] = x; });
  c.run(nullptr);
  r.summary = rec.finish(c.now());
  return r;
}

RunResult run_on_example_trace(const scenario::Scenario& s) {
  return run_cluster(s,
                     kvtwin::testing::slurp(kvtwin::testing::source_path(
                         "traces/examples/mooncake_conversation_10min.jsonl")),
                     cli::workload_options(s));
}

}  // namespace kvtwin::sim::engine::harness
