// Layouts of KV bytes on both sides of the copy kernels, with their index math.
//
// vLLM keeps one paged buffer per attention layer; a token's position in it is its slot
// (slot = block_id * block_size + offset_in_block). LMCache keeps each chunk of tokens as one
// contiguous object in one of its MemoryFormats. The copy kernels move bytes between the two and
// never interpret the element type: fp16, bf16, fp8 and fp32 are all "elem_bytes" wide rows.
//
// Every offset below is in bytes and is computed only through these structs, on the CPU (the
// reference, the tests) and on the GPU (the kernels) alike.
//
// Notation: NB num_blocks, BS block_size, H kv heads (per TP rank), D head size in elements,
// e elem_bytes, L layers in a chunk object, T tokens in a chunk object, kv 0 = K and 1 = V.
//
// C++17 (included by .cu files); no CUDA headers.
#pragma once

#include <cstdint>
#include <string_view>

#include "cuda/fast_divmod.h"
#include "cuda/host_device.h"

namespace kvtwin::cuda {

// ---------------------------------------------------------------------------------------------
// vLLM paged buffer, one layer. The four shapes vLLM's attention backends use:
//
//   kNHD        flash-attn   [2, NB, BS, H, D]   K plane then V plane; a token's H*D contiguous
//   kHND        (HND order)  [2, NB, H, BS, D]   each head's D contiguous, heads BS*D apart
//   kFlashInfer FlashInfer   [NB, 2, BS, H, D]   K and V interleaved per block
//   kMLA        MLA latent   [NB, BS, D]         one plane, one "head" of D (576 for DeepSeek-V3)
//
// Offsets (elements; multiply by e), slot = b * BS + s:
//   kNHD        ((kv * NB * BS + slot) * H + h) * D
//   kHND        (((kv * NB + b) * H + h) * BS + s) * D
//   kFlashInfer (((b * 2 + kv) * BS + s) * H + h) * D
//   kMLA        slot * D                               (kv == 0, h == 0)
// ---------------------------------------------------------------------------------------------
enum class PagedKind : uint8_t { kNHD, kHND, kFlashInfer, kMLA };
std::string_view paged_kind_name(PagedKind kind);

struct PagedLayout {
  PagedKind kind = PagedKind::kNHD;
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_heads = 0;  // kv heads of this rank; 1 for kMLA
  int32_t head_size = 0;  // elements per head
  int32_t elem_bytes = 0;
  FastDivmod block_div;  // slot -> (block, offset in block)

  KVTWIN_HD int num_kv() const { return kind == PagedKind::kMLA ? 1 : 2; }
  KVTWIN_HD int64_t head_bytes() const { return int64_t{head_size} * elem_bytes; }
  // Bytes of one token's K (or V) across all heads; the row of a chunk object.
  KVTWIN_HD int64_t row_bytes() const { return head_bytes() * num_heads; }
  // True when a token's heads are adjacent in the paged buffer (every kind but kHND).
  KVTWIN_HD bool heads_contiguous() const { return kind != PagedKind::kHND; }
  KVTWIN_HD int64_t num_slots() const { return num_blocks * block_size; }
  KVTWIN_HD int64_t layer_bytes() const { return num_kv() * num_slots() * row_bytes(); }

  // Byte offset of head h of the token at `slot`, plane kv, inside one layer's buffer.
  // REQUIRES: 0 <= slot < num_slots(), 0 <= kv < num_kv(), 0 <= h < num_heads.
  KVTWIN_HD int64_t offset_bytes(int kv, int64_t slot, int h) const {
    const int64_t D = head_size;
    const int64_t H = num_heads;
    const int64_t BS = block_size;
    switch (kind) {
      case PagedKind::kNHD:
        return ((kv * num_slots() + slot) * H + h) * D * elem_bytes;
      case PagedKind::kHND: {
        uint32_t b, s;
        block_div.divmod(static_cast<uint32_t>(slot), b, s);
        return (((kv * num_blocks + b) * H + h) * BS + s) * D * elem_bytes;
      }
      case PagedKind::kFlashInfer: {
        uint32_t b, s;
        block_div.divmod(static_cast<uint32_t>(slot), b, s);
        return (((int64_t{b} * 2 + kv) * BS + s) * H + h) * D * elem_bytes;
      }
      case PagedKind::kMLA:
        return slot * D * elem_bytes;
    }
    return -1;  // unreachable: kind is one of the four above
  }
};

// Builds a layout and checks it (KVTWIN_CHECK): positive sizes, elem_bytes in {1, 2, 4, 8},
// num_heads == 1 for kMLA, num_slots() < 2^31 (slots are divided with FastDivmod).
PagedLayout make_paged_layout(PagedKind kind, int64_t num_blocks, int32_t block_size,
                              int32_t num_heads, int32_t head_size, int32_t elem_bytes);

// ---------------------------------------------------------------------------------------------
// LMCache chunk object (MemoryFormat), W = H * D * e bytes per row:
//
//   kKV_2LTD  [2, L, T, W]   default: a whole chunk, all layers (one launch for all layers)
//   kKV_T2D   [T, 2, W]      layerwise: one layer of one chunk, token-major
//   kKV_2TD   [2, T, W]      layerwise + blending: one layer, K block then V block
//   kKV_MLA   [1, L, T, W]   MLA models (W = D * e); layerwise objects use L = 1
//
// Offsets (bytes):
//   kKV_2LTD  ((kv * L + l) * T + t) * W
//   kKV_T2D   (t * 2 + kv) * W                           (L == 1)
//   kKV_2TD   (kv * T + t) * W                           (L == 1)
//   kKV_MLA   (l * T + t) * W                            (kv == 0)
// A chunk holding fewer tokens than the chunk size (the last chunk of a prompt) is its own,
// smaller object: T is the number of tokens it holds, as in LMCache.
// ---------------------------------------------------------------------------------------------
enum class ChunkFormat : uint8_t { kKV_2LTD, kKV_T2D, kKV_2TD, kKV_MLA };
std::string_view chunk_format_name(ChunkFormat format);

struct ChunkLayout {
  ChunkFormat format = ChunkFormat::kKV_2LTD;
  int32_t num_layers = 0;
  int64_t num_tokens = 0;
  int64_t row_bytes = 0;

