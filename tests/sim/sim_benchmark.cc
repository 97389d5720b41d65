// Speed of the simulator's parts and of whole runs (figures, not assertions).
//
//   build/release/tests/sim/sim_benchmark --benchmark_min_time=0.05
//
// The whole-trace figure of the issue (Mooncake conversation, 8B scenario, CPU and disk tiers,
// 8 instances) is BM_MooncakeEightInstances (about 7 s; run it alone for its peak RSS):
//   build/release/tests/sim/sim_benchmark --benchmark_filter=EightInstances
// or, with the CLI and its outputs:
//   /usr/bin/time -v build/release/kvtwin run --scenario scenarios/llama31_8b_h100_cpu.toml
//       --trace traces/mooncake_fast25/conversation_trace.jsonl
//       --set cluster.instances=8 --set workload.rate_scale=1
//       --set lmcache.max_local_disk_size_gb=500 -q --out /tmp/bench      (one line)
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "model/vllm/hashing.h"
#include "sim/cli/run_command.h"
#include "sim/hw/fluid_links.h"
#include "sim/scenario/scenario_loader.h"
#include "sim/workload/token_synth.h"
#include "sim/workload/trace_reader.h"

namespace kvtwin::sim {
namespace {

std::string source(const std::string& rel) {
  return std::string(KVTWIN_SOURCE_DIR) + "/" + rel;
}

// Mooncake JSONL parsing (simdjson), rows per second.
void BM_ReadMooncakeConversation(benchmark::State& state) {
  int64_t rows = 0;
  for (auto _ : state) {
    auto r = workload::open_trace(source("traces/mooncake_fast25/conversation_trace.jsonl"),
                                  workload::TraceFormat::kMooncake);
    workload::TraceRequest req;
    while (r->next(&req)) ++rows;
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadMooncakeConversation)->Unit(benchmark::kMillisecond);

// Azure CSV parsing (fast-cpp-csv-parser), rows per second.
void BM_ReadAzureConv(benchmark::State& state) {
  int64_t rows = 0;
  for (auto _ : state) {
    auto r = workload::open_trace(source("traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"),
                                  workload::TraceFormat::kAzure);
    workload::TraceRequest req;
    while (r->next(&req)) ++rows;
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadAzureConv)->Unit(benchmark::kMillisecond);

// Token synthesis from block ids, tokens per second.
void BM_TokenSynthesis(benchmark::State& state) {
  workload::TokenSynthesizer synth(0, 128256);
  workload::TraceRequest r;
  r.prompt_tokens = 12288;
  r.block_size = 512;
  for (uint64_t i = 0; i < 24; ++i) r.block_ids.push_back(i);
  std::vector<int64_t> tokens;
  for (auto _ : state) {
    tokens.clear();
    synth.prompt_tokens(r, &tokens);
    benchmark::DoNotOptimize(tokens.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(state.iterations()) * 12288,
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TokenSynthesis);

// vLLM prompt hashing, one chain of 760 16-token blocks (a 12,160-token prompt; the Mooncake
// conversation trace's mean is 12,035): blocks per second with sha256 (pickle + SHA-256, vLLM's
// default) and xxhash (pickle + XXH3-128). Each block's key holds its parent's hash, so a chain is
// sequential; on the stop-15 VM the SHA-256 figure is the floor of the Mooncake run's hashing
// (report reports/speed/dev-vm-2cpu-xeon-2026-11-26-stop15).
void BM_PromptBlockHashes(benchmark::State& state) {
  const model::vllm::HashFn fn =
      state.range(0) == 0 ? model::vllm::HashFn::kSha256 : model::vllm::HashFn::kXxhash;
  model::vllm::BlockHasher hasher(fn, model::vllm::none_hash(fn, "0"));
  workload::TokenSynthesizer synth(0, 128256);
  workload::TraceRequest r;
  r.prompt_tokens = 760 * 16;
  std::vector<int64_t> tokens;
  synth.prompt_tokens(r, &tokens);
  int64_t blocks = 0;
  for (auto _ : state) {
    model::vllm::BlockHash parent;
    for (size_t b = 0; b + 16 <= tokens.size(); b += 16) {
      parent = hasher.hash_block_tokens(parent, {tokens.data() + b, 16}, nullptr);
      ++blocks;
    }
    benchmark::DoNotOptimize(parent);
  }
  state.SetLabel(model::vllm::hash_fn_name(fn).data());
  state.counters["blocks/s"] =
      benchmark::Counter(static_cast<double>(blocks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PromptBlockHashes)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// Max-min fair link sharing: 1000 flows on 4 links, one every 100 µs, each 1-7 ms long (about
// ten in flight), flows per second.
void BM_FluidLinks(benchmark::State& state) {
  int64_t flows = 0;
  for (auto _ : state) {
    Simulator sim;
    hw::FluidLinks links(&sim);
    std::vector<hw::FluidLinks::LinkId> ids;
    for (int l = 0; l < 4; ++l) ids.push_back(links.add_link("l", 1e9 * (l + 1)));
    for (int i = 0; i < 1000; ++i) {
      sim.schedule_at(i * 100'000, [&, i] {
        links.start_flow({ids[static_cast<size_t>(i % 4)], ids[static_cast<size_t>((i + 1) % 4)]},
                         1e6 * (1 + i % 7), 100, [] {});
      });
    }
    sim.run();
    flows += 1000;
  }
  state.counters["flows/s"] =
      benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FluidLinks)->Unit(benchmark::kMillisecond);

// The default scenario (Llama-3.1-8B, 4 instances, LMCache CPU tier) on the first 300 requests
// of the embedded trace: requests per second of wall time.
void BM_RunDefaultScenario(benchmark::State& state) {
  scenario::Scenario s = scenario::load_default_scenario();
  scenario::apply_override(&s, "workload.max_requests=300");
  scenario::validate(s);
  int64_t requests = 0;
  for (auto _ : state) {
    report::Summary sum = cli::simulate(s, "", "", true, nullptr);
    requests += static_cast<int64_t>(sum.requests);
  }
  state.counters["requests/s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RunDefaultScenario)->Unit(benchmark::kMillisecond)->Iterations(1);

// Issue 4's speed target: the whole Mooncake conversation trace (12,031 requests) on the 8B
// scenario with CPU and disk tiers and 8 instances, no outputs written. Targets: <= 2 s wall on
// one core, <= 1 GB peak RSS (peak_rss_mb is the process's, so run this benchmark alone).
void BM_MooncakeEightInstances(benchmark::State& state) {
  scenario::Scenario s = scenario::load_scenario_file(source("scenarios/llama31_8b_h100_cpu.toml"));
  for (const char* o : {"cluster.instances=8", "workload.rate_scale=1",
                        "lmcache.max_local_disk_size_gb=500", "output.plots=false"})
    scenario::apply_override(&s, o);
  scenario::validate(s);
  int64_t requests = 0;
  for (auto _ : state) {
    report::Summary sum = cli::simulate(
        s, source("traces/mooncake_fast25/conversation_trace.jsonl"), "", true, nullptr);
    requests += static_cast<int64_t>(sum.requests);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["requests/s"] =
      benchmark::Counter(static_cast<double>(requests), benchmark::Counter::kIsRate);
  state.counters["peak_rss_mb"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}
BENCHMARK(BM_MooncakeEightInstances)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace kvtwin::sim

BENCHMARK_MAIN();
