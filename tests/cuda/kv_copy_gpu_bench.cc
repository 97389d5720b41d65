// Kernel regression benchmarks on a GPU: the paged <-> chunk copies at real model shapes, each
// direction, device chunks (staging) and pinned host objects (staged DMA and zero-copy), next to
// the device's own ceilings measured in the same run:
//
//   ceiling/d2d   cudaMemcpy device->device, bytes read + written counted
//   ceiling/h2d   cudaMemcpy pinned host->device
//   ceiling/d2h   cudaMemcpy device->pinned host
//
// Every benchmark reports GBps (counted bytes over the median iteration), ceiling_GBps and
// frac_of_ceiling. Device-only copies count bytes read + written (2x payload) against
// ceiling/d2d; host copies count the payload against ceiling/h2d or ceiling/d2h. Targets (issue
// 5): >= 0.9 for gather/scatter at Llama-3.1-8B shapes with >= 4,096 tokens and for every staged
// and zero-copy path.
//
// Timing: CUDA events around each iteration, one warm-up first; input windows rotate so that
// small cases do not run from L2. Each iteration starts behind a 50-us spin kernel on the same
// stream, so the transfer is enqueued before the GPU reaches the start event: the figures are GPU
// time, not the host's enqueue time (which an idle GPU would otherwise wait for: 3.4 us of the
// 23.3 us a 16-MiB one-layer gather took on an H100 without the spin).
//
// Device-only copies of at most 512 MiB also report what a plain cudaMemcpy of the same bytes
// achieves, timed the same way (same_size_copy_GBps, frac_of_same_size_copy: at small sizes the
// fixed costs of a launch bound any copy), and kernel_GBps: the time to the end of the kernel on
// its stream, without the join of the engine's streams that record_completion adds.
// Without a device it prints why and exits 2.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/kv_copy.h"
#include "cuda/kv_transfer.h"
#include "cuda/paged_kv_cache.h"
#include "tests/cuda/bench_shapes.h"
#include "tests/cuda/gpu_spin.h"
#include "tests/cuda/kv_test_support.h"

