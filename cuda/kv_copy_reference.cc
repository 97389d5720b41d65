#include "cuda/kv_copy_reference.h"

#include <cstring>

#include "cuda/kv_copy_plan.h"
#include "model/check.h"

namespace kvtwin::cuda {

void kv_copy_reference(const KvCopyRequest& req) {
  const std::string error = kv_copy_request_error(req);
  KVTWIN_CHECK(error.empty()) << error;
  const PagedLayout& paged = req.paged;
  const int64_t head_bytes = paged.head_bytes();
  for (int64_t c = 0; c < req.num_chunks(); ++c) {
    const ChunkLayout chunk = req.chunk_layout(c);
    for (int kv = 0; kv < chunk.num_kv(); ++kv) {
      for (int l = 0; l < chunk.num_layers; ++l) {
        for (int64_t t = 0; t < chunk.num_tokens; ++t) {
          const int64_t slot = req.slots[c * req.tokens_per_chunk + t];
          if (slot < 0) continue;
          KVTWIN_CHECK_LT(slot, paged.num_slots()) << "slot out of range";
          for (int h = 0; h < paged.num_heads; ++h) {
            uint8_t* p = req.layers[l] + paged.offset_bytes(kv, slot, h);
            uint8_t* o = req.chunks[c] + chunk.offset_bytes(kv, l, t) + h * head_bytes;
            if (req.direction == CopyDirection::kPagedToChunk) {
              std::memcpy(o, p, static_cast<size_t>(head_bytes));
            } else {
              std::memcpy(p, o, static_cast<size_t>(head_bytes));
            }
          }
        }
      }
    }
  }
}

}  // namespace kvtwin::cuda
