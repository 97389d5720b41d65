#include "model/vllm/kv_cache_interface.h"

namespace kvtwin::model::vllm {

std::optional<MambaCacheMode> mamba_cache_mode_from_name(std::string_view name) {
  if (name == "none") return MambaCacheMode::kNone;
  if (name == "align") return MambaCacheMode::kAlign;
  if (name == "all") return MambaCacheMode::kAll;
  return std::nullopt;
}

std::string_view manager_name(KVCacheSpecKind kind) {
  switch (kind) {
    case KVCacheSpecKind::kFullAttention:
    case KVCacheSpecKind::kMLAAttention:
      return "FullAttentionManager";
    case KVCacheSpecKind::kSlidingWindow:
      return "SlidingWindowManager";
    case KVCacheSpecKind::kChunkedLocalAttention:
      return "ChunkedLocalAttentionManager";
    case KVCacheSpecKind::kMamba:
      return "MambaManager";
    case KVCacheSpecKind::kCrossAttention:
      return "CrossAttentionManager";
    case KVCacheSpecKind::kSinkFullAttention:
      return "SinkFullAttentionManager";
  }
  return "?";
}

}  // namespace kvtwin::model::vllm
