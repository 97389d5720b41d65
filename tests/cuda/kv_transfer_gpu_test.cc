// KvTransferEngine on the device: store and retrieve of chunk batches between a PagedKvCache and
// pinned pool objects, staged and zero-copy, checked against the CPU reference.
#include "cuda/kv_transfer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>

#include "cuda/kv_copy_reference.h"
#include "cuda/paged_kv_cache.h"
#include "cuda/pinned_pool.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvtwin::cuda {
namespace {

using testing::KvCase;

struct EngineCase {
  PagedKind kind;
  ChunkFormat format;
  HostPath path;
  bool small_staging;  // one chunk per staging half: many groups, both halves in turn
  int32_t head_size;
};

std::string describe(const EngineCase& c) {
  std::ostringstream s;
  s << paged_kind_name(c.kind) << "_" << chunk_format_name(c.format) << "_"
    << host_path_name(c.path) << (c.small_staging ? "_small" : "_large") << "_D" << c.head_size;
  return s.str();
}
void PrintTo(const EngineCase& c, std::ostream* os) {
  *os << describe(c);
}
std::string engine_case_name(const ::testing::TestParamInfo<EngineCase>& p) {
  return describe(p.param);
}

// "" when the n bytes agree, else where they first differ and the two bytes there.
std::string first_difference(const uint8_t* got, const uint8_t* want, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      std::ostringstream s;
      s << "byte " << i << ": got 0x" << std::hex << int{got[i]} << ", want 0x" << int{want[i]};
      return s.str();
    }
  }
  return "";
}

std::vector<EngineCase> engine_cases() {
  std::vector<EngineCase> v;
  for (HostPath path : {HostPath::kStaged, HostPath::kZeroCopy}) {
    for (bool small : {true, false}) {
      for (int32_t d : {64, 66}) {
        for (PagedKind k : {PagedKind::kNHD, PagedKind::kHND, PagedKind::kFlashInfer}) {
          for (ChunkFormat f :
               {ChunkFormat::kKV_2LTD, ChunkFormat::kKV_T2D, ChunkFormat::kKV_2TD}) {
            v.push_back({k, f, path, small, d});
          }
        }
        v.push_back({PagedKind::kMLA, ChunkFormat::kKV_MLA, path, small, d == 64 ? 576 : 66});
      }
    }
  }
  return v;
}

class EngineGpu : public testing::GpuParamTest<EngineCase> {
 protected:
  static constexpr int kLayers = 3;
  static constexpr int64_t kTokens = 100;
  static constexpr int64_t kChunk = 32;  // 3 full chunks and one of 4 tokens

