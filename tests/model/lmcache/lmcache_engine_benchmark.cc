// Hot paths of the LMCache model on a realistic CPU + disk setup: Llama-3.1-8B (32 layers, 8 KV
// heads of 128, bf16: 128 KiB per token, 32 MiB per 256-token chunk), a 16 GiB CPU pool and a
// 64 GiB disk tier, LRU, sha256_cbor keys. Each op works on a 4096-token prompt (16 chunks).
//
//   store            a new prompt every iteration (steady state: CPU and disk evict), disk writes
//                    completed after each store
//   lookup           pinned lookup + unpin of a resident prompt (tokens hashed each time)
//   lookup_hashes    the same from precomputed chunk hashes (the scheduler sends hashes)
//   retrieve         retrieve of a resident prompt from the CPU tier
//   retrieve_disk    retrieve of a prompt only on disk (read into CPU, written back), then the
//                    CPU copies are removed again
//
// Figures are operations per second of the model alone (no bytes move).
#include <benchmark/benchmark.h>

#include <numeric>

#include "model/lmcache/cache_engine.h"

namespace kvtwin::model::lmcache {
namespace {

constexpr int64_t kPromptTokens = 4096;

LMCacheMetadata llama8b() {
  LMCacheMetadata m;
  m.model_name = "meta-llama/Llama-3.1-8B";
  m.num_layers = 32;
  m.num_kv_heads = 8;
  m.head_size = 128;
  m.kv_dtype = KvDtype::kBfloat16;
  m.chunk_size = 256;
  return m;
}

LMCacheEngineConfig cpu_disk_config() {
  LMCacheEngineConfig c;
  c.chunk_size = 256;
  c.pre_caching_hash_algorithm = "sha256_cbor";
  c.python_hash_seed = "0";
  c.max_local_cpu_size_bytes = 16ULL << 30;
  c.local_disk = true;
  c.max_local_disk_size_bytes = 64ULL << 30;
  return c;
}

std::vector<TokenId> prompt(int64_t i) {
  std::vector<TokenId> t(kPromptTokens);
  std::iota(t.begin(), t.end(), 1 + i * kPromptTokens);
  return t;
}

void set_rates(benchmark::State& state, int64_t chunks_per_op) {
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["chunks_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * chunks_per_op), benchmark::Counter::kIsRate);
}

void BM_Store(benchmark::State& state) {
  LMCacheEngine e(cpu_disk_config(), llama8b());
  int64_t i = 0;
  std::vector<std::vector<TokenId>> prompts;
  for (int p = 0; p < 256; ++p) prompts.push_back(prompt(p));
  for (auto _ : state) {
    const std::vector<TokenId>& t = prompts[static_cast<size_t>(i++) % prompts.size()];
    // A new prompt each time: vary the first token so every chunk key is new.
    std::vector<TokenId> fresh = t;
    fresh[0] = 1000000000 + i;
    StoreResult r = e.store({TokenInput::of_tokens(fresh), 0, nullptr});
    e.storage_manager().complete_all_writes();
    e.end_of_operation();
    benchmark::DoNotOptimize(r.stored.size());
  }
  set_rates(state, kPromptTokens / 256);
}
BENCHMARK(BM_Store)->Unit(benchmark::kMicrosecond);

void BM_Lookup(benchmark::State& state) {
  LMCacheEngine e(cpu_disk_config(), llama8b());
  std::vector<TokenId> t = prompt(0);
  e.store({TokenInput::of_tokens(t), 0, nullptr});
  e.storage_manager().complete_all_writes();
  for (auto _ : state) {
    LookupRequest req;
    req.input = TokenInput::of_tokens(t);
    req.lookup_id = "r";
    req.pin = true;
    LookupResult l = e.lookup(req);
    e.lookup_unpin("r");
    e.end_of_operation();
    benchmark::DoNotOptimize(l.hit_tokens);
  }
  set_rates(state, kPromptTokens / 256);
}
BENCHMARK(BM_Lookup)->Unit(benchmark::kMicrosecond);

void BM_LookupHashes(benchmark::State& state) {
  LMCacheEngine e(cpu_disk_config(), llama8b());
  std::vector<TokenId> t = prompt(0);
  e.store({TokenInput::of_tokens(t), 0, nullptr});
  e.storage_manager().complete_all_writes();
  std::vector<ChunkHash> hashes;
  std::vector<int64_t> offsets;
  for (const ChunkSpan& s : e.token_database().process_tokens(t)) {
    hashes.push_back(s.hash);
    offsets.push_back(s.end - s.start);
  }
  for (auto _ : state) {
    LookupRequest req;
    req.input = TokenInput::of_hashes(hashes, offsets);
    req.lookup_id = "r";
    req.pin = true;
    LookupResult l = e.lookup(req);
    e.lookup_unpin("r");
    e.end_of_operation();
    benchmark::DoNotOptimize(l.hit_tokens);
  }
  set_rates(state, kPromptTokens / 256);
}
BENCHMARK(BM_LookupHashes)->Unit(benchmark::kMicrosecond);

void BM_Retrieve(benchmark::State& state) {
  LMCacheEngine e(cpu_disk_config(), llama8b());
  std::vector<TokenId> t = prompt(0);
  e.store({TokenInput::of_tokens(t), 0, nullptr});
  e.storage_manager().complete_all_writes();
  for (auto _ : state) {
    RetrieveResult r = e.retrieve({t, 0, std::nullopt, nullptr});
    e.end_of_operation();
    benchmark::DoNotOptimize(r.ret_tokens);
  }
  set_rates(state, kPromptTokens / 256);
}
BENCHMARK(BM_Retrieve)->Unit(benchmark::kMicrosecond);

void BM_RetrieveDisk(benchmark::State& state) {
  LMCacheEngine e(cpu_disk_config(), llama8b());
  std::vector<TokenId> t = prompt(0);
  e.store({TokenInput::of_tokens(t), 0, nullptr});
  e.storage_manager().complete_all_writes();
  std::vector<std::string> cpu_only{"LocalCPUBackend"};
  std::span<const TokenId> tokens(t);
  e.clear(tokens, &cpu_only, nullptr);
  for (auto _ : state) {
    RetrieveResult r = e.retrieve({t, 0, std::nullopt, nullptr});
    e.end_of_operation();
    benchmark::DoNotOptimize(r.ret_tokens);
    state.PauseTiming();
    e.clear(tokens, &cpu_only, nullptr);
    state.ResumeTiming();
  }
  set_rates(state, kPromptTokens / 256);
}
BENCHMARK(BM_RetrieveDisk)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kvtwin::model::lmcache

BENCHMARK_MAIN();
