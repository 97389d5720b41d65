#include "cuda/kv_copy_plan.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "model/check.h"

namespace kvtwin::cuda {
namespace {

// Bytes of one contiguous paged run and the number of runs per token row.
int64_t seg_bytes_of(const PagedLayout& p) {
  return p.heads_contiguous() ? p.row_bytes() : p.head_bytes();
}
int64_t segs_per_token_of(const PagedLayout& p) {
  return p.heads_contiguous() ? 1 : p.num_heads;
}

int64_t units_of_chunk(const KvCopyRequest& req, int64_t tokens, uint32_t vec_bytes) {
  const int64_t rows = int64_t{req.format == ChunkFormat::kKV_MLA ? 1 : 2} * req.num_layers *
                       tokens * segs_per_token_of(req.paged);
  return rows * (seg_bytes_of(req.paged) / vec_bytes);
}

}  // namespace

std::string kv_copy_request_error(const KvCopyRequest& req) {
  std::ostringstream why;
  const PagedLayout& p = req.paged;
  if (p.num_blocks <= 0 || p.block_size <= 0 || p.num_heads <= 0 || p.head_size <= 0 ||
      p.elem_bytes <= 0 || p.block_div.divisor() != static_cast<uint32_t>(p.block_size)) {
    why << "paged layout not built by make_paged_layout";
  } else if (!formats_compatible(p.kind, req.format, req.num_layers)) {
    why << chunk_format_name(req.format) << " cannot hold " << paged_kind_name(p.kind) << " with "
        << req.num_layers << " layers";
  } else if (req.num_tokens < 0 || req.tokens_per_chunk <= 0) {
    why << "num_tokens " << req.num_tokens << ", tokens_per_chunk " << req.tokens_per_chunk;
  } else if (req.num_tokens > 0 && (!req.layers || !req.slots || !req.chunks)) {
    why << "null layers, slots or chunks";
  } else if (units_of_chunk(req, req.tokens_per_chunk, 1) >= kMaxUnitsPerChunk) {
    why << "a chunk of " << req.tokens_per_chunk << " tokens exceeds " << kMaxUnitsPerChunk
        << " bytes; use smaller chunks";
  } else {
    for (int64_t c = 0; c < req.num_chunks(); ++c) {
      if (!req.chunks[c]) {
        why << "chunk " << c << " is null";
        break;
      }
    }
  }
  return why.str();
}

uint32_t kv_copy_vector_bytes(const KvCopyRequest& req) {
  uint64_t bits = static_cast<uint64_t>(seg_bytes_of(req.paged)) | req.layer_address_bits;
  for (int64_t c = 0; c < req.num_chunks(); ++c) bits |= reinterpret_cast<uintptr_t>(req.chunks[c]);
  uint32_t vec = 16;
  while (vec > 1 && (bits & (vec - 1)) != 0) vec /= 2;
  return vec;
}

std::vector<KvCopyPlan> make_kv_copy_plans(const KvCopyRequest& req) {
  const std::string error = kv_copy_request_error(req);
  KVTWIN_CHECK(error.empty()) << error;
  const PagedLayout& p = req.paged;
  const uint32_t vec = kv_copy_vector_bytes(req);
  const int64_t seg = seg_bytes_of(p);
  std::vector<KvCopyPlan> plans;
  const int64_t num_chunks = req.num_chunks();
  for (int64_t first = 0; first < num_chunks; first += kMaxChunksPerLaunch) {
    const int64_t count = std::min<int64_t>(kMaxChunksPerLaunch, num_chunks - first);
    const int64_t last_tokens = req.chunk_tokens(first + count - 1);
    KvCopyPlan plan;
    plan.paged = p;
    plan.layers = req.layers;
    plan.slots = req.slots + first * req.tokens_per_chunk;
    plan.tokens_per_chunk = req.tokens_per_chunk;
    plan.num_chunks = static_cast<uint32_t>(count);
    plan.vec_bytes = vec;
    plan.seg_bytes = static_cast<uint32_t>(seg);
    plan.token_major = req.format == ChunkFormat::kKV_T2D;
    plan.units_per_seg = FastDivmod(static_cast<uint32_t>(seg / vec));
    plan.segs_per_token = FastDivmod(static_cast<uint32_t>(segs_per_token_of(p)));
    plan.kv_div = FastDivmod(req.format == ChunkFormat::kKV_MLA ? 1 : 2);
    plan.tokens_full = FastDivmod(static_cast<uint32_t>(req.tokens_per_chunk));
    plan.tokens_last = FastDivmod(static_cast<uint32_t>(last_tokens));
    plan.layers_div = FastDivmod(static_cast<uint32_t>(req.num_layers));
    plan.units_full = static_cast<uint32_t>(units_of_chunk(req, req.tokens_per_chunk, vec));
    plan.units_last = static_cast<uint32_t>(units_of_chunk(req, last_tokens, vec));
    for (int64_t i = 0; i < count; ++i) plan.chunks[i] = req.chunks[first + i];
    plans.push_back(plan);
  }
  return plans;
}

void execute_kv_copy_plan_on_host(const KvCopyPlan& plan, CopyDirection direction) {
  for (uint32_t c = 0; c < plan.num_chunks; ++c) {
    for (uint32_t u = 0; u < plan.chunk_units(c); ++u) {
      UnitAddress a;
      if (!plan.locate(c, u, a)) continue;
      uint8_t* paged = plan.layers[a.layer] + a.paged_offset;
      uint8_t* chunk = plan.chunks[c] + a.chunk_offset;
      KVTWIN_CHECK(reinterpret_cast<uintptr_t>(paged) % plan.vec_bytes == 0 &&
                   reinterpret_cast<uintptr_t>(chunk) % plan.vec_bytes == 0)
          << "unit " << u << " of chunk " << c << " is not " << plan.vec_bytes << "-byte aligned";
      if (direction == CopyDirection::kPagedToChunk) {
        std::memcpy(chunk, paged, plan.vec_bytes);
      } else {
        std::memcpy(paged, chunk, plan.vec_bytes);
      }
    }
  }
}

}  // namespace kvtwin::cuda
