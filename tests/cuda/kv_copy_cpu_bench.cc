// The CPU reference and the host executor of the kernels' plan at Llama-3.1-8B row shapes (8 of
// its 32 layers, to keep host memory small). Not a performance target: it runs where no GPU is,
// so the benchmark harness and cuda/gpu/check.sh's JSON, comparison and table are exercised.
// GBps counts bytes read + written, as the device copies do.
#include <benchmark/benchmark.h>

#include <string>

#include "cuda/kv_copy_plan.h"
#include "cuda/kv_copy_reference.h"
#include "tests/cuda/bench_shapes.h"
#include "tests/cuda/kv_test_support.h"

namespace kvtwin::cuda::bench {
namespace {

constexpr int kLayers = 8;

void run(benchmark::State& state, PagedKind kind, CopyDirection dir, bool plan, int64_t tokens) {
  testing::KvCase c;
  c.kind = kind;
  c.direction = dir;
  c.num_layers = kLayers;
  c.num_heads = kLlama8B.kv_heads;
  c.head_size = kLlama8B.head_size;
  c.elem_bytes = kLlama8B.elem_bytes;
  c.block_size = kLlama8B.block_size;
  c.tokens_per_chunk = kLlama8B.chunk_tokens;
  c.num_tokens = tokens;
  c.num_blocks = tokens / c.block_size + 1;
  c.skip_percent = 0;
  testing::HostKvArena arena(c);
  arena.reset(0xA5);
  const KvCopyRequest req = arena.request();
  const std::vector<KvCopyPlan> plans = make_kv_copy_plans(req);
  for (auto _ : state) {
    if (plan) {
      for (const KvCopyPlan& p : plans) execute_kv_copy_plan_on_host(p, dir);
    } else {
      kv_copy_reference(req);
    }
    benchmark::ClobberMemory();
  }
  int64_t payload = 0;
  for (int64_t i = 0; i < req.num_chunks(); ++i) payload += req.chunk_layout(i).total_bytes();
  state.SetBytesProcessed(2 * payload * state.iterations());
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(2 * payload) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (bool plan : {false, true}) {
    for (PagedKind kind : {PagedKind::kNHD, PagedKind::kHND}) {
      for (CopyDirection dir : {CopyDirection::kPagedToChunk, CopyDirection::kChunkToPaged}) {
        for (int64_t tokens : {int64_t{256}, int64_t{1024}}) {
          const std::string name = std::string(plan ? "cpu_plan" : "cpu_reference") + "/" +
                                   (dir == CopyDirection::kPagedToChunk ? "gather" : "scatter") +
                                   "/llama3.1-8b-8l/" + std::string(paged_kind_name(kind)) +
                                   "/KV_2LTD/tokens:" + std::to_string(tokens);
          benchmark::RegisterBenchmark(name.c_str(), run, kind, dir, plan, tokens)
              ->UseRealTime()
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvtwin::cuda::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  kvtwin::cuda::bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
