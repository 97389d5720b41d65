// KV cache specs and configuration (vllm/v1/kv_cache_interface.py), reduced to what the KV-cache
// manager reads: the attention type of each KV cache group, its block size and the type's own
// parameters. Byte sizes (heads, head size, dtype) are kept because they take part in spec
// equality, which decides the hybrid coordinator's attention groups.
//
// Upstream's class hierarchy is flattened into one struct with a kind; is_full_attention()
// answers isinstance(spec, FullAttentionSpec), true for full, MLA and sink-full specs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtwin::model::vllm {

enum class KVCacheSpecKind {
  kFullAttention,          // FullAttentionSpec
  kMLAAttention,           // MLAAttentionSpec (a FullAttentionSpec)
  kSlidingWindow,          // SlidingWindowSpec
  kChunkedLocalAttention,  // ChunkedLocalAttentionSpec
  kMamba,                  // MambaSpec
  kCrossAttention,         // CrossAttentionSpec
  kSinkFullAttention,      // SinkFullAttentionSpec (a FullAttentionSpec)
};

enum class MambaCacheMode { kNone, kAlign, kAll };

std::optional<MambaCacheMode> mamba_cache_mode_from_name(std::string_view name);

struct KVCacheSpec {
  KVCacheSpecKind kind = KVCacheSpecKind::kFullAttention;
  int block_size = 16;
  // Attention specs.
  int num_kv_heads = 0;
  int head_size = 0;
  std::string dtype;
  int sliding_window = 0;        // kSlidingWindow
  int attention_chunk_size = 0;  // kChunkedLocalAttention
  int sink_len = 0;              // kSinkFullAttention
  // Mamba specs.
  MambaCacheMode mamba_cache_mode = MambaCacheMode::kNone;
  int num_speculative_blocks = 0;
  // Any further attribute of the upstream spec the manager does not read (page_size_padded,
  // head_size_v, cache_dtype_str, ...), canonically serialised. It takes part in equality only,
  // as it does in upstream's dataclass equality.
  std::string other_fields;

  bool is_full_attention() const {
    return kind == KVCacheSpecKind::kFullAttention || kind == KVCacheSpecKind::kMLAAttention ||
           kind == KVCacheSpecKind::kSinkFullAttention;
  }
  // Dataclass equality: same class and every field equal.
  friend bool operator==(const KVCacheSpec&, const KVCacheSpec&) = default;
};

// The vLLM single-type manager class that serves a spec ("FullAttentionManager", ...).
std::string_view manager_name(KVCacheSpecKind kind);

struct KVCacheGroupSpec {
  std::vector<std::string> layer_names;
  KVCacheSpec kv_cache_spec;
};

struct KVCacheConfig {
  int num_blocks = 0;  // block 0 becomes the null block
  std::vector<KVCacheGroupSpec> kv_cache_groups;
};

}  // namespace kvtwin::model::vllm