  void SetUp() override {
    testing::GpuParamTest<EngineCase>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const EngineCase& p = GetParam();
    kv_case_.kind = p.kind;
    kv_case_.format = p.format;
    kv_case_.num_heads = p.kind == PagedKind::kMLA ? 1 : 4;
    kv_case_.head_size = p.head_size;
    kv_case_.num_blocks = 12;
    kv_case_.num_tokens = kTokens;
    kv_case_.tokens_per_chunk = kChunk;
    kv_case_.seed = 77 + static_cast<uint64_t>(p.head_size);
    layout_ = kv_case_.paged();
    // One-layer objects (layerwise) for KV_T2D / KV_2TD, and for MLA in its small-staging runs.
    one_layer_ = p.format == ChunkFormat::kKV_T2D || p.format == ChunkFormat::kKV_2TD ||
                 (p.kind == PagedKind::kMLA && p.small_staging);
    first_layer_ = one_layer_ ? 1 : 0;
    chunk_layers_ = one_layer_ ? 1 : kLayers;
    slots_ = testing::make_slots(kv_case_);
    KVTWIN_ASSERT_OK(PagedKvCache::create(layout_, kLayers, &cache_));
    const uint64_t full = static_cast<uint64_t>(chunk_bytes(kChunk));
    KvTransferEngine::Options options;
    options.staging_bytes = p.small_staging ? 2 * ((full + 255) / 256 * 256) : 64 << 20;
    KVTWIN_ASSERT_OK(KvTransferEngine::create(&cache_, options, &engine_));
    KVTWIN_ASSERT_OK(
        PinnedPool::create(8 << 20, std::make_unique<FirstFitAllocator>(8 << 20), &pool_));
    KVTWIN_ASSERT_OK(DeviceBuffer::allocate(slots_.size() * sizeof(int64_t), &device_slots_));
    ASSERT_EQ(cudaMemcpy(device_slots_.data(), slots_.data(), device_slots_.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    batch_.format = p.format;
    batch_.first_layer = first_layer_;
    batch_.num_layers = chunk_layers_;
    batch_.device_slots = reinterpret_cast<const int64_t*>(device_slots_.data());
    batch_.num_tokens = kTokens;
    batch_.tokens_per_chunk = kChunk;
    // The case skips about one token in ten: a store must leave their rows as they were.
    batch_.skipped_slots =
        std::any_of(slots_.begin(), slots_.end(), [](int64_t s) { return s < 0; });
    for (int64_t c = 0; c < 4; ++c) {
      const auto block = pool_.allocate(static_cast<uint64_t>(chunk_bytes(tokens_of(c))));
      ASSERT_TRUE(block);
      blocks_.push_back(*block);
      batch_.chunks.push_back({block->host, block->device});
    }
  }

  int64_t tokens_of(int64_t c) const { return std::min(kChunk, kTokens - c * kChunk); }
  int64_t chunk_bytes(int64_t tokens) const {
    return chunk_layout_for(layout_, GetParam().format, chunk_layers_, tokens).total_bytes();
  }

  // Host copies of the paged layers.
  std::vector<std::vector<uint8_t>> download_layers() {
    std::vector<std::vector<uint8_t>> v(kLayers);
    for (int l = 0; l < kLayers; ++l) {
      v[l].resize(static_cast<size_t>(layout_.layer_bytes()));
      EXPECT_EQ(cudaMemcpy(v[l].data(), cache_.layer(l), v[l].size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return v;
  }
  void upload_layers(const std::vector<std::vector<uint8_t>>& v) {
    for (int l = 0; l < kLayers; ++l) {
      ASSERT_EQ(cudaMemcpy(cache_.layer(l), v[l].data(), v[l].size(), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }
  // The reference request over host layer copies and host chunk buffers.
  KvCopyRequest host_request(std::vector<std::vector<uint8_t>>& layers,
                             std::vector<std::vector<uint8_t>>& chunks, CopyDirection dir) {
    layer_ptrs_.clear();
    for (int l = first_layer_; l < first_layer_ + chunk_layers_; ++l) {
      layer_ptrs_.push_back(layers[l].data());
    }
    chunk_ptrs_.clear();
    for (auto& c : chunks) chunk_ptrs_.push_back(c.data());
    KvCopyRequest r;
    r.paged = layout_;
    r.format = GetParam().format;
    r.num_layers = chunk_layers_;
    r.layers = layer_ptrs_.data();
    r.slots = slots_.data();
    r.num_tokens = kTokens;
    r.tokens_per_chunk = kChunk;
    r.chunks = chunk_ptrs_.data();
    r.direction = dir;
    return r;
  }

  KvCase kv_case_;
  PagedLayout layout_;
  bool one_layer_ = false;
  int first_layer_ = 0;
  int chunk_layers_ = 1;
  std::vector<int64_t> slots_;
  PagedKvCache cache_;
  KvTransferEngine engine_;
  PinnedPool pool_;
  DeviceBuffer device_slots_;
  HostChunkBatch batch_;
  std::vector<PinnedBlock> blocks_;
  std::vector<uint8_t*> layer_ptrs_, chunk_ptrs_;
};

TEST_P(EngineGpu, StoreWritesTheReferenceChunksAndNothingAfterThem) {
  std::vector<std::vector<uint8_t>> layers(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    layers[l].resize(static_cast<size_t>(layout_.layer_bytes()));
    testing::fill_random(layers[l].data(), layers[l].size(), 1000 + l);
  }
  upload_layers(layers);
  std::memset(pool_.buffer().host(), 0xA5, pool_.buffer().size());
  KVTWIN_ASSERT_OK(engine_.store(batch_, GetParam().path));
  KVTWIN_ASSERT_OK(engine_.synchronize());
  std::vector<std::vector<uint8_t>> expected(blocks_.size());
  for (size_t c = 0; c < blocks_.size(); ++c) expected[c].assign(blocks_[c].extent.bytes, 0xA5);
  kv_copy_reference(host_request(layers, expected, CopyDirection::kPagedToChunk));
  for (size_t c = 0; c < blocks_.size(); ++c) {
    ASSERT_EQ(first_difference(blocks_[c].host, expected[c].data(), expected[c].size()), "")
        << "chunk " << c << " (" << chunk_bytes(tokens_of(static_cast<int64_t>(c)))
        << " bytes of payload in an extent of " << expected[c].size() << ")";
  }
}

TEST_P(EngineGpu, RetrieveWritesTheReferenceSlotsAndNothingElse) {
  std::vector<std::vector<uint8_t>> layers(kLayers);
  for (int l = 0; l < kLayers; ++l) layers[l].assign(layout_.layer_bytes(), 0x5A);
  upload_layers(layers);
  std::vector<std::vector<uint8_t>> chunks(blocks_.size());
  for (size_t c = 0; c < blocks_.size(); ++c) {
    chunks[c].resize(static_cast<size_t>(chunk_bytes(tokens_of(static_cast<int64_t>(c)))));
    testing::fill_random(chunks[c].data(), chunks[c].size(), 500 + c);
    std::memcpy(blocks_[c].host, chunks[c].data(), chunks[c].size());
  }
  KVTWIN_ASSERT_OK(engine_.retrieve(batch_, GetParam().path));
  KVTWIN_ASSERT_OK(engine_.synchronize());
  kv_copy_reference(host_request(layers, chunks, CopyDirection::kChunkToPaged));
  const auto got = download_layers();
  for (int l = 0; l < kLayers; ++l) ASSERT_EQ(got[l], layers[l]) << "layer " << l;
}

TEST_P(EngineGpu, CompletionEventFollowsEveryEnqueuedCopy) {
  Event done;
  KVTWIN_ASSERT_OK(Event::create(&done));
  KVTWIN_ASSERT_OK(engine_.store(batch_, GetParam().path));
  KVTWIN_ASSERT_OK(engine_.record_completion(done.get()));
  KVTWIN_ASSERT_OK(done.synchronize());
  EXPECT_EQ(cudaStreamQuery(engine_.kernel_stream()), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(engine_.copy_stream()), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Paths, EngineGpu, ::testing::ValuesIn(engine_cases()), engine_case_name);

class EngineErrorsGpu : public testing::GpuTest {};

TEST_F(EngineErrorsGpu, RejectsAStagingHalfSmallerThanOneChunk) {
  const PagedLayout p = make_paged_layout(PagedKind::kNHD, 8, 16, 2, 64, 2);
  PagedKvCache cache;
  KVTWIN_ASSERT_OK(PagedKvCache::create(p, 2, &cache));
  KvTransferEngine engine;
  KvTransferEngine::Options o;
  o.staging_bytes = 4096;
  KVTWIN_ASSERT_OK(KvTransferEngine::create(&cache, o, &engine));
  HostChunkBatch b;
  b.num_layers = 2;
  b.num_tokens = 16;
  b.tokens_per_chunk = 16;
  b.chunks.push_back({});
  const Status s = engine.store(b, HostPath::kStaged);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("staging"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kvtwin::cuda
