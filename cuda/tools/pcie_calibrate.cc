// kvtwin_pcie_calibrate: measures the GPU <-> CPU link the way LMCache uses it, through the real
// mover (CudaMover: store = gather into device staging, then DMA to pinned memory; retrieve =
// the kernel reads pinned memory directly), and writes one sample per transfer in the CSV that
// `kvtwin calibrate --samples` writes and `--refit` reads:
//
//   class,direct_io,depth,objects,object_bytes,measured_ns
//   pcie_d2h,0,1,4,33554432,1433120        (a store of 4 chunk objects of 32 MiB)
//
// class pcie_d2h is the store (GPU -> CPU), pcie_h2d the retrieve; direct_io is unused (0);
// depth is 1 (the mover runs one transfer at a time: its objects go in batches, one after the
// other). The fit and the profile's pcie_* keys are then made on the Debian machine:
//
//   kvtwin calibrate --refit pcie_samples.csv --out profile.toml
//
// Geometry: the shipped default scenario's model, Llama-3.1-8B (32 layers, 8 KV heads, head
// size 128, bf16, block 16: 128 KiB per token), NHD paged layout. Objects: whole chunks of 16,
// 64 and 256 tokens (2, 8, 32 MiB; KV_2LTD) and one-layer objects of 64 and 256 tokens (256 KiB,
// 1 MiB; KV_T2D, the layerwise path); 1 to 32 objects per transfer (at most 512 MiB). The points
// run in a seeded shuffled order, each repeated; one warm-up transfer per object kind first. The
// cache's slots are whole blocks in a shuffled order, its contents random.
//
// Usage: kvtwin_pcie_calibrate [--out FILE] [--repeats N] [--seed S]
// Exit: 0; 2 on a bad flag; 3 when no device (nothing measured); 1 on a CUDA failure.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cuda/cuda_handles.h"
#include "cuda/cuda_mover.h"
#include "cuda/kv_layout.h"
#include "sim/random.h"
#include "sim/simulator.h"

namespace kvtwin::cuda {
namespace {

constexpr int32_t kLayers = 32;
constexpr int32_t kKvHeads = 8;
constexpr int32_t kHeadSize = 128;
constexpr int32_t kElemBytes = 2;
constexpr int32_t kBlockSize = 16;
constexpr int64_t kCacheTokens = 32768;  // 4 GiB of paged cache
constexpr uint64_t kMaxTransferBytes = uint64_t{512} << 20;

struct Kind {
  int32_t layer;   // -1: whole chunk (KV_2LTD); 0: one layer (KV_T2D)
  int64_t tokens;  // tokens per object (the mover's chunk size)
};

struct Point {
  size_t kind;
  uint32_t count;
};

sim::TransferResult run(sim::Simulator& sim, CudaMover& mover, sim::Transfer t) {
  std::optional<sim::TransferResult> got;
  mover.start(std::move(t), [&](const sim::TransferResult& r) { got = r; });
  sim.run();
  return got.value_or(sim::TransferResult{});
}

// One mover per object kind (the chunk size is the mover's).
class Rig {
 public:
  Rig(const Kind& kind, uint64_t seed) : kind_(kind), rng_(seed, "pcie_calibrate.rig") {
    CudaMoverConfig c;
    c.paged = make_paged_layout(PagedKind::kNHD, kCacheTokens / kBlockSize, kBlockSize, kKvHeads,
                                kHeadSize, kElemBytes);
    c.num_layers = kLayers;
    c.chunk_tokens = kind.tokens;
    c.pinned_bytes = kMaxTransferBytes + (uint64_t{64} << 20);
    c.staging_bytes = uint64_t{128} << 20;
    config_ = c;
    mover_.emplace(sim_, c);
    // Whole blocks in a shuffled order, as vLLM's free queue hands them out after a while.
    std::vector<int64_t> blocks(kCacheTokens / kBlockSize);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int64_t>(i);
    for (size_t i = blocks.size(); i > 1; --i) std::swap(blocks[i - 1], blocks[rng_.next_below(i)]);
    for (int64_t b : blocks)
      for (int32_t o = 0; o < kBlockSize; ++o) slots_.push_back(b * kBlockSize + o);
  }