namespace kvtwin::cuda::bench {
namespace {

constexpr uint64_t kRotateBytes = uint64_t{256} << 20;  // > 4x the 50-60 MB L2 of H100 / H200
constexpr uint64_t kCeilingBytes = uint64_t{1} << 30;
constexpr int64_t kMaxTokens = 32768;
constexpr uint64_t kSpinNs = 50'000;  // covers the enqueue of one iteration

struct Ceilings {
  double d2d_GBps = 0;  // bytes read + written
  double h2d_GBps = 0;
  double d2h_GBps = 0;
} g_ceilings;

int64_t align_up(int64_t n, int64_t a) {
  return (n + a - 1) / a * a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

enum class Op {
  kGatherDevice,
  kScatterDevice,
  kStoreStaged,
  kStoreZeroCopy,
  kRetrieveStaged,
  kRetrieveZeroCopy
};

struct OpInfo {
  const char* name;
  bool device_only;
  CopyDirection direction;
  HostPath path;
};

OpInfo info(Op op) {
  switch (op) {
    case Op::kGatherDevice:
      return {"gather_device", true, CopyDirection::kPagedToChunk, HostPath::kStaged};
    case Op::kScatterDevice:
      return {"scatter_device", true, CopyDirection::kChunkToPaged, HostPath::kStaged};
    case Op::kStoreStaged:
      return {"store_staged", false, CopyDirection::kPagedToChunk, HostPath::kStaged};
    case Op::kStoreZeroCopy:
      return {"store_zero_copy", false, CopyDirection::kPagedToChunk, HostPath::kZeroCopy};
    case Op::kRetrieveStaged:
      return {"retrieve_staged", false, CopyDirection::kChunkToPaged, HostPath::kStaged};
    case Op::kRetrieveZeroCopy:
      return {"retrieve_zero_copy", false, CopyDirection::kChunkToPaged, HostPath::kZeroCopy};
  }
  return {};
}

// KVTWIN_BENCH_SLOTS=sequential: the paged blocks in address order instead of shuffled, an
// experiment on how much of a small copy's time the paged side's spread over the buffer's pages
// costs. Recorded in the JSON's context as slot_order.
bool sequential_slots() {
  const char* order = std::getenv("KVTWIN_BENCH_SLOTS");
  return order != nullptr && std::string(order) == "sequential";
}

// Everything one model's (and paged layout's) benchmarks share, created on first use.
struct Rig {
  PagedLayout layout;
  int32_t layers = 0;
  int64_t capacity_tokens = 0;
  uint64_t window_bytes = 0;  // size of the chunk buffers
  PagedKvCache cache;
  KvTransferEngine engine;
  DeviceBuffer slots;   // [capacity_tokens]: whole blocks in a shuffled order
  DeviceBuffer chunks;  // device chunk objects
  PinnedBuffer pinned;  // pinned chunk objects
  Event start, end, kernel_end;
  Status status;
};

Status build_rig(const ModelShape& m, PagedKind kind, Rig* r) {
  r->layers = m.layers;
  r->capacity_tokens = kMaxTokens + 4096;
  r->layout = make_paged_layout(kind, r->capacity_tokens / m.block_size, m.block_size, m.kv_heads,
                                m.head_size, m.elem_bytes);
  KVTWIN_RETURN_IF_ERROR(PagedKvCache::create(r->layout, m.layers, &r->cache));
  KvTransferEngine::Options o;
  o.staging_bytes = uint64_t{256} << 20;
  KVTWIN_RETURN_IF_ERROR(KvTransferEngine::create(&r->cache, o, &r->engine));
  testing::KvCase kc;  // slot order: shuffled whole blocks, no skipped tokens
  kc.num_blocks = r->layout.num_blocks;
  kc.block_size = m.block_size;
  kc.num_tokens = r->capacity_tokens;
  kc.skip_percent = 0;
  kc.seed = 2024;
  std::vector<int64_t> slots = testing::make_slots(kc);
  if (sequential_slots())
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i);
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(slots.size() * sizeof(int64_t), &r->slots));
  KVTWIN_CUDA_TRY(
      cudaMemcpy(r->slots.data(), slots.data(), r->slots.size(), cudaMemcpyHostToDevice));
  const int64_t chunk =
      chunk_layout_for(r->layout, m.chunk_format(), m.layers, m.chunk_tokens).total_bytes();
  r->window_bytes = static_cast<uint64_t>(
      std::max<int64_t>(align_up(chunk, 4096) * (kMaxTokens / m.chunk_tokens), 2 * kRotateBytes));
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(r->window_bytes, &r->chunks));
  KVTWIN_RETURN_IF_ERROR(PinnedBuffer::allocate(r->window_bytes, &r->pinned));
  // Random contents: never time on zeros.
  std::vector<uint8_t> noise(64 << 20);
  testing::fill_random(noise.data(), noise.size(), 7);
  for (int l = 0; l < m.layers; ++l) {
    for (int64_t off = 0; off < r->layout.layer_bytes(); off += noise.size()) {
      const size_t n = std::min<size_t>(noise.size(), r->layout.layer_bytes() - off);
      KVTWIN_CUDA_TRY(cudaMemcpy(r->cache.layer(l) + off, noise.data(), n, cudaMemcpyHostToDevice));
    }
  }
  for (uint64_t off = 0; off < r->window_bytes; off += noise.size()) {
    const size_t n = std::min<size_t>(noise.size(), r->window_bytes - off);
    KVTWIN_CUDA_TRY(cudaMemcpy(r->chunks.data() + off, noise.data(), n, cudaMemcpyHostToDevice));
    std::copy(noise.begin(), noise.begin() + n, r->pinned.host() + off);
  }
  KVTWIN_RETURN_IF_ERROR(Event::create(&r->start, true));
  KVTWIN_RETURN_IF_ERROR(Event::create(&r->end, true));
  KVTWIN_RETURN_IF_ERROR(Event::create(&r->kernel_end, true));
  return Status();
}

