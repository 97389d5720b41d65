// The layerwise pipeline on the device: each layer's store overlaps the next layer's compute,
// each layer's load completes while the previous layer computes, and the bytes are the
// reference's. Compute is a spin kernel of kLayerNs on its own stream.
#include "cuda/layerwise_pipeline.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "cuda/kv_copy_reference.h"
#include "cuda/paged_kv_cache.h"
#include "cuda/pinned_pool.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvtwin::cuda {
namespace {

constexpr int kLayers = 4;
constexpr int64_t kTokens = 512;
constexpr int64_t kChunk = 256;
constexpr uint64_t kLayerNs = 2'000'000;  // 2 ms per layer; a layer's store moves 2 MiB

class LayerwiseGpu : public testing::GpuParamTest<HostPath> {
 protected:
  void SetUp() override {
    testing::GpuParamTest<HostPath>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    layout_ = make_paged_layout(PagedKind::kNHD, 64, 16, 8, 128, 2);  // Llama-3.1-8B rows
    testing::KvCase kc;
    kc.num_blocks = 64;
    kc.num_tokens = kTokens;
    kc.skip_percent = 0;
    slots_ = testing::make_slots(kc);
    KVTWIN_ASSERT_OK(PagedKvCache::create(layout_, kLayers, &cache_));
    KvTransferEngine::Options o;
    o.staging_bytes = 8 << 20;
    KVTWIN_ASSERT_OK(KvTransferEngine::create(&cache_, o, &engine_));
    KVTWIN_ASSERT_OK(
        PinnedPool::create(32 << 20, std::make_unique<FirstFitAllocator>(32 << 20), &pool_));
    KVTWIN_ASSERT_OK(DeviceBuffer::allocate(slots_.size() * sizeof(int64_t), &device_slots_));
    ASSERT_EQ(cudaMemcpy(device_slots_.data(), slots_.data(), device_slots_.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    request_.format = ChunkFormat::kKV_T2D;
    request_.device_slots = reinterpret_cast<const int64_t*>(device_slots_.data());
    request_.num_tokens = kTokens;
    request_.tokens_per_chunk = kChunk;
    request_.path = GetParam();
    request_.layers.resize(kLayers);
    for (int l = 0; l < kLayers; ++l) {
      for (int c = 0; c < kTokens / kChunk; ++c) {
        const auto b = pool_.allocate(static_cast<uint64_t>(object_bytes()));
        ASSERT_TRUE(b);
        request_.layers[l].push_back({b->host, b->device});
      }
    }
    KVTWIN_ASSERT_OK(Stream::create(&compute_));
    KVTWIN_ASSERT_OK(Event::create(&origin_, /*timing=*/true));
    for (int l = 0; l < kLayers; ++l) {
      KVTWIN_ASSERT_OK(Event::create(&compute_start_[l], true));
      KVTWIN_ASSERT_OK(Event::create(&compute_done_[l], true));
    }
  }

  int64_t object_bytes() const {
    return chunk_layout_for(layout_, ChunkFormat::kKV_T2D, 1, kChunk).total_bytes();
  }
  // Milliseconds from origin_ to `e` (both completed).
  float at(const Event& e) {
    float ms = -1;
    EXPECT_TRUE(Event::elapsed_ms(origin_, e, &ms).ok());
    return ms;
  }
  // The reference copy of layer l between `layer_bytes` and host chunk buffers.
  void reference(uint8_t* layer_bytes, std::vector<std::vector<uint8_t>>& chunks,
                 CopyDirection dir) {
    std::vector<uint8_t*> layers{layer_bytes};
    std::vector<uint8_t*> ptrs;
    for (auto& c : chunks) ptrs.push_back(c.data());
    KvCopyRequest r;
    r.paged = layout_;
    r.format = ChunkFormat::kKV_T2D;
    r.num_layers = 1;
    r.layers = layers.data();
    r.slots = slots_.data();
    r.num_tokens = kTokens;
    r.tokens_per_chunk = kChunk;
    r.chunks = ptrs.data();
    r.direction = dir;
    kv_copy_reference(r);
  }

  PagedLayout layout_;
  std::vector<int64_t> slots_;
  PagedKvCache cache_;
  KvTransferEngine engine_;
  PinnedPool pool_;
  DeviceBuffer device_slots_;
  LayerwiseRequest request_;
  Stream compute_;
  Event origin_;
  Event compute_start_[kLayers];
  Event compute_done_[kLayers];
};

TEST_P(LayerwiseGpu, EachLayersStoreFinishesWhileTheNextLayerComputes) {
  std::vector<std::vector<uint8_t>> layers(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    layers[l].resize(static_cast<size_t>(layout_.layer_bytes()));
    testing::fill_random(layers[l].data(), layers[l].size(), 40 + l);
    ASSERT_EQ(
        cudaMemcpy(cache_.layer(l), layers[l].data(), layers[l].size(), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  LayerwiseStore store;
  KVTWIN_ASSERT_OK(LayerwiseStore::create(&engine_, kLayers, &store));
  KVTWIN_ASSERT_OK(store.begin(request_));
  KVTWIN_ASSERT_OK(origin_.record(compute_.get()));
  for (int l = 0; l < kLayers; ++l) {
    KVTWIN_ASSERT_OK(testing::launch_spin(compute_.get(), kLayerNs));  // layer l's compute
    KVTWIN_ASSERT_OK(compute_done_[l].record(compute_.get()));
    KVTWIN_ASSERT_OK(store.store_layer(l, compute_.get()));
  }
  KVTWIN_ASSERT_OK(store.finish());
  KVTWIN_ASSERT_OK(compute_.synchronize());
  for (int l = 0; l + 1 < kLayers; ++l) {
    EXPECT_GE(at(store.stored(l)), at(compute_done_[l])) << "layer " << l << " stored early";
    EXPECT_LT(at(store.stored(l)), at(compute_done_[l + 1]))
        << "layer " << l << "'s store did not overlap layer " << l + 1 << "'s compute";
  }
  for (int l = 0; l < kLayers; ++l) {
    std::vector<std::vector<uint8_t>> expected(2, std::vector<uint8_t>(object_bytes()));
    reference(layers[l].data(), expected, CopyDirection::kPagedToChunk);
    for (int c = 0; c < 2; ++c) {
      ASSERT_EQ(std::memcmp(request_.layers[l][c].host, expected[c].data(), expected[c].size()), 0)
          << "layer " << l << " chunk " << c;
    }
  }
}

TEST_P(LayerwiseGpu, EachLayerIsLoadedBeforeItComputesAndWhileThePreviousOneDoes) {
  std::vector<std::vector<std::vector<uint8_t>>> objects(kLayers);
  for (int l = 0; l < kLayers; ++l) {
    for (int c = 0; c < 2; ++c) {
      objects[l].emplace_back(object_bytes());
      testing::fill_random(objects[l][c].data(), objects[l][c].size(), 90 + 2 * l + c);
      std::memcpy(request_.layers[l][c].host, objects[l][c].data(), objects[l][c].size());
    }
    ASSERT_EQ(cudaMemset(cache_.layer(l), 0x5A, layout_.layer_bytes()), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  LayerwiseRetrieve retrieve;
  KVTWIN_ASSERT_OK(LayerwiseRetrieve::create(&engine_, kLayers, &retrieve));
  KVTWIN_ASSERT_OK(origin_.record(compute_.get()));
  KVTWIN_ASSERT_OK(retrieve.begin(request_));
  for (int l = 0; l < kLayers; ++l) {
    KVTWIN_ASSERT_OK(retrieve.wait_layer(l, compute_.get()));
    KVTWIN_ASSERT_OK(compute_start_[l].record(compute_.get()));
    KVTWIN_ASSERT_OK(testing::launch_spin(compute_.get(), kLayerNs));
    KVTWIN_ASSERT_OK(compute_done_[l].record(compute_.get()));
  }
  KVTWIN_ASSERT_OK(retrieve.finish());
  KVTWIN_ASSERT_OK(compute_.synchronize());
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_LE(at(retrieve.loaded(l)), at(compute_start_[l])) << "layer " << l << " ran unloaded";
    if (l + 1 < kLayers) {
      EXPECT_LE(at(retrieve.loaded(l + 1)), at(compute_done_[l]))
          << "layer " << l + 1 << "'s load did not overlap layer " << l << "'s compute";
    }
  }
  for (int l = 0; l < kLayers; ++l) {
    std::vector<uint8_t> expected(static_cast<size_t>(layout_.layer_bytes()), 0x5A);
    reference(expected.data(), objects[l], CopyDirection::kChunkToPaged);
    std::vector<uint8_t> got(expected.size());
    ASSERT_EQ(cudaMemcpy(got.data(), cache_.layer(l), got.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(got, expected) << "layer " << l;
  }
}

TEST_P(LayerwiseGpu, RefusesLayersOutOfOrder) {
  LayerwiseStore store;
  KVTWIN_ASSERT_OK(LayerwiseStore::create(&engine_, kLayers, &store));
  KVTWIN_ASSERT_OK(store.begin(request_));
  EXPECT_FALSE(store.store_layer(1, compute_.get()).ok());
  LayerwiseRetrieve retrieve;
  KVTWIN_ASSERT_OK(LayerwiseRetrieve::create(&engine_, kLayers, &retrieve));
  KVTWIN_ASSERT_OK(retrieve.begin(request_));
  EXPECT_FALSE(retrieve.wait_layer(2, compute_.get()).ok());
  KVTWIN_ASSERT_OK(retrieve.finish());
}

INSTANTIATE_TEST_SUITE_P(Paths, LayerwiseGpu,
                         ::testing::Values(HostPath::kStaged, HostPath::kZeroCopy),
                         [](const ::testing::TestParamInfo<HostPath>& p) {
                           return std::string(host_path_name(p.param));
                         });

}  // namespace
}  // namespace kvtwin::cuda
