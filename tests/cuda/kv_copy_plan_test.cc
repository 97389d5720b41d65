#include "cuda/kv_copy_plan.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "cuda/kv_copy_reference.h"
#include "model/check.h"
#include "tests/cuda/kv_test_support.h"

namespace kvtwin::cuda {
namespace {

using testing::compare_with_oracle;
using testing::HostKvArena;
using testing::KvCase;

void run_reference(HostKvArena& a) {
  kv_copy_reference(a.request());
}
void run_plans(HostKvArena& a) {
  const KvCopyRequest r = a.request();
  for (const KvCopyPlan& plan : make_kv_copy_plans(r)) {
    execute_kv_copy_plan_on_host(plan, r.direction);
  }
}

std::vector<KvCase> matrix_with_misaligned_chunks() {
  std::vector<KvCase> cases = testing::full_kv_matrix();
  const size_t n = cases.size();
  for (size_t i = 0; i < n; i += 5) {  // every fifth case again with chunks 1, 2 or 8 bytes off
    KvCase c = cases[i];
    c.chunk_misalign = (i % 3 == 0) ? 1 : (i % 3 == 1) ? 2 : 8;
    cases.push_back(c);
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<KvCase>& p) {
  return p.param.name();
}

class PlanMatrix : public ::testing::TestWithParam<KvCase> {};

// The kernels' thread-to-byte mapping, run on the CPU, equals the reference byte for byte.
TEST_P(PlanMatrix, KernelMappingWritesExactlyTheReferenceBytes) {
  HostKvArena arena(GetParam());
  EXPECT_EQ(compare_with_oracle(arena, run_reference, run_plans), "");
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, PlanMatrix,
                         ::testing::ValuesIn(matrix_with_misaligned_chunks()), case_name);

uint32_t vector_bytes_of(const KvCase& c) {
  HostKvArena arena(c);
  return kv_copy_vector_bytes(arena.request());
}

TEST(KvCopyPlan, UsesSixteenByteWordsWhenRowsAndBasesAllowIt) {
  KvCase c;  // D 128, bf16: 256-byte heads
  EXPECT_EQ(vector_bytes_of(c), 16u);
  c.kind = PagedKind::kMLA;
  c.format = ChunkFormat::kKV_MLA;
  c.num_heads = 1;
  c.head_size = 576;  // 1,152-byte rows
  EXPECT_EQ(vector_bytes_of(c), 16u);
}

TEST(KvCopyPlan, FallsBackToNarrowerWordsForOddHeadsAndMisalignedBases) {
  KvCase c;
  c.head_size = 66;
  c.num_heads = 1;
  EXPECT_EQ(vector_bytes_of(c), 4u);  // 132-byte rows
  c.elem_bytes = 1;
  EXPECT_EQ(vector_bytes_of(c), 2u);  // 66-byte rows
  c.elem_bytes = 4;
  EXPECT_EQ(vector_bytes_of(c), 8u);  // 264-byte rows
  c.head_size = 128;
  c.chunk_misalign = 1;
  EXPECT_EQ(vector_bytes_of(c), 1u);
  c.chunk_misalign = 8;
  EXPECT_EQ(vector_bytes_of(c), 8u);
}

TEST(KvCopyPlan, SplitsBatchesOfMoreThanOneLaunchOfChunks) {
  KvCase c;
  c.num_layers = 1;
  c.head_size = 8;
  c.num_heads = 1;
  c.tokens_per_chunk = 2;
  c.num_tokens = 2 * kMaxChunksPerLaunch + 3;  // 128 + 1 full chunks and one of 1 token
  c.num_blocks = (c.num_tokens + 16) / 16;
  HostKvArena arena(c);
  const KvCopyRequest r = arena.request();
  const std::vector<KvCopyPlan> plans = make_kv_copy_plans(r);
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans[0].num_chunks, static_cast<uint32_t>(kMaxChunksPerLaunch));
  EXPECT_EQ(plans[1].num_chunks, 2u);
  EXPECT_EQ(plans[1].slots, r.slots + 2 * kMaxChunksPerLaunch);
  EXPECT_EQ(plans[1].chunks[1], r.chunks[kMaxChunksPerLaunch + 1]);
  EXPECT_EQ(plans[0].units_last, plans[0].units_full);
  EXPECT_EQ(plans[1].units_last * 2, plans[1].units_full);
  EXPECT_EQ(compare_with_oracle(arena, run_reference, run_plans), "");
}

TEST(KvCopyPlan, ExplainsWhyARequestCannotRun) {
  KvCase c;
  HostKvArena arena(c);
  KvCopyRequest r = arena.request();
  EXPECT_EQ(kv_copy_request_error(r), "");
  KvCopyRequest bad = r;
  bad.format = ChunkFormat::kKV_MLA;
  EXPECT_NE(kv_copy_request_error(bad), "");
  bad = r;
  bad.tokens_per_chunk = 0;
  EXPECT_NE(kv_copy_request_error(bad), "");
  bad = r;
  bad.slots = nullptr;
  EXPECT_NE(kv_copy_request_error(bad), "");
  bad = r;
  bad.tokens_per_chunk = int64_t{1} << 30;  // one chunk over 2^31 bytes
  EXPECT_NE(kv_copy_request_error(bad), "");
  EXPECT_THROW(make_kv_copy_plans(bad), model::CheckFailedError);
}

TEST(KvCopyPlan, SkipsSlotsOutsideThePagedBufferInsteadOfWritingThere) {
  KvCase c;
  HostKvArena arena(c);
  KvCopyRequest r = arena.request();
  std::vector<int64_t> slots = arena.slots();
  slots[0] = c.num_blocks * c.block_size;
  r.slots = slots.data();
  const KvCopyPlan plan = make_kv_copy_plans(r)[0];
  UnitAddress a;
  EXPECT_FALSE(plan.locate(0, 0, a));
}

RC_GTEST_PROP(KvCopyPlan, KernelMappingMatchesTheReferenceOnRandomGeometry, ()) {
  KvCase c;
  c.kind =
      *rc::gen::element(PagedKind::kNHD, PagedKind::kHND, PagedKind::kFlashInfer, PagedKind::kMLA);
  c.format =
      c.kind == PagedKind::kMLA
          ? ChunkFormat::kKV_MLA
          : *rc::gen::element(ChunkFormat::kKV_2LTD, ChunkFormat::kKV_T2D, ChunkFormat::kKV_2TD);
  c.direction = *rc::gen::element(CopyDirection::kPagedToChunk, CopyDirection::kChunkToPaged);
  c.elem_bytes = *rc::gen::element(1, 2, 4);
  c.num_heads = c.kind == PagedKind::kMLA ? 1 : *rc::gen::inRange(1, 4);
  c.head_size = *rc::gen::inRange(1, 72);
  const bool one_layer = c.format == ChunkFormat::kKV_T2D || c.format == ChunkFormat::kKV_2TD;
  c.num_layers = one_layer ? 1 : *rc::gen::inRange(1, 4);
  c.block_size = *rc::gen::inRange(1, 20);
  c.tokens_per_chunk = *rc::gen::inRange(1, 24);
  c.num_tokens = *rc::gen::inRange(0, 50);
  c.num_blocks = (c.num_tokens + c.block_size) / c.block_size + *rc::gen::inRange(0, 3);
  c.skip_percent = *rc::gen::inRange(0, 101);
  c.chunk_misalign = *rc::gen::element(0u, 0u, 1u, 2u, 4u, 8u);
  c.seed = *rc::gen::arbitrary<uint64_t>();
  HostKvArena arena(c);
  RC_ASSERT(compare_with_oracle(arena, run_reference, run_plans) == "");
}

}  // namespace
}  // namespace kvtwin::cuda