  Status status() const { return mover_->device_status(); }

  Status fill_random() {
    std::vector<uint64_t> noise(static_cast<size_t>(config_.paged.layer_bytes()) / 8);
    for (int32_t l = 0; l < kLayers; ++l) {
      for (uint64_t& v : noise) v = rng_.next_u64();
      KVTWIN_CUDA_TRY(cudaMemcpy(mover_->paged_cache()->layer(l), noise.data(), noise.size() * 8,
                                 cudaMemcpyHostToDevice));
    }
    return Status();
  }

  uint64_t object_bytes() const {
    const ChunkFormat f = kind_.layer < 0 ? ChunkFormat::kKV_2LTD : ChunkFormat::kKV_T2D;
    return static_cast<uint64_t>(
        chunk_layout_for(config_.paged, f, kind_.layer < 0 ? kLayers : 1, kind_.tokens)
            .total_bytes());
  }

  // A store then a retrieve of `count` objects at a rotating place in the cache; false when a
  // transfer failed (the mover's last_error says why).
  bool measure(uint32_t count, int64_t* store_ns, int64_t* retrieve_ns) {
    const int64_t tokens = kind_.tokens * count;
    if (cursor_ + tokens > static_cast<int64_t>(slots_.size())) cursor_ = 0;
    sim::Transfer store;
    store.src = sim::Location::kGpu;
    store.dst = sim::Location::kCpu;
    store.kind = "calibrate";
    for (uint32_t j = 0; j < count; ++j) {
      sim::KvObject o;
      o.key = "pcie@" + std::to_string(next_id_++);
      o.layer = kind_.layer;
      o.bytes = object_bytes();
      o.slots.assign(slots_.begin() + cursor_ + j * kind_.tokens,
                     slots_.begin() + cursor_ + (j + 1) * kind_.tokens);
      store.objects.push_back(std::move(o));
    }
    cursor_ += tokens;
    sim::Transfer retrieve = store;
    retrieve.src = sim::Location::kCpu;
    retrieve.dst = sim::Location::kGpu;
    const sim::TransferResult w = run(sim_, *mover_, store);
    const sim::TransferResult r = w.all_ok() ? run(sim_, *mover_, retrieve) : sim::TransferResult{};
    for (const sim::KvObject& o : store.objects) mover_->drop(o.key);
    *store_ns = w.measured_ns;
    *retrieve_ns = r.measured_ns;
    return w.all_ok() && r.all_ok() && !w.ok.empty();
  }

  const Status& last_error() const { return mover_->last_error(); }

