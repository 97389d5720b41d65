// KvCacheLayout: vLLM's KV-cache configuration for one instance, derived from the scenario the
// way vLLM's worker derives it (vllm/v1/core/kv_cache_utils.py get_kv_cache_groups and
// get_kv_cache_config_from_groups), plus the byte sizes the simulator needs.
//
//   1. One spec per layer (per tensor-parallel rank):
//        F  full attention (MLA: one latent "head" of kv_lora_rank + qk_rope_head_dim)
//        S  sliding window; full attention when LMCache is on and F layers are there too (a KV
//           connector turns vLLM's hybrid manager off, and unify_hybrid_kv_cache_specs converts
//           the specs: one group)
//        M  Mamba-2 state: one block holds a whole state; attention block_size grows to the
//           smallest multiple of the kernel alignment a (16; 64 for MLA; 32 for head size 256
//           on compute capability 10) whose page holds a state — with mamba_cache_mode "all",
//           to a multiple of lcm(model.mamba_chunk_size, a) — and the Mamba page is padded to
//           the attention page (vLLM's HybridAttentionMambaModelConfig). The Mamba block is
//           max_model_len tokens in mode "none" (forced when prefix caching is off), the
//           attention block in "align", the chunk-aligned size in "all"
//        MLA: block_size (after any Mamba growth) is forced by vLLM's default MLA backend
//           (platforms/cuda.py): on
//           compute capability 9.x (FlashMLA) to 64 unless a multiple of 64; on 10.x
//           FlashInfer-MLA (head size 128) to 64 unless 32 or a multiple of 64, CUTLASS-MLA
//           (otherwise) to 128 unless a multiple of 128; elsewhere kept
//        encoder-decoder: each decoder layer also has a cross-attention layer
//   2. Every layer the same spec → one group. Otherwise page sizes are unified (a smaller page's
//      block_size is multiplied up to the largest page) and layers are split into groups of equal
//      size: group_size = the fewest layers of any spec (the most, when max < 1.25 · min); each
//      spec's layers are dealt round-robin into ceil(n / group_size) groups.
//   3. num_blocks = available bytes // page size // layers per group, where available bytes =
//      memory_gb · gpu_memory_utilization − weights per GPU − activation_reserve_gb, unless
//      vllm.num_gpu_blocks overrides it (vLLM's num_gpu_blocks_override).
//   4. vLLM's start-up check, on the available bytes (not the override): one request of
//      max_model_len tokens must fit, sized as upstream sizes it — group_size · page · the pages
//      the FIRST group's spec needs (full: cdiv(max_model_len, block_size); sliding window:
//      cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1; Mamba
//      none / align: 1 / 2; ...). A hybrid whose first layer is sliding-window is thus checked
//      by its sliding group alone, as upstream does.
//
// Throws InputError citing vllm.gpu_memory_utilization when no block fits or no memory is left,
// and vllm.max_model_len (with upstream's estimate of the longest length that fits) when the
// start-up check fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/vllm/kv_cache_interface.h"
#include "sim/hw/model_geometry.h"
#include "sim/scenario/scenario.h"

namespace kvtwin::sim::engine {

struct KvCacheLayout {
  model::vllm::KVCacheConfig config;
  int64_t page_bytes = 0;         // bytes of one block of one layer (per rank), after unification
  int layers_per_group = 0;       // layers sharing one block id
  int64_t block_bytes = 0;        // page_bytes · layers_per_group: one block id's memory per rank
  int hash_block_size = 16;       // block size of request hashing (smallest group block size)
  int attention_block_size = 16;  // block size of the attention groups
  double available_bytes = 0;     // KV memory per rank before division into blocks
  // scenario::effective_enable_prefix_caching (a Mamba hybrid with caching on never runs mode
  // "none": effective_mamba_cache_mode).
  bool enable_caching = true;

  int64_t num_blocks() const { return config.num_blocks; }
  // What vLLM logs as its "GPU KV cache size" (get_max_concurrency_for_kv_cache_config): every
  // request takes blocks in every group, so the blocks over the groups, times the smallest
  // block size.
  int64_t kv_cache_tokens() const {
    return num_blocks() / static_cast<int64_t>(config.kv_cache_groups.size()) * hash_block_size;
  }
};

// Most GPU blocks one instance may have, and all instances together: each block costs the
// simulator about 160 bytes (block record, prefix-cache index, free queue), so these bound its
// memory near 2.5 GiB and 10 GiB — far above any real GPU (an H200 holds ~70 k blocks of
// Llama-3.1-8B).
inline constexpr int64_t kMaxGpuBlocksPerInstance = int64_t{1} << 24;
inline constexpr int64_t kMaxGpuBlocksTotal = int64_t{1} << 26;

// Throws InputError (naming the scenario key that sets the count) when no block fits, when more
// than kMaxGpuBlocksPerInstance would, or when vLLM's start-up check (step 4 above) fails; and,
// as vLLM refuses to start, for Mamba cache mode "align" without chunked prefill, with a block
// larger than max_num_batched_tokens or with a long_prefill_token_threshold in (0, block).
KvCacheLayout derive_kv_cache_layout(const scenario::Scenario& s, const hw::ModelGeometry& g);

// The Mamba cache mode vLLM runs with (MambaModelConfig.verify_and_update_config): "none"
// whenever prefix caching is off (scenario::effective_enable_prefix_caching: a hybrid's default
// is off); with it on, vllm.mamba_cache_mode, but "none" becomes "all" (vLLM's choice for models
// that support Mamba prefix caching, as the Mamba-2 layers kvtwin models do).
model::vllm::MambaCacheMode effective_mamba_cache_mode(const scenario::Scenario& s);

}  // namespace kvtwin::sim::engine
