// CudaMover, the real GPU<->CPU Mover: without a device every object is a fault and nothing
// crashes; with one, stores and retrieves move the reference's bytes.
#include "cuda/cuda_mover.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "cuda/kv_copy_reference.h"
#include "model/check.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvtwin::cuda {
namespace {

constexpr int kLayers = 3;
constexpr int64_t kChunk = 32;

CudaMoverConfig small_config() {
  CudaMoverConfig c;
  c.paged = make_paged_layout(PagedKind::kNHD, 16, 16, 2, 64, 2);  // 256 slots, 256-byte rows
  c.num_layers = kLayers;
  c.chunk_tokens = kChunk;
  c.pinned_bytes = 1 << 20;
  c.staging_bytes = 1 << 20;
  return c;
}

sim::KvObject object(const CudaMoverConfig& c, std::string key, int32_t layer,
                     std::vector<int64_t> slots) {
  sim::KvObject o;
  o.key = std::move(key);
  o.layer = layer;
  o.slots = std::move(slots);
  const ChunkFormat f = layer < 0 ? ChunkFormat::kKV_2LTD : ChunkFormat::kKV_T2D;
  o.bytes = static_cast<uint64_t>(
      chunk_layout_for(c.paged, f, layer < 0 ? c.num_layers : 1, o.slots.size()).total_bytes());
  return o;
}

std::vector<int64_t> slot_range(int64_t first, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// Starts `t` and runs the simulation; returns the result delivered to done().
sim::TransferResult run(sim::Simulator& sim, CudaMover& mover, sim::Transfer t) {
  std::optional<sim::TransferResult> got;
  mover.start(std::move(t), [&](const sim::TransferResult& r) { got = r; });
  EXPECT_FALSE(got.has_value()) << "done() must be scheduled, not called inline";
  sim.run();
  EXPECT_TRUE(got.has_value());
  return got.value_or(sim::TransferResult{});
}

sim::Transfer transfer(sim::Location src, sim::Location dst, std::vector<sim::KvObject> objs) {
  sim::Transfer t;
  t.src = src;
  t.dst = dst;
  t.kind = "test";
  t.objects = std::move(objs);
  return t;
}

TEST(CudaMoverWithoutDevice, FaultsEveryObjectInsteadOfCrashing) {
  if (probe_device().ok()) GTEST_SKIP() << "a device is present; the GPU tests cover this mover";
  sim::Simulator sim;
  const CudaMoverConfig c = small_config();
  CudaMover mover(sim, c);
  EXPECT_FALSE(mover.device_status().ok());
  EXPECT_EQ(mover.paged_cache(), nullptr);
  const sim::TransferResult r = run(
      sim, mover,
      transfer(sim::Location::kGpu, sim::Location::kCpu,
               {object(c, "a", -1, slot_range(0, kChunk)), object(c, "b", 1, slot_range(32, 5))}));
  EXPECT_EQ(r.ok, (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(r.finish, r.start);
  EXPECT_EQ(mover.name(), "cuda");
}

TEST(CudaMover, RejectsTransfersThatDoNotCrossGpuAndCpu) {
  sim::Simulator sim;
  const CudaMoverConfig c = small_config();
  CudaMover mover(sim, c);
  EXPECT_THROW(mover.start(transfer(sim::Location::kCpu, sim::Location::kDisk, {}),
                           [](const sim::TransferResult&) {}),
               model::CheckFailedError);
}

class CudaMoverGpu : public testing::GpuTest {
 protected:
  void SetUp() override {
    testing::GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    mover_.emplace(sim_, config_);
    KVTWIN_ASSERT_OK(mover_->device_status());
    layers_.resize(kLayers);
    for (int l = 0; l < kLayers; ++l) {
      layers_[l].resize(static_cast<size_t>(config_.paged.layer_bytes()));
      testing::fill_random(layers_[l].data(), layers_[l].size(), 300 + l);
      ASSERT_EQ(cudaMemcpy(mover_->paged_cache()->layer(l), layers_[l].data(), layers_[l].size(),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }

  // The object `o` as the reference gathers it from layers_.
  std::vector<uint8_t> expected(const sim::KvObject& o) {
    std::vector<uint8_t> out(o.bytes);
    std::vector<uint8_t*> layers;
    const int first = o.layer < 0 ? 0 : o.layer;
    const int count = o.layer < 0 ? kLayers : 1;
    for (int l = first; l < first + count; ++l) layers.push_back(layers_[l].data());
    uint8_t* chunk = out.data();
    KvCopyRequest r;
    r.paged = config_.paged;
    r.format = o.layer < 0 ? ChunkFormat::kKV_2LTD : ChunkFormat::kKV_T2D;
    r.num_layers = count;
    r.layers = layers.data();
    r.slots = o.slots.data();
    r.num_tokens = static_cast<int64_t>(o.slots.size());
    r.tokens_per_chunk = kChunk;
    r.chunks = &chunk;
    kv_copy_reference(r);
    return out;
  }

  sim::Simulator sim_;
  CudaMoverConfig config_ = small_config();
  std::optional<CudaMover> mover_;
  std::vector<std::vector<uint8_t>> layers_;
};

TEST_F(CudaMoverGpu, StoresWholeChunksAndLayersAsTheReferenceGathersThem) {
  std::vector<int64_t> skipped = slot_range(100, kChunk);
  skipped[3] = -1;
  const std::vector<sim::KvObject> objs = {
      object(config_, "c0", -1, slot_range(0, kChunk)), object(config_, "c1", -1, skipped),
      object(config_, "c2", -1, slot_range(200, 7)),  // a partial chunk ends the batch
      object(config_, "l1", 1, slot_range(40, kChunk)), object(config_, "l2", 2, slot_range(9, 3))};
  const sim::TransferResult r =
      run(sim_, *mover_, transfer(sim::Location::kGpu, sim::Location::kCpu, objs));
  EXPECT_EQ(r.ok, (std::vector<uint8_t>{1, 1, 1, 1, 1})) << mover_->last_error().message();
  EXPECT_GT(r.measured_ns, 0);
  EXPECT_EQ(r.finish, r.start + r.measured_ns);
  for (const sim::KvObject& o : objs) {
    const PinnedBlock* b = mover_->find(o.key);
    ASSERT_NE(b, nullptr) << o.key;
    std::vector<uint8_t> want = expected(o);
    if (o.key == "c1") {  // token 3 was skipped: its rows are whatever the object held
      const ChunkLayout cl =
          chunk_layout_for(config_.paged, ChunkFormat::kKV_2LTD, kLayers, kChunk);
      for (int kv = 0; kv < 2; ++kv) {
        for (int l = 0; l < kLayers; ++l) {
          const int64_t off = cl.offset_bytes(kv, l, 3);
          std::memcpy(want.data() + off, b->host + off, static_cast<size_t>(cl.row_bytes));
        }
      }
    }
    EXPECT_EQ(std::memcmp(b->host, want.data(), want.size()), 0) << o.key;
  }
}

// The staged store (the mover's default) of a chunk with a skipped token (slot -1) leaves that
// token's rows as the object held them, not as the staging buffer last held them: the chunk is
// stored, another chunk goes through staging, then the first is stored again (a re-put into the
// block it had) with token 3 skipped.
TEST_F(CudaMoverGpu, AStagedStoreLeavesTheRowsOfSkippedTokensAsTheObjectHeldThem) {
  ASSERT_EQ(config_.store_path, HostPath::kStaged);
  const sim::KvObject first = object(config_, "c", -1, slot_range(0, kChunk));
  ASSERT_EQ(run(sim_, *mover_, transfer(sim::Location::kGpu, sim::Location::kCpu, {first})).ok,
            std::vector<uint8_t>{1});
  const uint8_t* host = mover_->find("c")->host;
  const std::vector<uint8_t> before(host, host + first.bytes);
  const sim::KvObject other = object(config_, "x", -1, slot_range(200, kChunk));
  ASSERT_EQ(run(sim_, *mover_, transfer(sim::Location::kGpu, sim::Location::kCpu, {other})).ok,
            std::vector<uint8_t>{1});
  std::vector<int64_t> skipped = slot_range(100, kChunk);
  skipped[3] = -1;
  const sim::KvObject again = object(config_, "c", -1, skipped);
  ASSERT_EQ(run(sim_, *mover_, transfer(sim::Location::kGpu, sim::Location::kCpu, {again})).ok,
            std::vector<uint8_t>{1})
      << mover_->last_error().message();
  const PinnedBlock* b = mover_->find("c");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->host, host) << "the re-put was expected in the block it freed (first fit)";
  std::vector<uint8_t> want = expected(again);
  const ChunkLayout cl = chunk_layout_for(config_.paged, ChunkFormat::kKV_2LTD, kLayers, kChunk);
  for (int kv = 0; kv < 2; ++kv) {
    for (int l = 0; l < kLayers; ++l) {
      const int64_t off = cl.offset_bytes(kv, l, 3);
      std::memcpy(want.data() + off, before.data() + off, static_cast<size_t>(cl.row_bytes));
    }
  }
  EXPECT_EQ(std::memcmp(b->host, want.data(), want.size()), 0);
}

TEST_F(CudaMoverGpu, RetrievesStoredObjectsIntoOtherSlots) {
  const sim::KvObject stored = object(config_, "k", -1, slot_range(0, kChunk));
  ASSERT_EQ(run(sim_, *mover_, transfer(sim::Location::kGpu, sim::Location::kCpu, {stored})).ok,
            std::vector<uint8_t>{1});
  const sim::KvObject back = object(config_, "k", -1, slot_range(128, kChunk));
  const sim::KvObject missing = object(config_, "nope", -1, slot_range(160, kChunk));
  const sim::TransferResult r =
      run(sim_, *mover_, transfer(sim::Location::kCpu, sim::Location::kGpu, {back, missing}));
  EXPECT_EQ(r.ok, (std::vector<uint8_t>{1, 0}));
  const PagedLayout& p = config_.paged;
  for (int l = 0; l < kLayers; ++l) {
    std::vector<uint8_t> got(layers_[l].size());
    ASSERT_EQ(
        cudaMemcpy(got.data(), mover_->paged_cache()->layer(l), got.size(), cudaMemcpyDeviceToHost),
        cudaSuccess);
    for (int64_t t = 0; t < kChunk; ++t) {
      for (int kv = 0; kv < 2; ++kv) {
        const int64_t from = p.offset_bytes(kv, t, 0);
        const int64_t to = p.offset_bytes(kv, 128 + t, 0);
        ASSERT_EQ(std::memcmp(got.data() + to, layers_[l].data() + from, p.row_bytes()), 0)
            << "layer " << l << " token " << t;
      }
    }
  }
}

TEST_F(CudaMoverGpu, FailsOnlyTheObjectsThatDoNotFitThePool) {
  // 1 MiB pool; a whole chunk is 2 * 3 * 32 * 256 = 48 KiB: 21 fit, the 22nd does not.
  std::vector<sim::KvObject> objs;
  for (int i = 0; i < 22; ++i) {
    objs.push_back(object(config_, "o" + std::to_string(i), -1, slot_range(0, kChunk)));
  }
  const sim::TransferResult r =
      run(sim_, *mover_, transfer(sim::Location::kGpu, sim::Location::kCpu, objs));
  int stored = 0;
  for (uint8_t v : r.ok) stored += v;
  EXPECT_EQ(stored, 21);
  EXPECT_EQ(r.ok.back(), 0);
  EXPECT_TRUE(mover_->drop("o0"));
  EXPECT_FALSE(mover_->drop("o0"));
}

}  // namespace
}  // namespace kvtwin::cuda
