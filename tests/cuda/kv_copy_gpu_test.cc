// The copy kernels on the device against the CPU reference: the whole layout matrix with device
// and zero-copy (pinned) chunks, narrow-word fallbacks, real model shapes and round trips.
#include "cuda/kv_copy.h"

#include <gtest/gtest.h>

#include <cstring>

#include "cuda/kv_copy_reference.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvtwin::cuda {
namespace {

using testing::ChunkPlace;
using testing::compare_with_oracle;
using testing::HostKvArena;
using testing::KvCase;

void run_reference(HostKvArena& a) {
  kv_copy_reference(a.request());
}

std::function<void(HostKvArena&)> on_device(ChunkPlace place) {
  return [place](HostKvArena& a) {
    const Status s = testing::run_on_device(a, place);
    ASSERT_TRUE(s.ok()) << s.message();
  };
}

std::vector<KvCase> gpu_matrix() {
  std::vector<KvCase> cases = testing::full_kv_matrix();
  const size_t n = cases.size();
  for (size_t i = 0; i < n; i += 4) {  // narrow-word fallbacks: chunks 1, 2, 4 or 8 bytes off
    KvCase c = cases[i];
    c.chunk_misalign = 1u << (i / 4 % 4);
    cases.push_back(c);
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<KvCase>& p) {
  return p.param.name();
}

class GpuMatrix : public testing::GpuParamTest<KvCase> {};

TEST_P(GpuMatrix, DeviceChunksMatchTheReferenceByteForByte) {
  HostKvArena arena(GetParam());
  EXPECT_EQ(compare_with_oracle(arena, run_reference, on_device(ChunkPlace::kDevice)), "");
}

TEST_P(GpuMatrix, ZeroCopyPinnedChunksMatchTheReferenceByteForByte) {
  HostKvArena arena(GetParam());
  EXPECT_EQ(compare_with_oracle(arena, run_reference, on_device(ChunkPlace::kPinned)), "");
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, GpuMatrix, ::testing::ValuesIn(gpu_matrix()), case_name);

// Real shapes, many chunks per launch, more than one launch (> 128 chunks) and skipped slots.
std::vector<KvCase> model_cases() {
  std::vector<KvCase> cases;
  KvCase llama8b;  // Llama-3.1-8B: 32 layers, 8 KV heads, head 128, bf16, block 16, chunk 256
  llama8b.num_layers = 32;
  llama8b.num_heads = 8;
  llama8b.head_size = 128;
  llama8b.num_tokens = 1000;
  llama8b.tokens_per_chunk = 256;
  llama8b.num_blocks = 80;
  llama8b.skip_percent = 3;
  for (PagedKind k : {PagedKind::kNHD, PagedKind::kHND, PagedKind::kFlashInfer}) {
    for (CopyDirection d : {CopyDirection::kPagedToChunk, CopyDirection::kChunkToPaged}) {
      KvCase c = llama8b;
      c.kind = k;
      c.direction = d;
      cases.push_back(c);
    }
  }
  KvCase many = llama8b;  // 130 chunks of 4 tokens: two launches
  many.num_layers = 2;
  many.tokens_per_chunk = 4;
  many.num_tokens = 520;
  cases.push_back(many);
  KvCase dsv3;  // DeepSeek-V3 MLA: 61 layers, 576-element latent, bf16
  dsv3.kind = PagedKind::kMLA;
  dsv3.format = ChunkFormat::kKV_MLA;
  dsv3.num_heads = 1;
  dsv3.head_size = 576;
  dsv3.num_layers = 61;
  dsv3.num_tokens = 600;
  dsv3.tokens_per_chunk = 256;
  dsv3.num_blocks = 48;
  for (CopyDirection d : {CopyDirection::kPagedToChunk, CopyDirection::kChunkToPaged}) {
    dsv3.direction = d;
    cases.push_back(dsv3);
  }
  return cases;
}

class GpuModelShapes : public testing::GpuParamTest<KvCase> {};

TEST_P(GpuModelShapes, MatchTheReferenceOnDeviceAndPinnedChunks) {
  HostKvArena arena(GetParam());
  EXPECT_EQ(compare_with_oracle(arena, run_reference, on_device(ChunkPlace::kDevice)), "");
  EXPECT_EQ(compare_with_oracle(arena, run_reference, on_device(ChunkPlace::kPinned)), "");
}

INSTANTIATE_TEST_SUITE_P(Models, GpuModelShapes, ::testing::ValuesIn(model_cases()), case_name);

class KvCopyGpu : public testing::GpuTest {};

TEST_F(KvCopyGpu, GatherThenScatterRestoresThePagedBytes) {
  KvCase c;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_tokens = 700;
  c.tokens_per_chunk = 256;
  c.num_blocks = 50;
  c.skip_percent = 0;
  HostKvArena arena(c);
  arena.reset(0x11);
  const std::vector<uint8_t> original = arena.snapshot();
  KVTWIN_ASSERT_OK(testing::run_on_device(arena, ChunkPlace::kDevice));  // gather
  KvCase scatter = c;  // same seed: same slots and offsets
  scatter.direction = CopyDirection::kChunkToPaged;
  HostKvArena back(scatter);
  std::memcpy(back.data(), arena.data(), arena.size());
  for (uint8_t* layer : back.layer_pointers()) {
    std::memset(layer, 0x77, static_cast<size_t>(back.layer_bytes()));
  }
  KVTWIN_ASSERT_OK(testing::run_on_device(back, ChunkPlace::kPinned));  // scatter
  const PagedLayout p = c.paged();
  for (int l = 0; l < c.num_layers; ++l) {
    for (int64_t t = 0; t < c.num_tokens; ++t) {
      for (int kv = 0; kv < 2; ++kv) {
        const size_t off = arena.layer_offset(l) + p.offset_bytes(kv, arena.slots()[t], 0);
        ASSERT_EQ(std::memcmp(back.data() + off, original.data() + off, p.row_bytes()), 0)
            << "layer " << l << " token " << t;
      }
    }
  }
}

TEST_F(KvCopyGpu, RefusesAMalformedRequestWithoutLaunching) {
  KvCopyRequest r;
  r.paged = make_paged_layout(PagedKind::kNHD, 4, 16, 2, 64, 2);
  r.format = ChunkFormat::kKV_MLA;  // cannot hold NHD
  r.num_tokens = 1;
  r.tokens_per_chunk = 1;
  const Status s = launch_kv_copy(r, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("KV_MLA"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kvtwin::cuda
