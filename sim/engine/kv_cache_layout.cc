#include "sim/engine/kv_cache_layout.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>

#include "model/vllm/math_utils.h"
#include "sim/io/input_error.h"
#include "sim/scenario/scenario_loader.h"

namespace kvtwin::sim::engine {
namespace {

using model::vllm::KVCacheGroupSpec;
using model::vllm::KVCacheSpec;
using model::vllm::KVCacheSpecKind;

using scenario::kGiB;

struct LayerSpec {
  std::string name;
  KVCacheSpec spec;
  int64_t page_bytes = 0;
};

std::string kv_dtype_name(const hw::ModelGeometry& g) {
  return g.kv_bytes == 1 ? "fp8" : g.kv_bytes == 4 ? "float32" : "bfloat16";
}

// The largest block the simulator takes (a Mamba state can ask for more).
constexpr int64_t kMaxBlockTokens = int64_t{1} << 24;

// The block size vLLM's default MLA backend forces (CudaPlatform.check_and_update_config).
int mla_block_size(const scenario::Scenario& s, int block_size) {
  if (s.gpu.capability_major() == 9) return block_size % 64 != 0 ? 64 : block_size;  // FlashMLA
  if (s.gpu.capability_major() == 10) {
    if (s.model.head_size == 128)  // FlashInfer-MLA (qk_nope_head_dim 128)
      return block_size != 32 && block_size % 64 != 0 ? 64 : block_size;
    return block_size % 128 != 0 ? 128 : block_size;  // CUTLASS-MLA
  }
  return block_size;
}

// Step 1: one spec per layer.
std::vector<LayerSpec> layer_specs(const scenario::Scenario& s, const hw::ModelGeometry& g,
                                   model::vllm::MambaCacheMode mamba_mode,
                                   int* attention_block_size) {
  using model::vllm::cdiv;
  using model::vllm::MambaCacheMode;
  const int tp = g.tp;
  const int kv_heads = g.mla ? 1 : std::max(1, s.model.num_kv_heads / tp);
  const int head_size = g.mla ? s.model.kv_lora_rank + s.model.qk_rope_head_dim : g.head_size;
  const int64_t attn_bytes_per_token = g.kv_bytes_per_token_per_layer;
  // vLLM grows the block for Mamba first (HybridAttentionMambaModelConfig), then the platform
  // forces the MLA backend's size (CudaPlatform.check_and_update_config).
  int block_size = s.vllm.block_size;
  int64_t mamba_block = s.vllm.max_model_len;  // mode "none": one block holds the only state
  if (g.num_mamba_layers > 0) {
    // The attention page must hold one Mamba state, in blocks of the kernel's alignment.
    const int64_t align = g.mla                                                  ? 64
                          : s.gpu.capability_major() == 10 && g.head_size == 256 ? 32
                                                                                 : 16;
    const int64_t state = g.mamba_state_bytes_per_layer;
    int64_t attn_block;
    if (mamba_mode == MambaCacheMode::kAll) {
      const int64_t chunk = std::lcm(int64_t{s.model.mamba_chunk_size}, align);
      attn_block = chunk * cdiv(cdiv(state, attn_bytes_per_token), chunk);
      mamba_block = attn_block;
      if (attn_block < block_size)
        scenario::scenario_error(s, "vllm.block_size",
                                 "with vllm.mamba_cache_mode = \"all\" vLLM's Mamba block is " +
                                     std::to_string(attn_block) +
                                     " tokens, smaller than the attention block: kvtwin does not "
                                     "model blocks of two sizes; lower vllm.block_size");
    } else {
      attn_block = align * cdiv(state, align * attn_bytes_per_token);
    }
    if (attn_block > kMaxBlockTokens)
      scenario::scenario_error(s, "model.mamba_state_size",
                               "one Mamba state needs an attention block of " +
                                   std::to_string(attn_block) + " tokens; kvtwin holds at most " +
                                   std::to_string(kMaxBlockTokens));
    block_size = static_cast<int>(std::max<int64_t>(block_size, attn_block));
    if (mamba_mode == MambaCacheMode::kAlign) mamba_block = block_size;
  }
  if (g.mla) block_size = mla_block_size(s, block_size);
  if (g.num_mamba_layers > 0 && mamba_mode != MambaCacheMode::kNone && mamba_block != block_size)
    scenario::scenario_error(s, "gpu.compute_capability",
                             "vLLM's MLA backend forces a block of " + std::to_string(block_size) +
                                 " tokens, unlike the Mamba block of " +
                                 std::to_string(mamba_block) +
                                 ": kvtwin does not model blocks of two sizes");
  *attention_block_size = block_size;
  const int64_t attn_page = int64_t{block_size} * attn_bytes_per_token;
  std::vector<LayerSpec> out;
  for (int i = 0; i < g.num_layers; ++i) {
    LayerSpec l;
    l.name = "layers." + std::to_string(i);
    KVCacheSpec& spec = l.spec;
    spec.block_size = block_size;
    spec.num_kv_heads = kv_heads;
    spec.head_size = head_size;
    spec.dtype = kv_dtype_name(g);
    switch (g.layers[static_cast<size_t>(i)]) {
      case hw::LayerKind::kFull:
        spec.kind = g.mla ? KVCacheSpecKind::kMLAAttention : KVCacheSpecKind::kFullAttention;
        l.page_bytes = attn_page;
        break;
      case hw::LayerKind::kSliding:
        // A KV connector (LMCache) turns vLLM's hybrid manager off, and unify_hybrid_kv_cache_
        // specs makes sliding-window layers full attention when full-attention layers are there
        // too: blocks for every token (the attention itself stays windowed).
        if (s.lmcache.enabled && g.num_full_layers > 0) {
          spec.kind = g.mla ? KVCacheSpecKind::kMLAAttention : KVCacheSpecKind::kFullAttention;
        } else {
          spec.kind = KVCacheSpecKind::kSlidingWindow;
          spec.sliding_window = s.model.sliding_window;
        }
        l.page_bytes = attn_page;
        break;
      case hw::LayerKind::kMamba: {
        spec.kind = KVCacheSpecKind::kMamba;
        spec.num_kv_heads = 0;
        spec.head_size = 0;
        spec.mamba_cache_mode = mamba_mode;
        spec.block_size = static_cast<int>(mamba_block);
        l.page_bytes = attn_page;  // padded to the attention page
        break;
      }
    }
    out.push_back(l);
    if (g.encoder_layers > 0) {
      LayerSpec c = l;
      c.name = "layers." + std::to_string(i) + ".cross";
      c.spec.kind = KVCacheSpecKind::kCrossAttention;
      c.page_bytes = attn_page;
      out.push_back(c);
    }
  }
  return out;
}

// KVCacheSpec.max_memory_usage_bytes of one layer, in pages (every page has page_bytes after
// unification, so upstream's cdiv(bytes, page_size) is this count): the most KV one request of
// max_model_len tokens can hold in that layer.
//   full / MLA / sink   cdiv(max_model_len, block_size)
//   sliding window      cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), bs) + 1
//   chunked local       cdiv(min(chunk + max_num_batched_tokens, max_model_len), bs)
//   Mamba               all: cdiv(max_model_len, bs); align: 2; none: 1 (+ speculative blocks)
//   cross attention     cdiv(encoder input tokens, bs)
int64_t max_pages_per_request(const KVCacheSpec& spec, int64_t max_model_len,
                              const scenario::Scenario& s) {
  using model::vllm::cdiv;
  const int64_t bs = spec.block_size;
  const int64_t batched = scenario::effective_max_num_batched_tokens(s);
  switch (spec.kind) {
    case KVCacheSpecKind::kFullAttention:
    case KVCacheSpecKind::kMLAAttention:
    case KVCacheSpecKind::kSinkFullAttention:
      return cdiv(max_model_len, bs);
    case KVCacheSpecKind::kSlidingWindow:
      return cdiv(std::min(spec.sliding_window - 1 + batched, max_model_len), bs) + 1;
    case KVCacheSpecKind::kChunkedLocalAttention:
      return cdiv(std::min(spec.attention_chunk_size + batched, max_model_len), bs);
    case KVCacheSpecKind::kMamba:
      switch (spec.mamba_cache_mode) {
        case model::vllm::MambaCacheMode::kAll:
          return cdiv(max_model_len, bs);
        case model::vllm::MambaCacheMode::kAlign:
          return 2 + spec.num_speculative_blocks;
        case model::vllm::MambaCacheMode::kNone:
          return 1 + spec.num_speculative_blocks;
      }
      break;
    case KVCacheSpecKind::kCrossAttention:
      return cdiv(s.model.encoder_tokens, bs);
  }
  return 0;
}

// _max_memory_usage_bytes_from_groups: group_size · page · the pages the FIRST group's spec needs
// (upstream sizes every group by groups[0], whatever the other groups' kinds). group_size · page
// is one block id's memory, layout.block_bytes.
int64_t needed_kv_bytes(const KvCacheLayout& layout, int64_t max_model_len,
                        const scenario::Scenario& s) {
  const auto& groups = layout.config.kv_cache_groups;
  if (groups.empty()) return 0;
  return layout.block_bytes * max_pages_per_request(groups.front().kv_cache_spec, max_model_len, s);
}

// vLLM's start-up check (_check_enough_kv_cache_memory, run on the memory left for KV whether or
// not num_gpu_blocks_override is set): the KV cache must hold one request of max_model_len
// tokens, or the engine refuses to start. The message gives upstream's estimate of the longest
// model length that fits (a binary search over 1 .. max_model_len).
void check_enough_kv_cache_memory(const KvCacheLayout& layout, const scenario::Scenario& s) {
  if (layout.config.kv_cache_groups.empty()) return;
  const double available = layout.available_bytes;
  if (available <= 0)
    scenario::scenario_error(s, "vllm.gpu_memory_utilization",
                             "no memory is left for the KV cache (weights need more than "
                             "gpu.memory_gb · vllm.gpu_memory_utilization - "
                             "vllm.activation_reserve_gb): vLLM refuses to start");
  const int64_t max_len = s.vllm.max_model_len;
  auto fits = [&](int64_t len) {
    return static_cast<double>(needed_kv_bytes(layout, len, s)) <= available;
  };
  if (fits(max_len)) return;
  int64_t estimate = 0;
  if (fits(1)) {
    int64_t lo = 1, hi = max_len;
    estimate = 1;
    while (lo <= hi) {
      int64_t mid = (lo + hi) / 2;
      if (fits(mid)) {
        estimate = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "one request of %lld tokens needs %.2f GiB of KV cache but %.2f GiB are left "
                "for it (the longest model length that fits is %lld): vLLM refuses to start; "
                "lower vllm.max_model_len or give the KV cache more memory",
                static_cast<long long>(max_len),
                static_cast<double>(needed_kv_bytes(layout, max_len, s)) / kGiB, available / kGiB,
                static_cast<long long>(estimate));
  scenario::scenario_error(s, "vllm.max_model_len", buf);
}

// The constraints vLLM asserts for Mamba cache mode "align" (MambaModelConfig and
// VllmConfig.__post_init__, after the block size has grown to hold a state).
void check_mamba_align(const KvCacheLayout& layout, const scenario::Scenario& s) {
  const int bs = layout.attention_block_size;
  if (!s.vllm.enable_chunked_prefill)
    scenario::scenario_error(s, "vllm.enable_chunked_prefill",
                             "vLLM needs chunked prefill for vllm.mamba_cache_mode = \"align\"");
  const int budget = scenario::effective_max_num_batched_tokens(s);
  if (bs > budget)
    scenario::scenario_error(
        s, "vllm.max_num_batched_tokens",
        "with vllm.mamba_cache_mode = \"align\" vLLM needs the block (" + std::to_string(bs) +
            " tokens, grown to hold a Mamba state) <= vllm.max_num_batched_tokens (" +
            std::to_string(budget) + ")");
  if (s.vllm.long_prefill_token_threshold > 0 && s.vllm.long_prefill_token_threshold < bs)
    scenario::scenario_error(
        s, "vllm.long_prefill_token_threshold",
        "with vllm.mamba_cache_mode = \"align\" vLLM needs long_prefill_token_threshold 0 or >= "
        "the block (" +
            std::to_string(bs) + " tokens, grown to hold a Mamba state)");
}

}  // namespace

model::vllm::MambaCacheMode effective_mamba_cache_mode(const scenario::Scenario& s) {
  if (!scenario::effective_enable_prefix_caching(s)) return model::vllm::MambaCacheMode::kNone;
  const model::vllm::MambaCacheMode mode =
      *model::vllm::mamba_cache_mode_from_name(s.vllm.mamba_cache_mode);
  return mode == model::vllm::MambaCacheMode::kNone ? model::vllm::MambaCacheMode::kAll : mode;
}

KvCacheLayout derive_kv_cache_layout(const scenario::Scenario& s, const hw::ModelGeometry& g) {
  KvCacheLayout layout;
  const model::vllm::MambaCacheMode mamba_mode = effective_mamba_cache_mode(s);
  std::vector<LayerSpec> layers = layer_specs(s, g, mamba_mode, &layout.attention_block_size);
  if (g.num_mamba_layers > 0 && mamba_mode == model::vllm::MambaCacheMode::kAlign)
    check_mamba_align(layout, s);

  // Step 2: groups. Layers with equal specs, in first-appearance order.
  std::vector<std::pair<KVCacheSpec, std::vector<size_t>>> by_spec;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto it = std::find_if(by_spec.begin(), by_spec.end(),
                           [&](const auto& e) { return e.first == layers[i].spec; });
    if (it == by_spec.end())
      by_spec.push_back({layers[i].spec, {i}});
    else
      it->second.push_back(i);
  }
  int64_t page = 0;
  for (const LayerSpec& l : layers) page = std::max(page, l.page_bytes);
  layout.page_bytes = page;
  std::vector<std::vector<size_t>> grouped;
  if (by_spec.size() == 1) {
    grouped.push_back(by_spec[0].second);
    layout.layers_per_group = static_cast<int>(layers.size());
  } else {
    size_t min_n = SIZE_MAX, max_n = 0;
    for (const auto& e : by_spec) {
      min_n = std::min(min_n, e.second.size());
      max_n = std::max(max_n, e.second.size());
    }
    size_t group_size =
        static_cast<double>(max_n) < 1.25 * static_cast<double>(min_n) ? max_n : min_n;
    for (const auto& e : by_spec) {
      size_t n = (e.second.size() + group_size - 1) / group_size;
      for (size_t i = 0; i < n; ++i) {
        std::vector<size_t> members;
        for (size_t j = i; j < e.second.size(); j += n) members.push_back(e.second[j]);
        grouped.push_back(members);
      }
    }
    layout.layers_per_group = static_cast<int>(group_size);
  }
  int min_block = INT32_MAX;
  for (const auto& members : grouped) {
    KVCacheGroupSpec group;
    for (size_t i : members) group.layer_names.push_back(layers[i].name);
    group.kv_cache_spec = layers[members.front()].spec;
    // Page-size unification: a smaller page's block_size grows by the ratio (only Mamba pages
    // differ here, and they are padded instead).
    layout.config.kv_cache_groups.push_back(group);
    min_block = std::min(min_block, group.kv_cache_spec.block_size);
  }
  layout.hash_block_size = min_block;
  layout.enable_caching = scenario::effective_enable_prefix_caching(s);
  layout.block_bytes = layout.page_bytes * layout.layers_per_group;

  // Step 3: number of blocks.
  layout.available_bytes = s.gpu.memory_gb * kGiB * s.vllm.gpu_memory_utilization -
                           g.weight_bytes_per_rank() - s.vllm.activation_reserve_gb * kGiB;
  if (s.vllm.num_gpu_blocks == 1)
    scenario::scenario_error(s, "vllm.num_gpu_blocks",
                             "at least 2 blocks are needed (vLLM keeps one as its null block)");
  int64_t blocks = s.vllm.num_gpu_blocks > 0
                       ? s.vllm.num_gpu_blocks
                       : static_cast<int64_t>(std::max(0.0, layout.available_bytes) /
                                              static_cast<double>(layout.block_bytes));
  if (blocks < 2)
    scenario::scenario_error(s, "vllm.gpu_memory_utilization",
                             "no KV block fits: weights need " +
                                 std::to_string(g.weight_bytes_per_rank() / kGiB) +
                                 " GiB per GPU and activations vllm.activation_reserve_gb; raise "
                                 "gpu.memory_gb or gpu.tensor_parallel, or set "
                                 "vllm.num_gpu_blocks");
  check_enough_kv_cache_memory(layout, s);
  if (blocks > kMaxGpuBlocksPerInstance)
    scenario::scenario_error(s, s.vllm.num_gpu_blocks > 0 ? "vllm.num_gpu_blocks" : "gpu.memory_gb",
                             std::to_string(blocks) +
                                 " GPU blocks per instance; the simulator holds at most " +
                                 std::to_string(kMaxGpuBlocksPerInstance));
  layout.config.num_blocks = static_cast<int>(blocks);
  return layout;
}

}  // namespace kvtwin::sim::engine
