// A deterministic fuzz of valid configurations, small enough for every CI run: random but fixed
// combinations of the features that interact (LMCache bulk / layerwise / async loading, CPU /
// disk / Redis tiers and their sizes, chunk sizes, eviction policies, quirks reproduced or fixed,
// injected Redis faults, GPU pool sizes, instances and routers; on the vLLM side hybrid, Mamba,
// MLA and encoder-decoder models with prefix caching, chunked prefill and budgets varied) over the
// shipped 10-minute Mooncake example trace. Every case must:
//   finish (exit 0) within 60 s — no hang, no stall, no abort;
//   account for every request (finished + rejected + failed = total);
//   with prefix caching off, report no GPU prefix hits;
//   with LMCache's quirks fixed, load no chunk holding another chunk's KV;
// and every fourth case runs twice and must write byte-identical outputs.
//
// Earlier rounds of this fuzz (by hand, 900 cases) found the async-loading stall (its repro is in
// InputEdges.ValidScenariosThatOnceRanForeverFinish) and the layerwise Redis path; see
// reports/robustness/dev-vm-2cpu-xeon-2026-11-26-stop17.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/command.h"
#include "tests/support/fuzz_rng.h"
#include "tests/support/paths.h"

namespace {

using kvtwin::testing::run_kvtwin;
using kvtwin::testing::slurp;

using Rng = kvtwin::testing::FuzzRng;

using Sets = std::vector<std::pair<std::string, std::string>>;

std::string value_of(const Sets& sets, const std::string& key) {
  for (const auto& [k, v] : sets)
    if (k == key) return v;
  return "";
}

// A JSON number field "key": value after `after` in `json` (-1 when absent). Enough for the flat
// numbers the checks read from summary.json.
double json_number(const std::string& json, const std::string& after, const std::string& key) {
  size_t at = json.find("\"" + after + "\"");
  if (at == std::string::npos) return -1;
  at = json.find("\"" + key + "\":", at);
  if (at == std::string::npos) return -1;
  return std::stod(json.substr(at + key.size() + 3));
}

void run_case(const std::string& scenario, const Sets& sets, bool twice, const std::string& what) {
  const std::string dir = kvtwin::testing::scratch_dir();
  std::string args =
      "run -q --scenario " + kvtwin::testing::source_path("scenarios/" + scenario) + " --trace " +
      kvtwin::testing::source_path("traces/examples/mooncake_conversation_10min.jsonl");
  for (const auto& [k, v] : sets) args += " --set " + k + "=" + v;
  const std::string replay = "kvtwin " + args;  // printed on failure
  auto r = run_kvtwin(args + " --out " + dir + "/a", 60);
  ASSERT_EQ(r.exit_code, 0) << what << "\n" << replay << "\n" << r.err;
  const std::string summary = slurp(dir + "/a/summary.json");
  ASSERT_FALSE(summary.empty()) << what;
  const double total = json_number(summary, "requests", "total");
  EXPECT_GT(total, 0) << what;
  EXPECT_EQ(json_number(summary, "requests", "finished") +
                json_number(summary, "requests", "rejected") +
                json_number(summary, "requests", "failed"),
            total)
      << what << "\n"
      << replay;
  if (value_of(sets, "vllm.enable_prefix_caching") == "false") {
    EXPECT_EQ(json_number(summary, "gpu_prefix_cache", "hit_tokens"), 0) << what << "\n" << replay;
  }
  if (value_of(sets, "lmcache.upstream_fixes") == "true") {  // -1: no async lookups, no field
    EXPECT_LE(json_number(summary, "async_loading", "wrong_kv_chunks"), 0) << what << "\n"
                                                                           << replay;
  }
  if (!twice) return;
  auto again = run_kvtwin(args + " --out " + dir + "/b", 60);
  ASSERT_EQ(again.exit_code, 0) << what;
  for (const char* f : {"summary.json", "requests.csv", "timeseries.csv", "trace.json"})
    EXPECT_EQ(slurp(dir + "/a/" + f), slurp(dir + "/b/" + f)) << what << ": " << f << " differs\n"
                                                              << replay;
}

TEST(ConfigFuzz, LmcacheFeatureCombinationsFinishAndAreDeterministic) {
  Rng rng{20261126};
  const std::vector<std::string> scenarios = {"llama31_8b_h100_cpu.toml",
                                              "llama31_70b_tp4_cpu_disk_redis.toml",
                                              "deepseek_v3_mla_h200.toml"};
  for (int i = 0; i < 24; ++i) {
    const std::string mode = rng.pick<std::string>({"bulk", "bulk", "layerwise", "async"});
    Sets sets = {
        {"workload.max_requests", rng.pick<std::string>({"30", "60"})},
        {"workload.rate_scale", rng.pick<std::string>({"0.02", "0.2", "1", "5"})},
        {"lmcache.enabled", "true"},
        {"lmcache.use_layerwise", mode == "layerwise" ? "true" : "false"},
        {"lmcache.enable_async_loading", mode == "async" ? "true" : "false"},
        {"lmcache.upstream_fixes", rng.pick<std::string>({"true", "false"})},
        {"lmcache.remote", rng.pick<std::string>({"true", "false"})},
        {"lmcache.max_local_cpu_size_gb", rng.pick<std::string>({"0.5", "2", "8", "64"})},
        {"lmcache.max_local_disk_size_gb", rng.pick<std::string>({"0", "2", "20"})},
        {"lmcache.chunk_size", rng.pick<std::string>({"64", "256", "512"})},
        {"lmcache.cache_policy", rng.pick<std::string>({"LRU", "LFU", "FIFO", "MRU", "S3FIFO"})},
        {"vllm.num_gpu_blocks", rng.pick<std::string>({"1500", "3000", "40000"})},
        {"cluster.instances", rng.pick<std::string>({"1", "2", "4"})},
        {"cluster.router", rng.pick<std::string>({"round_robin", "least_loaded", "prefix_aware"})},
        {"links.remote_get_failure_rate", rng.pick<std::string>({"0", "0.1", "0.5"})},
        {"output.plots", "false"},
    };
    const std::string scenario = rng.pick(scenarios);
    run_case(scenario, sets, i % 4 == 0, "case " + std::to_string(i) + " (" + scenario + ")");
  }
}

TEST(ConfigFuzz, VllmFeatureCombinationsFinishAndAreDeterministic) {
  Rng rng{42};
  const std::vector<std::string> scenarios = {
      "gemma3_27b_sliding.toml", "gpt_oss_120b_hybrid.toml", "nemotron_h_8b_mamba_hybrid.toml",
      "deepseek_v3_mla_h200.toml", "llama31_8b_h100_cpu.toml"};
  for (int i = 0; i < 20; ++i) {
    const std::string scenario = rng.pick(scenarios);
    const bool chunked = rng.pick<std::string>({"true", "true", "false"}) == "true";
    Sets sets = {
        {"workload.max_requests", rng.pick<std::string>({"30", "60"})},
        {"workload.rate_scale", rng.pick<std::string>({"0.05", "0.5", "1", "5"})},
        {"vllm.num_gpu_blocks", rng.pick<std::string>({"0", "600", "2000", "8000"})},
        {"vllm.max_num_seqs", rng.pick<std::string>({"1", "8", "256"})},
        {"vllm.max_num_batched_tokens",
         chunked ? rng.pick<std::string>({"512", "2048", "8192"}) : "0"},  // 0: max_model_len
        {"vllm.long_prefill_token_threshold", rng.pick<std::string>({"0", "256", "4096"})},
        {"vllm.block_size", rng.pick<std::string>({"16", "32", "64"})},
        {"vllm.enable_prefix_caching", rng.pick<std::string>({"true", "true", "false"})},
        {"vllm.enable_chunked_prefill", chunked ? "true" : "false"},
        {"vllm.prefix_caching_hash_algo",
         rng.pick<std::string>({"sha256", "xxhash", "sha256_cbor"})},
        {"cluster.instances", rng.pick<std::string>({"1", "2", "3"})},
        {"cluster.router", rng.pick<std::string>({"round_robin", "least_loaded", "prefix_aware"})},
        {"output.plots", "false"},
    };
    if (scenario == "nemotron_h_8b_mamba_hybrid.toml")
      sets.emplace_back("vllm.mamba_cache_mode", rng.pick<std::string>({"none", "align", "all"}));
    run_case(scenario, sets, i % 4 == 0, "case " + std::to_string(i) + " (" + scenario + ")");
  }
}

}  // namespace