// A stream and the two timing events of one copy on it.
Status timed_stream(Stream* s, Event* e0, Event* e1) {
  KVTWIN_RETURN_IF_ERROR(Stream::create(s));
  KVTWIN_RETURN_IF_ERROR(Event::create(e0, true));
  return Event::create(e1, true);
}

// cudaMemcpyAsync device -> device of `bytes` (read + written counted), timed with events on one
// stream like a benchmark iteration (behind a spin): median of 20 after 3 warm-ups, source rotating
// over 4 buffers when they fit 2 GiB (so that small copies do not run from L2).
Status same_size_copy(uint64_t bytes, double* gbps) {
  const int sources = bytes * 5 <= (uint64_t{2} << 30) ? 4 : 1;
  std::vector<DeviceBuffer> src(static_cast<size_t>(sources));
  DeviceBuffer dst;
  for (DeviceBuffer& b : src) {
    KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(bytes, &b));
    KVTWIN_CUDA_TRY(cudaMemset(b.data(), 0x3C, bytes));
  }
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(bytes, &dst));
  Stream s;
  Event e0, e1;
  KVTWIN_RETURN_IF_ERROR(timed_stream(&s, &e0, &e1));
  std::vector<double> ms;
  for (int i = 0; i < 23; ++i) {
    KVTWIN_RETURN_IF_ERROR(testing::launch_spin(s.get(), kSpinNs));
    KVTWIN_RETURN_IF_ERROR(e0.record(s.get()));
    KVTWIN_CUDA_TRY(cudaMemcpyAsync(dst.data(), src[static_cast<size_t>(i % sources)].data(), bytes,
                                    cudaMemcpyDeviceToDevice, s.get()));
    KVTWIN_RETURN_IF_ERROR(e1.record(s.get()));
    KVTWIN_RETURN_IF_ERROR(e1.synchronize());
    float t = 0;
    KVTWIN_RETURN_IF_ERROR(Event::elapsed_ms(e0, e1, &t));
    if (i >= 3) ms.push_back(t);
  }
  *gbps = 2.0 * static_cast<double>(bytes) / (median(ms) / 1e3) / 1e9;
  return Status();
}

Rig& rig(const ModelShape& m, PagedKind kind) {
  static std::map<std::string, std::unique_ptr<Rig>> rigs;
  const std::string key = std::string(m.name) + "/" + std::string(paged_kind_name(kind));
  auto& slot = rigs[key];
  if (!slot) {
    slot = std::make_unique<Rig>();
    slot->status = build_rig(m, kind, slot.get());
  }
  return *slot;
}

struct Case {
  const ModelShape* model;
  PagedKind kind;
  ChunkFormat format;
  int32_t chunk_layers;
  Op op;
  int64_t tokens;
};

