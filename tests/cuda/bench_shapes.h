// Real model shapes for the kernel benchmarks (per tensor-parallel rank), bf16 KV.
//
//   model             layers  kv heads  head  block  chunk  bytes/token
//   Llama-3.1-8B        32       8       128    16    256    131,072 (128 KiB)
//   Llama-3.1-70B TP4   80       2       128    16    256     81,920 (80 KiB per rank)
//   DeepSeek-V3 (MLA)   61       1       576    64    256     70,272
//
// DeepSeek-V3 uses block size 64, as vLLM's FlashMLA backend requires.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/kv_layout.h"

namespace kvtwin::cuda::bench {

struct ModelShape {
  const char* name;
  PagedKind kind;
  int32_t layers;
  int32_t kv_heads;
  int32_t head_size;
  int32_t elem_bytes;
  int32_t block_size;
  int32_t chunk_tokens;

  ChunkFormat chunk_format() const {
    return kind == PagedKind::kMLA ? ChunkFormat::kKV_MLA : ChunkFormat::kKV_2LTD;
  }
  int64_t bytes_per_token() const {
    return int64_t{kind == PagedKind::kMLA ? 1 : 2} * layers * kv_heads * head_size * elem_bytes;
  }
};

inline const ModelShape kLlama8B{"llama3.1-8b", PagedKind::kNHD, 32, 8, 128, 2, 16, 256};
inline const ModelShape kLlama70BTp4{"llama3.1-70b-tp4", PagedKind::kNHD, 80, 2, 128, 2, 16, 256};
inline const ModelShape kDeepSeekV3{"deepseek-v3", PagedKind::kMLA, 61, 1, 576, 2, 64, 256};

inline const std::vector<int64_t> kTokenCounts = {256, 1024, 4096, 16384, 32768};

}  // namespace kvtwin::cuda::bench
