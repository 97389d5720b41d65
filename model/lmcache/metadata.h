// LMCacheMetadata: the KV geometry of one worker (rank) as LMCache sees it (v1/metadata.py), and
// the object shapes and byte sizes derived from it.
//
//   kv_shape = (L, kv, chunk, H, D) with kv = 2 (1 for MLA) and H the KV heads *per rank*
//   (MLA: one head of D = the latent width, e.g. 576 for DeepSeek-V3).
//
//   chunk object (KV_2LTD / KV_MLA_FMT):  [kv, L, T, H*D]           get_shape(T)
//   layer object (KV_T2D):                [T, 2, H*D]               layer_shape(T, KV_T2D)
//   layer object (KV_2TD, blending):      [2, T, H*D]
//   layer object (MLA layerwise):         [T, D]
//
//   bytes = numel * itemsize, e.g. Llama-3.1-8B bf16 (L32, H8, D128): 128 KiB per token,
//   32 MiB per 256-token chunk, 1 MiB per layer object of a full chunk.
#pragma once

#include <cstdint>
#include <string>

#include "model/lmcache/dtype.h"
#include "model/lmcache/memory_format.h"

namespace kvtwin::model::lmcache {

struct LMCacheMetadata {
  std::string model_name;
  int world_size = 1;
  int worker_id = 0;
  int num_layers = 1;
  int num_kv_heads = 1;  // per rank; 1 for MLA
  int head_size = 1;
  KvDtype kv_dtype = KvDtype::kHalf;
  bool use_mla = false;
  int chunk_size = 256;

  int kv_size() const { return use_mla ? 1 : 2; }
  int64_t hidden_dim() const { return static_cast<int64_t>(num_kv_heads) * head_size; }
  bool is_first_rank() const { return worker_id == 0; }

  // get_shapes(num_tokens)[0]: [kv, L, T, H*D].
  Shape get_shape(int64_t num_tokens) const {
    return Shape{kv_size(), num_layers, num_tokens, hidden_dim()};
  }
  // The per-layer object shape of the layerwise GPU connectors.
  Shape layer_shape(int64_t num_tokens, MemoryFormat fmt) const {
    if (use_mla) return Shape{num_tokens, hidden_dim()};
    if (fmt == MemoryFormat::kKv2TD) return Shape{2, num_tokens, hidden_dim()};
    return Shape{num_tokens, 2, hidden_dim()};
  }
  int64_t shape_bytes(const Shape& s) const { return s.numel() * dtype_itemsize(kv_dtype); }
  int64_t bytes_per_token() const {
    return static_cast<int64_t>(kv_size()) * num_layers * hidden_dim() * dtype_itemsize(kv_dtype);
  }
};

}  // namespace kvtwin::model::lmcache