  KVTWIN_HD int num_kv() const { return format == ChunkFormat::kKV_MLA ? 1 : 2; }
  KVTWIN_HD int64_t total_bytes() const { return num_kv() * num_layers * num_tokens * row_bytes; }

  KVTWIN_HD int64_t offset_bytes(int kv, int layer, int64_t token) const {
    const int64_t L = num_layers;
    const int64_t T = num_tokens;
    switch (format) {
      case ChunkFormat::kKV_2LTD:
        return ((kv * L + layer) * T + token) * row_bytes;
      case ChunkFormat::kKV_T2D:
        return (token * 2 + kv) * row_bytes;
      case ChunkFormat::kKV_2TD:
        return (kv * T + token) * row_bytes;
      case ChunkFormat::kKV_MLA:
        return (layer * T + token) * row_bytes;
    }
    return -1;  // unreachable
  }
};

// True when the chunk format can hold the paged layout's data: kKV_MLA with kMLA only;
// kKV_T2D and kKV_2TD hold one layer (num_layers == 1).
bool formats_compatible(PagedKind kind, ChunkFormat format, int num_layers);

// The chunk object of `num_tokens` tokens and `num_layers` layers for this paged layout.
ChunkLayout chunk_layout_for(const PagedLayout& paged, ChunkFormat format, int num_layers,
                             int64_t num_tokens);

// Which way a copy goes. kPagedToChunk gathers (LMCache's store, "from_gpu");
// kChunkToPaged scatters (retrieve, "to_gpu").
enum class CopyDirection : uint8_t { kPagedToChunk, kChunkToPaged };
std::string_view copy_direction_name(CopyDirection direction);

// One copy between a paged cache and a batch of consecutive chunk objects.
//
//   tokens:  |<- chunk 0: T ->|<- chunk 1: T ->| ... |<- last: <= T ->|
//   slots:   slots[i] = paged slot of token i, or < 0 to skip the token (its chunk bytes are
//            neither read nor written)
//   chunk c: holds tokens [c*T, min((c+1)*T, num_tokens)), laid out with its own token count
//
// Pointers are as the executor sees them: host pointers for the CPU reference and the host plan
// executor; for the GPU launcher `layers` and `slots` are device arrays and `chunks` is a host
// array of device-visible pointers (device memory or the device alias of mapped pinned memory).
struct KvCopyRequest {
  PagedLayout paged;
  ChunkFormat format = ChunkFormat::kKV_2LTD;
  int32_t num_layers = 1;  // layers in each chunk object; layers[l] is chunk layer l
  uint8_t* const* layers = nullptr;
  uint64_t layer_address_bits = 0;  // OR of all layers[l] addresses (their common alignment)
  const int64_t* slots = nullptr;
  int64_t num_tokens = 0;
  int64_t tokens_per_chunk = 0;      // T of every chunk but the last
  uint8_t* const* chunks = nullptr;  // [num_chunks()]
  CopyDirection direction = CopyDirection::kPagedToChunk;

  int64_t num_chunks() const {
    return tokens_per_chunk > 0 ? (num_tokens + tokens_per_chunk - 1) / tokens_per_chunk : 0;
  }
  int64_t chunk_tokens(int64_t c) const {
    const int64_t left = num_tokens - c * tokens_per_chunk;
    return left < tokens_per_chunk ? left : tokens_per_chunk;
  }
  ChunkLayout chunk_layout(int64_t c) const {
    return chunk_layout_for(paged, format, num_layers, chunk_tokens(c));
  }
};

}  // namespace kvtwin::cuda
