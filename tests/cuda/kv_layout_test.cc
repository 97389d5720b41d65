#include "cuda/kv_layout.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <set>

#include "model/check.h"

namespace kvtwin::cuda {
namespace {

// Hand-computed: NB 4, BS 16, H 8, D 128, bf16. Token slot 37 is block 2, offset 5.
TEST(PagedLayout, NhdPlacesTokenRowsInsideEachPlane) {
  const PagedLayout p = make_paged_layout(PagedKind::kNHD, 4, 16, 8, 128, 2);
  EXPECT_EQ(p.offset_bytes(0, 0, 0), 0);
  EXPECT_EQ(p.offset_bytes(0, 37, 3), (37 * 8 + 3) * 256);
  EXPECT_EQ(p.offset_bytes(1, 37, 3), ((64 + 37) * 8 + 3) * 256);  // V plane after 64 slots
  EXPECT_EQ(p.layer_bytes(), 2 * 64 * 8 * 256);
}

TEST(PagedLayout, HndPutsHeadsOfOneBlockBlockSizeRowsApart) {
  const PagedLayout p = make_paged_layout(PagedKind::kHND, 4, 16, 8, 128, 2);
  EXPECT_EQ(p.offset_bytes(0, 37, 0), ((2 * 8 + 0) * 16 + 5) * 256);
  EXPECT_EQ(p.offset_bytes(0, 37, 1) - p.offset_bytes(0, 37, 0), 16 * 256);
  EXPECT_EQ(p.offset_bytes(1, 37, 3), (((4 + 2) * 8 + 3) * 16 + 5) * 256);
  EXPECT_FALSE(p.heads_contiguous());
}

TEST(PagedLayout, FlashInferInterleavesKAndVPerBlock) {
  const PagedLayout p = make_paged_layout(PagedKind::kFlashInfer, 4, 16, 8, 128, 2);
  EXPECT_EQ(p.offset_bytes(0, 37, 3), (((2 * 2 + 0) * 16 + 5) * 8 + 3) * 256);
  EXPECT_EQ(p.offset_bytes(1, 37, 3), (((2 * 2 + 1) * 16 + 5) * 8 + 3) * 256);
}

TEST(PagedLayout, MlaHasOnePlaneOfLatentRows) {
  const PagedLayout p = make_paged_layout(PagedKind::kMLA, 4, 16, 1, 576, 2);
  EXPECT_EQ(p.num_kv(), 1);
  EXPECT_EQ(p.offset_bytes(0, 37, 0), 37 * 576 * 2);
  EXPECT_EQ(p.layer_bytes(), 64 * 576 * 2);
}

TEST(PagedLayout, RejectsMlaWithMoreThanOneHeadAndOddElementSizes) {
  EXPECT_THROW(make_paged_layout(PagedKind::kMLA, 4, 16, 2, 576, 2), model::CheckFailedError);
  EXPECT_THROW(make_paged_layout(PagedKind::kNHD, 4, 16, 8, 128, 3), model::CheckFailedError);
  EXPECT_THROW(make_paged_layout(PagedKind::kNHD, 1 << 27, 16, 8, 128, 2),
               model::CheckFailedError);  // 2^31 slots
}

TEST(ChunkLayout, OffsetsFollowEachMemoryFormat) {
  const PagedLayout p = make_paged_layout(PagedKind::kNHD, 4, 16, 8, 128, 2);  // W = 2048
  const ChunkLayout ltd = chunk_layout_for(p, ChunkFormat::kKV_2LTD, 32, 256);
  EXPECT_EQ(ltd.offset_bytes(1, 5, 7), ((32 + 5) * 256 + 7) * 2048);
  EXPECT_EQ(ltd.total_bytes(), 32 * 1024 * 1024);  // 32 MiB per Llama-3.1-8B chunk
  const ChunkLayout t2d = chunk_layout_for(p, ChunkFormat::kKV_T2D, 1, 256);
  EXPECT_EQ(t2d.offset_bytes(1, 0, 7), (7 * 2 + 1) * 2048);
  const ChunkLayout two_td = chunk_layout_for(p, ChunkFormat::kKV_2TD, 1, 256);
  EXPECT_EQ(two_td.offset_bytes(1, 0, 7), (256 + 7) * 2048);
  const PagedLayout m = make_paged_layout(PagedKind::kMLA, 4, 16, 1, 576, 2);
  const ChunkLayout mla = chunk_layout_for(m, ChunkFormat::kKV_MLA, 61, 256);
  EXPECT_EQ(mla.offset_bytes(0, 60, 255), (60 * 256 + 255) * 1152);
  EXPECT_EQ(mla.total_bytes(), 17'989'632);  // DeepSeek-V3 chunk, as in LMCache
}

TEST(ChunkLayout, FormatsAcceptOnlyTheLayoutsTheyCanHold) {
  EXPECT_TRUE(formats_compatible(PagedKind::kHND, ChunkFormat::kKV_2LTD, 32));
  EXPECT_TRUE(formats_compatible(PagedKind::kFlashInfer, ChunkFormat::kKV_T2D, 1));
  EXPECT_FALSE(formats_compatible(PagedKind::kNHD, ChunkFormat::kKV_T2D, 2));
  EXPECT_FALSE(formats_compatible(PagedKind::kNHD, ChunkFormat::kKV_MLA, 1));
  EXPECT_FALSE(formats_compatible(PagedKind::kMLA, ChunkFormat::kKV_2LTD, 1));
  EXPECT_TRUE(formats_compatible(PagedKind::kMLA, ChunkFormat::kKV_MLA, 1));
  EXPECT_FALSE(formats_compatible(PagedKind::kMLA, ChunkFormat::kKV_MLA, 0));
}

// Every (kv, slot, head) lands on its own head-aligned offset inside the layer: the layout is a
// bijection onto [0, layer_bytes).
RC_GTEST_PROP(PagedLayout, EveryHeadOfEverySlotHasItsOwnPlace, ()) {
  const auto kind =
      *rc::gen::element(PagedKind::kNHD, PagedKind::kHND, PagedKind::kFlashInfer, PagedKind::kMLA);
  const int heads = kind == PagedKind::kMLA ? 1 : *rc::gen::inRange(1, 5);
  const PagedLayout p =
      make_paged_layout(kind, *rc::gen::inRange(1, 6), *rc::gen::inRange(1, 9), heads,
                        *rc::gen::inRange(1, 7), *rc::gen::element(1, 2, 4));
  std::set<int64_t> seen;
  for (int kv = 0; kv < p.num_kv(); ++kv) {
    for (int64_t slot = 0; slot < p.num_slots(); ++slot) {
      for (int h = 0; h < p.num_heads; ++h) {
        const int64_t off = p.offset_bytes(kv, slot, h);
        RC_ASSERT(off >= 0);
        RC_ASSERT(off + p.head_bytes() <= p.layer_bytes());
        RC_ASSERT(off % p.head_bytes() == 0);
        RC_ASSERT(seen.insert(off).second);
      }
    }
  }
  RC_ASSERT(static_cast<int64_t>(seen.size()) * p.head_bytes() == p.layer_bytes());
}

RC_GTEST_PROP(ChunkLayout, EveryRowOfEveryChunkHasItsOwnPlace, ()) {
  const auto format = *rc::gen::element(ChunkFormat::kKV_2LTD, ChunkFormat::kKV_T2D,
                                        ChunkFormat::kKV_2TD, ChunkFormat::kKV_MLA);
  const bool mla = format == ChunkFormat::kKV_MLA;
  const PagedLayout p =
      make_paged_layout(mla ? PagedKind::kMLA : PagedKind::kNHD, 2, 4,
                        mla ? 1 : *rc::gen::inRange(1, 4), *rc::gen::inRange(1, 9), 2);
  const bool one_layer = format == ChunkFormat::kKV_T2D || format == ChunkFormat::kKV_2TD;
  const int layers = one_layer ? 1 : *rc::gen::inRange(1, 5);
  const ChunkLayout c = chunk_layout_for(p, format, layers, *rc::gen::inRange(1, 20));
  std::set<int64_t> seen;
  for (int kv = 0; kv < c.num_kv(); ++kv) {
    for (int l = 0; l < c.num_layers; ++l) {
      for (int64_t t = 0; t < c.num_tokens; ++t) {
        const int64_t off = c.offset_bytes(kv, l, t);
        RC_ASSERT(off >= 0 && off + c.row_bytes <= c.total_bytes() && off % c.row_bytes == 0);
        RC_ASSERT(seen.insert(off).second);
      }
    }
  }
  RC_ASSERT(static_cast<int64_t>(seen.size()) * c.row_bytes == c.total_bytes());
}

}  // namespace
}  // namespace kvtwin::cuda