 private:
  Kind kind_;
  sim::Rng rng_;  // the cache's slot order and contents
  CudaMoverConfig config_;
  sim::Simulator sim_;
  std::optional<CudaMover> mover_;
  std::vector<int64_t> slots_;
  int64_t cursor_ = 0;
  uint64_t next_id_ = 0;
};

int main_impl(int argc, char** argv) {
  std::string out = "pcie_samples.csv";
  int repeats = 5;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kvtwin_pcie_calibrate: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--out") {
      out = value();
    } else if (a == "--repeats") {
      const char* v = value();
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      repeats = end != v && *end == '\0' && n >= 1 && n <= 1000 ? static_cast<int>(n) : 0;
      if (repeats == 0) {
        std::fprintf(stderr, "kvtwin_pcie_calibrate: --repeats: expected 1 .. 1000\n");
        return 2;
      }
    } else if (a == "--seed") {
      const char* v = value();
      char* end = nullptr;
      seed = std::strtoull(v, &end, 10);
      if (end == v || *end != '\0') {
        std::fprintf(stderr, "kvtwin_pcie_calibrate: --seed: expected an unsigned integer\n");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "kvtwin_pcie_calibrate: unknown flag %s (usage: [--out FILE] [--repeats N] "
                   "[--seed S])\n",
                   a.c_str());
      return 2;
    }
  }
  if (const Status s = probe_device(); !s.ok()) {
    std::fprintf(stderr, "kvtwin_pcie_calibrate: no CUDA device (%s); nothing measured\n",
                 s.message().c_str());
    return 3;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    std::fprintf(stderr, "kvtwin_pcie_calibrate: cannot read device properties\n");
    return 1;
  }
  const std::vector<Kind> kinds = {{-1, 16}, {-1, 64}, {-1, 256}, {0, 64}, {0, 256}};
  const std::vector<uint32_t> counts = {1, 2, 4, 8, 16, 32};
  std::ofstream csv(out);
  if (!csv) {
    std::fprintf(stderr, "kvtwin_pcie_calibrate: cannot write %s\n", out.c_str());
    return 2;
  }
  csv << "class,direct_io,depth,objects,object_bytes,measured_ns\n";
  std::printf("kvtwin_pcie_calibrate: %s, %d SMs; Llama-3.1-8B geometry, %d repeats\n", prop.name,
              prop.multiProcessorCount, repeats);
  std::printf("%-26s %8s %12s %12s   (GB/s of the median transfer)\n", "object", "count",
              "store d2h", "retrieve h2d");
  sim::Rng rng(seed, "pcie_calibrate.order");
  size_t samples = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    Rig rig(kinds[k], seed + k);
    if (!rig.status().ok()) {
      std::fprintf(stderr, "kvtwin_pcie_calibrate: mover: %s\n", rig.status().message().c_str());
      return 1;
    }
    if (const Status s = rig.fill_random(); !s.ok()) {
      std::fprintf(stderr, "kvtwin_pcie_calibrate: %s\n", s.message().c_str());
      return 1;
    }
    const uint64_t bytes = rig.object_bytes();
    std::vector<Point> points;
    for (uint32_t c : counts)
      if (bytes * c <= kMaxTransferBytes)
        for (int r = 0; r < repeats; ++r) points.push_back({k, c});
    for (size_t i = points.size(); i > 1; --i) std::swap(points[i - 1], points[rng.next_below(i)]);
    int64_t w = 0, r = 0;
    if (!rig.measure(1, &w, &r)) {  // warm-up, discarded
      std::fprintf(stderr, "kvtwin_pcie_calibrate: warm-up failed: %s\n",
                   rig.last_error().message().c_str());
      return 1;
    }
    std::vector<std::vector<int64_t>> by_count_w(counts.size()), by_count_r(counts.size());
    for (const Point& p : points) {
      if (!rig.measure(p.count, &w, &r)) {
        std::fprintf(stderr, "kvtwin_pcie_calibrate: transfer failed: %s\n",
                     rig.last_error().message().c_str());
        return 1;
      }
      csv << "pcie_d2h,0,1," << p.count << "," << bytes << "," << w << "\n";
      csv << "pcie_h2d,0,1," << p.count << "," << bytes << "," << r << "\n";
      samples += 2;
      const size_t ci = std::find(counts.begin(), counts.end(), p.count) - counts.begin();
      by_count_w[ci].push_back(w);
      by_count_r[ci].push_back(r);
    }
    for (size_t ci = 0; ci < counts.size(); ++ci) {
      if (by_count_w[ci].empty()) continue;
      auto median = [](std::vector<int64_t> v) {
        std::sort(v.begin(), v.end());
        return static_cast<double>(v[v.size() / 2]);
      };
      const double total = static_cast<double>(bytes) * counts[ci];
      char name[64];
      std::snprintf(name, sizeof(name), "%s %lld tok (%.2f MiB)",
                    kinds[k].layer < 0 ? "chunk" : "layer", static_cast<long long>(kinds[k].tokens),
                    bytes / 1048576.0);
      std::printf("%-26s %8u %12.2f %12.2f\n", name, counts[ci], total / median(by_count_w[ci]),
                  total / median(by_count_r[ci]));
    }
  }
  std::printf("kvtwin_pcie_calibrate: %zu samples written to %s\n", samples, out.c_str());
  return 0;
}

}  // namespace
}  // namespace kvtwin::cuda

int main(int argc, char** argv) {
  return kvtwin::cuda::main_impl(argc, argv);
}
