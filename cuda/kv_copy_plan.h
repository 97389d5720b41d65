// KvCopyPlan: the index math of the GPU copy kernels, as a plain struct that runs on the host
// too, so the mapping of every kernel thread to bytes is tested on the CPU (no GPU in CI).
//
// A request (kv_layout.h) is cut into units: `vec_bytes`-wide words (16 when every address and the
// run length allow, down to 1 byte). Units are numbered per chunk in the chunk object's own memory
// order, so consecutive threads read or write consecutive chunk bytes (coalesced, streaming):
//
//   chunk c, row-major:   (kv, layer, token, seg, word)     KV_2LTD, KV_2TD, KV_MLA
//   chunk c, token-major: (token, kv, seg, word)            KV_T2D
//   seg  = one contiguous run in the paged buffer: a token's whole row (H*D*e bytes), or one head
//          (D*e bytes) for HND, where heads are block_size*D apart
//   unit u -> chunk offset  u_row * seg_bytes + word * vec_bytes   (u_row = u / words_per_seg)
//          -> paged offset  layers[layer] + offset_bytes(kv, slot, head) + word * vec_bytes
//
// A launch covers up to kMaxChunksPerLaunch chunks (their pointers travel by value in the kernel
// parameters, so no per-call upload races with the next call); the paged layers travel as a
// device array, uploaded once per cache. Larger batches become several plans.
//
// Invariants (make_kv_copy_plans checks them): units per chunk < kMaxUnitsPerChunk, so every
// numerator the FastDivmods see is below 2^31; vec_bytes divides seg_bytes and the address of every
// layer and chunk base.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/fast_divmod.h"
#include "cuda/host_device.h"
#include "cuda/kv_layout.h"

namespace kvtwin::cuda {

inline constexpr int kMaxChunksPerLaunch = 128;
inline constexpr uint32_t kMaxUnitsPerChunk = (1u << 31) - (1u << 20);

// Where one unit's bytes are: layers[layer] + paged_offset and chunks[c] + chunk_offset.
struct UnitAddress {
  uint32_t layer = 0;
  int64_t paged_offset = 0;
  int64_t chunk_offset = 0;
};

struct KvCopyPlan {
  PagedLayout paged;
  uint8_t* const* layers = nullptr;  // [num layers of the chunk format]
  const int64_t* slots = nullptr;    // slot of this plan's first token
  int64_t tokens_per_chunk = 0;
  uint32_t num_chunks = 0;
  uint32_t vec_bytes = 1;  // bytes per unit: 16, 8, 4, 2 or 1
  uint32_t seg_bytes = 0;  // bytes of one contiguous paged run
  bool token_major = false;
  FastDivmod units_per_seg;   // seg_bytes / vec_bytes
  FastDivmod segs_per_token;  // 1, or num_heads for HND
  FastDivmod kv_div;          // num_kv (token-major rows)
  FastDivmod tokens_full;     // tokens_per_chunk
  FastDivmod tokens_last;     // tokens of the plan's last chunk
  FastDivmod layers_div;      // layers in the chunk format
  uint32_t units_full = 0;    // units of a full chunk
  uint32_t units_last = 0;    // units of the plan's last chunk
  uint8_t* chunks[kMaxChunksPerLaunch] = {};

  KVTWIN_HD uint32_t chunk_units(uint32_t c) const {
    return c + 1 == num_chunks ? units_last : units_full;
  }

  // Fills `a` with unit u of chunk c and returns true, or returns false when the unit's token is
  // skipped (slot < 0) or its slot lies outside the paged buffer (a caller bug the kernel refuses
  // to turn into an out-of-bounds write; the host paths check slots before they get here).
  // REQUIRES: c < num_chunks, u < chunk_units(c).
  KVTWIN_HD bool locate(uint32_t c, uint32_t u, UnitAddress& a) const {
    uint32_t seg_row, word, row, head, kv, layer, token;
    units_per_seg.divmod(u, seg_row, word);
    segs_per_token.divmod(seg_row, row, head);
    if (token_major) {
      kv_div.divmod(row, token, kv);  // row = token * num_kv + kv
      layer = 0;
    } else {
      uint32_t plane;  // row = plane * T_c + token, plane = kv * L + layer
      (c + 1 == num_chunks ? tokens_last : tokens_full).divmod(row, plane, token);
      layers_div.divmod(plane, kv, layer);
    }
    const int64_t slot = slots[int64_t{c} * tokens_per_chunk + token];
    if (slot < 0 || slot >= paged.num_slots()) return false;
    const int64_t word_offset = int64_t{word} * vec_bytes;
    a.layer = layer;
    a.paged_offset =
        paged.offset_bytes(static_cast<int>(kv), slot, static_cast<int>(head)) + word_offset;
    a.chunk_offset = int64_t{seg_row} * seg_bytes + word_offset;
    return true;
  }
};

// Why `req` cannot be performed (empty when it can): sizes, pointers, format compatibility, and
// the launch limits above. Slot values are not read (they may live on the device).
std::string kv_copy_request_error(const KvCopyRequest& req);

// The unit width for `req`: the largest of 16, 8, 4, 2, 1 bytes dividing the run length and the
// address of every layer and chunk base (16-byte vector accesses when alignment allows).
uint32_t kv_copy_vector_bytes(const KvCopyRequest& req);

// The plans (one per kernel launch) that together perform `req`.
// REQUIRES (KVTWIN_CHECK): kv_copy_request_error(req) is empty.
std::vector<KvCopyPlan> make_kv_copy_plans(const KvCopyRequest& req);

// Runs one plan on the CPU exactly as the kernel maps it: every unit of every chunk, one
// vec_bytes memcpy each. Checks (KVTWIN_CHECK) that both addresses of every unit are vec_bytes
// aligned. Host pointers only.
void execute_kv_copy_plan_on_host(const KvCopyPlan& plan, CopyDirection direction);

}  // namespace kvtwin::cuda
