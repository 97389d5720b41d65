// Google Benchmark of the vLLM golden replay on the performance op-log
// (../shared/golden/perf/perf_full_20k.jsonl.gz, 1,283,219 ops):
//   BM_ExecutePreparsed — the model alone: every op pre-parsed in memory, executed without
//                         comparison (hashing included), as vLLM's 54.3 k ops/s was measured;
//   BM_StreamReplay     — end to end: read + gunzip + parse + execute + compare.
// Items per second = ops per second. Run: build/release/tests/sim/vllm_replay_benchmark
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "sim/golden/vllm_golden.h"
#include "sim/io/line_reader.h"

namespace {

using namespace kvtwin::sim::golden;

std::string perf_log_path() {
  const char* env = std::getenv("KVTWIN_PERF_LOG");
  return env ? env : std::string(KVTWIN_SHARED_DIR) + "/golden/perf/perf_full_20k.jsonl.gz";
}

void BM_ExecutePreparsed(benchmark::State& state) {
  static const std::unique_ptr<VllmPreparsedLog> log =
      std::make_unique<VllmPreparsedLog>(preparse_vllm_log(perf_log_path()));
  uint64_t ops = 0;
  for (auto _ : state) ops += execute_vllm_log(*log);
  state.SetItemsProcessed(static_cast<int64_t>(ops));
}
BENCHMARK(BM_ExecutePreparsed)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamReplay(benchmark::State& state) {
  uint64_t ops = 0;
  for (auto _ : state) {
    kvtwin::sim::io::LineReader reader(perf_log_path());
    std::string_view header;
    reader.next(&header);
    std::string header_copy(header);
    CaseOutcome out = replay_vllm_kv_golden(reader, header_copy, ReplayOptions{});
    if (!out.passed) state.SkipWithError(("golden mismatch: " + out.field).c_str());
    ops += out.num_ops;
  }
  state.SetItemsProcessed(static_cast<int64_t>(ops));
}
BENCHMARK(BM_StreamReplay)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
