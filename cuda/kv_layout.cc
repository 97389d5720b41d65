#include "cuda/kv_layout.h"

#include "model/check.h"

namespace kvtwin::cuda {

std::string_view paged_kind_name(PagedKind kind) {
  switch (kind) {
    case PagedKind::kNHD:
      return "NHD";
    case PagedKind::kHND:
      return "HND";
    case PagedKind::kFlashInfer:
      return "FlashInfer";
    case PagedKind::kMLA:
      return "MLA";
  }
  return "?";
}

std::string_view chunk_format_name(ChunkFormat format) {
  switch (format) {
    case ChunkFormat::kKV_2LTD:
      return "KV_2LTD";
    case ChunkFormat::kKV_T2D:
      return "KV_T2D";
    case ChunkFormat::kKV_2TD:
      return "KV_2TD";
    case ChunkFormat::kKV_MLA:
      return "KV_MLA";
  }
  return "?";
}

std::string_view copy_direction_name(CopyDirection direction) {
  return direction == CopyDirection::kPagedToChunk ? "paged_to_chunk" : "chunk_to_paged";
}

PagedLayout make_paged_layout(PagedKind kind, int64_t num_blocks, int32_t block_size,
                              int32_t num_heads, int32_t head_size, int32_t elem_bytes) {
  KVTWIN_CHECK(num_blocks > 0 && block_size > 0 && num_heads > 0 && head_size > 0)
      << "paged layout sizes must be positive: " << num_blocks << " " << block_size << " "
      << num_heads << " " << head_size;
  KVTWIN_CHECK(elem_bytes == 1 || elem_bytes == 2 || elem_bytes == 4 || elem_bytes == 8)
      << "elem_bytes " << elem_bytes;
  KVTWIN_CHECK(kind != PagedKind::kMLA || num_heads == 1) << "MLA has one latent head";
  KVTWIN_CHECK_LT(num_blocks * block_size, int64_t{1} << 31) << "slots must fit 31 bits";
  PagedLayout p;
  p.kind = kind;
  p.num_blocks = num_blocks;
  p.block_size = block_size;
  p.num_heads = num_heads;
  p.head_size = head_size;
  p.elem_bytes = elem_bytes;
  p.block_div = FastDivmod(static_cast<uint32_t>(block_size));
  return p;
}

bool formats_compatible(PagedKind kind, ChunkFormat format, int num_layers) {
  if (num_layers < 1) return false;
  if ((kind == PagedKind::kMLA) != (format == ChunkFormat::kKV_MLA)) return false;
  if (format == ChunkFormat::kKV_T2D || format == ChunkFormat::kKV_2TD) return num_layers == 1;
  return true;
}

ChunkLayout chunk_layout_for(const PagedLayout& paged, ChunkFormat format, int num_layers,
                             int64_t num_tokens) {
  KVTWIN_CHECK(formats_compatible(paged.kind, format, num_layers))
      << chunk_format_name(format) << " cannot hold " << paged_kind_name(paged.kind) << " with "
      << num_layers << " layers";
  ChunkLayout c;
  c.format = format;
  c.num_layers = num_layers;
  c.num_tokens = num_tokens;
  c.row_bytes = paged.row_bytes();
  return c;
}

}  // namespace kvtwin::cuda
