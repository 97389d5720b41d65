// KVCacheBlock: the metadata of one KV-cache block (vLLM's kv_cache_utils.KVCacheBlock).
//
// Blocks live in BlockPool::blocks(), indexed by BlockId (0 .. num_gpu_blocks-1); everything
// else refers to them by id. Block 0 is the null block: popped from the free queue when the pool
// is built, used as a placeholder for skipped positions (sliding window, Mamba), never cached and
// never freed. Its ref_cnt is not maintained by vLLM (touches of null-padded hits raise it, frees
// of tables holding it lower it), so it drifts, possibly below zero; we reproduce the drift.
//
// The free-queue links of upstream's block (prev_free_block / next_free_block) have no field
// here: FreeKVCacheBlockQueue keeps the queue order in its own ring of block ids. Nor has its
// ref_cnt: BlockPool keeps the reference counts in a dense array beside the blocks
// (BlockPool::ref_cnt), so that freeing or touching a request's table walks 4 bytes per block
// instead of a cache line.
#pragma once

#include <cstdint>

#include "model/vllm/block_hash_with_group_id.h"

namespace kvtwin::model::vllm {

using BlockId = int32_t;
inline constexpr BlockId kNoBlock = -1;

// One cache line per block (64-byte aligned, so that a block never straddles two lines: a
// prefix-cache lookup, an eviction or a free touches one line of the pool).
struct alignas(64) KVCacheBlock {
  BlockId block_id = kNoBlock;
  // The prefix-cache key, set while the block is full and cached; empty = None.
  // A block has a key iff BlockPool's hash map lists it under that key.
  BlockHashWithGroupId block_hash;
  bool is_null = false;
};
static_assert(sizeof(KVCacheBlock) == 64, "KVCacheBlock should fill exactly one cache line");

}  // namespace kvtwin::model::vllm