void run_case(benchmark::State& state, Case c) {
  const ModelShape& m = *c.model;
  const OpInfo op = info(c.op);
  Rig& r = rig(m, c.kind);
  if (!r.status.ok()) {
    state.SkipWithError(r.status.message().c_str());
    return;
  }
  const int64_t T = m.chunk_tokens;
  const int64_t num_chunks = (c.tokens + T - 1) / T;
  const int64_t chunk_bytes = chunk_layout_for(r.layout, c.format, c.chunk_layers, T).total_bytes();
  const int64_t stride = align_up(chunk_bytes, 4096);  // LMCache's 4 KiB object alignment
  int64_t payload = 0;
  for (int64_t i = 0; i < num_chunks; ++i) {
    payload += chunk_layout_for(r.layout, c.format, c.chunk_layers, std::min(T, c.tokens - i * T))
                   .total_bytes();
  }
  const int64_t window = num_chunks * stride;
  const int64_t windows = std::max<int64_t>(
      1, std::min({(static_cast<int64_t>(kRotateBytes) + window - 1) / window,
                   static_cast<int64_t>(r.window_bytes) / window, r.capacity_tokens / c.tokens}));
  auto batch_for = [&](int64_t w) {
    HostChunkBatch b;
    b.format = c.format;
    b.first_layer = 0;
    b.num_layers = c.chunk_layers;
    b.device_slots = reinterpret_cast<const int64_t*>(r.slots.data()) + w * c.tokens;
    b.num_tokens = c.tokens;
    b.tokens_per_chunk = T;
    for (int64_t i = 0; i < num_chunks; ++i) {
      const int64_t off = w * window + i * stride;
      if (op.device_only) {
        b.chunks.push_back({nullptr, r.chunks.data() + off});
      } else {
        b.chunks.push_back({r.pinned.host() + off, r.pinned.device_alias(r.pinned.host() + off)});
      }
    }
    return b;
  };
  auto run_once = [&](int64_t w) -> Status {
    const HostChunkBatch b = batch_for(w);
    if (op.device_only) {  // the device chunks are zero-copy targets that happen to be on the GPU
      return op.direction == CopyDirection::kPagedToChunk
                 ? r.engine.store(b, HostPath::kZeroCopy)
                 : r.engine.retrieve(b, HostPath::kZeroCopy);
    }
    return op.direction == CopyDirection::kPagedToChunk ? r.engine.store(b, op.path)
                                                        : r.engine.retrieve(b, op.path);
  };
  float kernel_ms = 0;
  auto timed = [&](int64_t w, float* ms) -> Status {
    KVTWIN_RETURN_IF_ERROR(testing::launch_spin(r.engine.kernel_stream(), kSpinNs));
    KVTWIN_RETURN_IF_ERROR(r.start.record(r.engine.kernel_stream()));
    KVTWIN_RETURN_IF_ERROR(r.start.wait_on(r.engine.copy_stream()));
    KVTWIN_RETURN_IF_ERROR(run_once(w));
    KVTWIN_RETURN_IF_ERROR(r.kernel_end.record(r.engine.kernel_stream()));
    KVTWIN_RETURN_IF_ERROR(r.engine.record_completion(r.end.get()));
    KVTWIN_RETURN_IF_ERROR(r.end.synchronize());
    KVTWIN_RETURN_IF_ERROR(Event::elapsed_ms(r.start, r.kernel_end, &kernel_ms));
    return Event::elapsed_ms(r.start, r.end, ms);
  };
  float ms = 0;
  if (Status s = timed(0, &ms); !s.ok()) {  // warm-up
    state.SkipWithError(s.message().c_str());
    return;
  }
  double same_size_gbps = 0;
  if (op.device_only && payload <= (int64_t{512} << 20)) {
    if (Status s = same_size_copy(static_cast<uint64_t>(payload), &same_size_gbps); !s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
  }
  std::vector<double> seconds, kernel_seconds;
  int64_t w = 0;
  for (auto _ : state) {
    if (Status s = timed(w, &ms); !s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
    w = (w + 1) % windows;
    seconds.push_back(ms / 1e3);
    kernel_seconds.push_back(kernel_ms / 1e3);
    state.SetIterationTime(ms / 1e3);
  }
  const double counted = static_cast<double>(payload) * (op.device_only ? 2 : 1);
  const double ceiling = op.device_only                                 ? g_ceilings.d2d_GBps
                         : op.direction == CopyDirection::kPagedToChunk ? g_ceilings.d2h_GBps
                                                                        : g_ceilings.h2d_GBps;
  const double gbps = counted / median(seconds) / 1e9;
  state.SetBytesProcessed(static_cast<int64_t>(counted) * state.iterations());
  state.counters["GBps"] = gbps;
  state.counters["ceiling_GBps"] = ceiling;
  state.counters["frac_of_ceiling"] = ceiling > 0 ? gbps / ceiling : 0;
  state.counters["payload_MiB"] = static_cast<double>(payload) / (1 << 20);
  if (op.device_only) state.counters["kernel_GBps"] = counted / median(kernel_seconds) / 1e9;
  if (same_size_gbps > 0) {
    state.counters["same_size_copy_GBps"] = same_size_gbps;
    state.counters["frac_of_same_size_copy"] = gbps / same_size_gbps;
  }
  state.counters["windows"] = static_cast<double>(windows);
}

// --- ceilings ----------------------------------------------------------------------------------

enum class CopyKind { kD2D, kH2D, kD2H };

Status measure_copy(CopyKind kind, double* gbps, std::vector<double>* all_ms = nullptr) {
  DeviceBuffer a, b;
  PinnedBuffer h;
  KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(kCeilingBytes, &a));
  if (kind == CopyKind::kD2D) {
    KVTWIN_RETURN_IF_ERROR(DeviceBuffer::allocate(kCeilingBytes, &b));
  } else {
    KVTWIN_RETURN_IF_ERROR(PinnedBuffer::allocate(kCeilingBytes, &h));
    testing::fill_random(h.host(), kCeilingBytes, 3);
  }
  KVTWIN_CUDA_TRY(cudaMemset(a.data(), 0x3C, kCeilingBytes));
  Stream s;
  Event e0, e1;
  KVTWIN_RETURN_IF_ERROR(timed_stream(&s, &e0, &e1));
  std::vector<double> ms;
  for (int i = 0; i < 13; ++i) {
    KVTWIN_RETURN_IF_ERROR(e0.record(s.get()));
    switch (kind) {
      case CopyKind::kD2D:
        KVTWIN_CUDA_TRY(
            cudaMemcpyAsync(b.data(), a.data(), kCeilingBytes, cudaMemcpyDeviceToDevice, s.get()));
        break;
      case CopyKind::kH2D:
        KVTWIN_CUDA_TRY(
            cudaMemcpyAsync(a.data(), h.host(), kCeilingBytes, cudaMemcpyHostToDevice, s.get()));
        break;
      case CopyKind::kD2H:
        KVTWIN_CUDA_TRY(
            cudaMemcpyAsync(h.host(), a.data(), kCeilingBytes, cudaMemcpyDeviceToHost, s.get()));
        break;
    }
    KVTWIN_RETURN_IF_ERROR(e1.record(s.get()));
    KVTWIN_RETURN_IF_ERROR(e1.synchronize());
    float t = 0;
    KVTWIN_RETURN_IF_ERROR(Event::elapsed_ms(e0, e1, &t));
    if (i >= 3) ms.push_back(t);  // three warm-ups
  }
  const double counted = static_cast<double>(kCeilingBytes) * (kind == CopyKind::kD2D ? 2 : 1);
  *gbps = counted / (median(ms) / 1e3) / 1e9;
  if (all_ms) *all_ms = ms;
  return Status();
}

void run_ceiling(benchmark::State& state, CopyKind kind) {
  double gbps = 0;
  std::vector<double> ms;
  if (Status s = measure_copy(kind, &gbps, &ms); !s.ok()) {
    state.SkipWithError(s.message().c_str());
    return;
  }
  size_t i = 0;
  for (auto _ : state) state.SetIterationTime(ms[i++ % ms.size()] / 1e3);
  const double counted = static_cast<double>(kCeilingBytes) * (kind == CopyKind::kD2D ? 2 : 1);
  state.SetBytesProcessed(static_cast<int64_t>(counted) * state.iterations());
  state.counters["GBps"] = gbps;
  state.counters["ceiling_GBps"] = gbps;
  state.counters["frac_of_ceiling"] = 1.0;
}

void register_all() {
  benchmark::RegisterBenchmark("ceiling/d2d", run_ceiling, CopyKind::kD2D)
      ->UseManualTime()
      ->Iterations(10);
  benchmark::RegisterBenchmark("ceiling/h2d", run_ceiling, CopyKind::kH2D)
      ->UseManualTime()
      ->Iterations(10);
  benchmark::RegisterBenchmark("ceiling/d2h", run_ceiling, CopyKind::kD2H)
      ->UseManualTime()
      ->Iterations(10);
  std::vector<Case> cases;
  const Op all_ops[] = {Op::kGatherDevice,  Op::kScatterDevice,  Op::kStoreStaged,
                        Op::kStoreZeroCopy, Op::kRetrieveStaged, Op::kRetrieveZeroCopy};
  for (const ModelShape* m : {&kLlama8B, &kLlama70BTp4, &kDeepSeekV3}) {
    for (Op op : all_ops) {
      for (int64_t n : kTokenCounts)
        cases.push_back({m, m->kind, m->chunk_format(), m->layers, op, n});
    }
  }
  // Llama-3.1-8B only: the other paged layouts, and the layerwise one-layer format.
  for (PagedKind k : {PagedKind::kHND, PagedKind::kFlashInfer}) {
    for (Op op : {Op::kGatherDevice, Op::kScatterDevice}) {
      for (int64_t n : kTokenCounts)
        cases.push_back({&kLlama8B, k, ChunkFormat::kKV_2LTD, 32, op, n});
    }
  }
  for (Op op : all_ops) {
    for (int64_t n : {int64_t{4096}, int64_t{32768}}) {
      cases.push_back({&kLlama8B, PagedKind::kNHD, ChunkFormat::kKV_T2D, 1, op, n});
    }
  }
  for (const Case& c : cases) {
    const std::string name = std::string(info(c.op).name) + "/" + c.model->name + "/" +
                             std::string(paged_kind_name(c.kind)) + "/" +
                             std::string(chunk_format_name(c.format)) +
                             "/tokens:" + std::to_string(c.tokens);
    benchmark::RegisterBenchmark(name.c_str(), run_case, c)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace kvtwin::cuda::bench

int main(int argc, char** argv) {
  using namespace kvtwin::cuda;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (const Status s = probe_device(); !s.ok()) {
    std::fprintf(stderr, "kv_copy_gpu_bench: no CUDA device (%s); nothing measured\n",
                 s.message().c_str());
    return 2;
  }
  cudaDeviceProp prop{};
  int driver = 0, runtime = 0;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaDriverGetVersion(&driver) != 0 ||
      cudaRuntimeGetVersion(&runtime) != 0) {
    std::fprintf(stderr, "kv_copy_gpu_bench: cannot read device properties\n");
    return 1;
  }
  using bench::g_ceilings;
  for (auto [kind, out] : {std::pair{bench::CopyKind::kD2D, &g_ceilings.d2d_GBps},
                           std::pair{bench::CopyKind::kH2D, &g_ceilings.h2d_GBps},
                           std::pair{bench::CopyKind::kD2H, &g_ceilings.d2h_GBps}}) {
    if (const Status s = bench::measure_copy(kind, out); !s.ok()) {
      std::fprintf(stderr, "kv_copy_gpu_bench: ceiling failed: %s\n", s.message().c_str());
      return 1;
    }
  }
  benchmark::AddCustomContext("gpu_name", prop.name);
  benchmark::AddCustomContext("gpu_sm_count", std::to_string(prop.multiProcessorCount));
  benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(prop.l2CacheSize));
  benchmark::AddCustomContext("cuda_driver", std::to_string(driver));
  benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime));
  benchmark::AddCustomContext("slot_order", bench::sequential_slots() ? "sequential" : "shuffled");
  benchmark::AddCustomContext("ceiling_d2d_GBps", std::to_string(g_ceilings.d2d_GBps));
  benchmark::AddCustomContext("ceiling_h2d_GBps", std::to_string(g_ceilings.h2d_GBps));
  benchmark::AddCustomContext("ceiling_d2h_GBps", std::to_string(g_ceilings.d2h_GBps));
  std::printf(
      "device %s, %d SMs; ceilings: d2d %.1f GB/s (read+write), h2d %.1f GB/s, d2h %.1f GB/s\n",
      prop.name, prop.multiProcessorCount, g_ceilings.d2d_GBps, g_ceilings.h2d_GBps,
      g_ceilings.d2h_GBps);
  bench::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
