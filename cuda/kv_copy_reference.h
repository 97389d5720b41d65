// The CPU reference of every paged <-> chunk transform: plain loops over (chunk, kv, layer,
// token, head) that copy one head's bytes at a time through the layout structs' offset math
// (kv_layout.h). It is the oracle the GPU kernels are checked against, so it is written for
// obviousness, not speed; its own tests compare it with an independent index model.
//
// Threading: none; the caller owns every buffer.
#pragma once

#include "cuda/kv_layout.h"

namespace kvtwin::cuda {

// Performs `req` with host pointers. Tokens whose slot is negative are skipped: their chunk bytes
// are neither read nor written. Nothing outside the named bytes is touched.
// REQUIRES (KVTWIN_CHECK): kv_copy_request_error(req) is empty and every slot < num_slots.
void kv_copy_reference(const KvCopyRequest& req);

}  // namespace kvtwin::cuda
