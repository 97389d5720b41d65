#include "cuda/kv_copy_reference.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>

#include "model/check.h"
#include "tests/cuda/kv_test_support.h"

namespace kvtwin::cuda {
namespace {

using testing::compare_with_oracle;
using testing::HostKvArena;
using testing::KvCase;

void run_naive(HostKvArena& a) {
  testing::naive_kv_copy(a.request());
}
void run_reference(HostKvArena& a) {
  kv_copy_reference(a.request());
}

std::string case_name(const ::testing::TestParamInfo<KvCase>& p) {
  return p.param.name();
}

class ReferenceMatrix : public ::testing::TestWithParam<KvCase> {};

// Every layout x format x direction x element size, odd head sizes, a partial last chunk and
// skipped slots: the reference writes exactly the bytes the independent index model writes.
TEST_P(ReferenceMatrix, WritesExactlyTheBytesOfTheIndexModel) {
  HostKvArena arena(GetParam());
  EXPECT_EQ(compare_with_oracle(arena, run_naive, run_reference), "");
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, ReferenceMatrix,
                         ::testing::ValuesIn(testing::full_kv_matrix()), case_name);

TEST(KvCopyReference, CopiesSomethingInEveryMatrixCase) {
  for (const KvCase& c : testing::full_kv_matrix()) {  // guards against a vacuous oracle
    HostKvArena arena(c);
    arena.reset(0xA5);
    const auto before = arena.snapshot();
    run_reference(arena);
    EXPECT_GE(testing::first_difference(before, arena.snapshot()), 0) << c.name();
  }
}

TEST(KvCopyReference, LeavesEverythingUntouchedWhenEverySlotIsSkipped) {
  KvCase c;
  c.skip_percent = 100;
  for (CopyDirection dir : {CopyDirection::kPagedToChunk, CopyDirection::kChunkToPaged}) {
    c.direction = dir;
    HostKvArena arena(c);
    arena.reset(0x33);
    const auto before = arena.snapshot();
    run_reference(arena);
    EXPECT_EQ(testing::first_difference(before, arena.snapshot()), -1);
  }
}

TEST(KvCopyReference, GatherThenScatterRestoresEveryUnskippedToken) {
  KvCase c;
  c.kind = PagedKind::kHND;
  c.num_tokens = 45;
  HostKvArena arena(c);
  arena.reset(0);
  const auto original = arena.snapshot();
  run_reference(arena);  // paged -> chunks
  KvCopyRequest back = arena.request();
  for (uint8_t* layer : arena.layer_pointers()) {
    std::memset(layer, 0xEE, static_cast<size_t>(arena.layer_bytes()));
  }
  back.direction = CopyDirection::kChunkToPaged;
  kv_copy_reference(back);
  const PagedLayout p = c.paged();
  for (int l = 0; l < c.num_layers; ++l) {
    for (int64_t t = 0; t < c.num_tokens; ++t) {
      const int64_t slot = arena.slots()[t];
      if (slot < 0) continue;
      for (int kv = 0; kv < 2; ++kv) {
        for (int h = 0; h < c.num_heads; ++h) {
          const size_t off = arena.layer_offset(l) + p.offset_bytes(kv, slot, h);
          ASSERT_EQ(std::memcmp(arena.data() + off, original.data() + off, p.head_bytes()), 0)
              << "layer " << l << " token " << t << " kv " << kv << " head " << h;
        }
      }
    }
  }
}

TEST(KvCopyReference, RejectsASlotBeyondThePagedBuffer) {
  KvCase c;
  HostKvArena arena(c);
  KvCopyRequest r = arena.request();
  std::vector<int64_t> slots = arena.slots();
  slots[3] = c.num_blocks * c.block_size;
  r.slots = slots.data();
  EXPECT_THROW(kv_copy_reference(r), model::CheckFailedError);
}

// Random geometry, any block size (FastDivmod on non-powers of two), any element size.
RC_GTEST_PROP(KvCopyReference, MatchesTheIndexModelOnRandomGeometry, ()) {
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
  c.head_size = *rc::gen::inRange(1, 40);
  const bool one_layer = c.format == ChunkFormat::kKV_T2D || c.format == ChunkFormat::kKV_2TD;
  c.num_layers = one_layer ? 1 : *rc::gen::inRange(1, 4);
  c.block_size = *rc::gen::inRange(1, 20);
  c.tokens_per_chunk = *rc::gen::inRange(1, 24);
  c.num_tokens = *rc::gen::inRange(0, 50);
  c.num_blocks = (c.num_tokens + c.block_size) / c.block_size + *rc::gen::inRange(0, 3);
  c.skip_percent = *rc::gen::inRange(0, 101);
  c.seed = *rc::gen::arbitrary<uint64_t>();
  HostKvArena arena(c);
  RC_ASSERT(compare_with_oracle(arena, run_naive, run_reference) == "");
}

}  // namespace
}  // namespace kvtwin::cuda
