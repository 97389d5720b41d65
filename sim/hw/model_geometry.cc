#include "sim/hw/model_geometry.h"

#include <algorithm>

#include "model/check.h"

namespace kvtwin::sim::hw {

double dtype_bytes(const std::string& dtype) {
  if (dtype == "float32") return 4;
  if (dtype == "fp8" || dtype == "fp8_e4m3" || dtype == "fp8_e5m2") return 1;
  if (dtype == "mxfp4") return 0.53125;
  return 2;  // bfloat16, float16
}

double ModelGeometry::weight_bytes_per_rank() const {
  double linear =
      attn_params_per_layer * (num_full_layers + num_sliding_layers) +
      mamba_params_per_layer * num_mamba_layers + dense_mlp_params * num_dense_mlp_layers +
      num_moe_layers * expert_params * num_shared_experts +
      encoder_params_per_layer * encoder_layers + cross_attn_params_per_layer * num_layers;
  double experts = num_moe_layers * expert_params * num_experts;
  double head = lm_head_params + embed_params + num_moe_layers * router_params;
  // vLLM's 16-bit copies of a quantized kv_b_proj (MLA models have F layers only).
  double copies =
      mla_kv_b_copied() ? mla_kv_b_params_per_layer * num_full_layers * activation_bytes : 0;
  return linear * linear_weight_bytes + experts * expert_weight_bytes + head * head_weight_bytes +
         copies;
}

ModelGeometry derive_geometry(const scenario::Scenario& s) {
  const scenario::ModelConfig& m = s.model;
  ModelGeometry g;
  g.tp = s.gpu.tensor_parallel;
  const double tp = g.tp;
  g.num_layers = m.num_layers;
  for (int i = 0; i < m.num_layers; ++i) {
    char c = m.layer_pattern[static_cast<size_t>(i) % m.layer_pattern.size()];
    LayerKind k = c == 'S' ? LayerKind::kSliding : c == 'M' ? LayerKind::kMamba : LayerKind::kFull;
    g.layers.push_back(k);
    (k == LayerKind::kFull      ? g.num_full_layers
     : k == LayerKind::kSliding ? g.num_sliding_layers
                                : g.num_mamba_layers) += 1;
  }
  g.mla = m.attention == "mla";
  g.mla_kv_lora_rank = g.mla ? m.kv_lora_rank : 0;
  g.mla_rope_dim = g.mla ? m.qk_rope_head_dim : 0;
  g.sliding_window = m.sliding_window;
  g.hidden_size = m.hidden_size;
  g.heads_per_rank = m.num_heads / g.tp;
  g.head_size = m.head_size;
  g.vocab_size = m.vocab_size;
  g.activation_bytes = m.dtype == "float32" ? 4 : 2;
  g.head_weight_bytes = g.activation_bytes;
  g.expert_weight_bytes = dtype_bytes(m.dtype);
  g.linear_weight_bytes = m.dtype == "mxfp4" ? g.activation_bytes : dtype_bytes(m.dtype);
  // vLLM's "auto" KV type is the model's dtype: bfloat16 for checkpoints with quantized weights.
  const bool quantized = m.dtype == "fp8" || m.dtype == "mxfp4";
  const std::string& kv_dtype = m.kv_cache_dtype != "auto" ? m.kv_cache_dtype
                                : quantized                ? std::string("bfloat16")
                                                           : m.dtype;
  g.kv_bytes = static_cast<int>(dtype_bytes(kv_dtype));

  // KV cache.
  const double hidden = m.hidden_size, H = m.num_heads, D = m.head_size;
  if (g.mla) {
    g.kv_bytes_per_token_per_layer =
        static_cast<int64_t>(m.kv_lora_rank + m.qk_rope_head_dim) * g.kv_bytes;
  } else {
    int kv_heads_per_rank = std::max(1, m.num_kv_heads / g.tp);
    g.kv_bytes_per_token_per_layer = int64_t{2} * kv_heads_per_rank * m.head_size * g.kv_bytes;
  }
  g.kv_bytes_per_token =
      g.kv_bytes_per_token_per_layer * (g.num_full_layers + g.num_sliding_layers);
  if (g.num_mamba_layers > 0) {
    int64_t d_inner = int64_t{m.mamba_num_heads} * m.mamba_head_dim;
    int64_t conv = int64_t{m.mamba_conv_kernel - 1} *
                   (d_inner + int64_t{2} * m.mamba_n_groups * m.mamba_state_size);
    int64_t ssm = d_inner * m.mamba_state_size;
    g.mamba_state_bytes_per_layer = (conv + ssm) * 2 / g.tp;  // states kept in 16-bit
    g.mamba_d_inner_per_rank = static_cast<int>(d_inner / g.tp);
    g.mamba_state_size = m.mamba_state_size;
    g.mamba_params_per_layer =
        (hidden *
             (2.0 * d_inner + 2.0 * m.mamba_n_groups * m.mamba_state_size + m.mamba_num_heads) +
         static_cast<double>(d_inner) * hidden) /
        tp;
  }
  if (m.encoder_layers > 0) {
    g.cross_kv_bytes_per_token =
        int64_t{2} * std::max(1, m.num_kv_heads / g.tp) * m.head_size * g.kv_bytes * m.num_layers;
    g.encoder_layers = m.encoder_layers;
    g.encoder_tokens = m.encoder_tokens;
  }

  // Parameters.
  if (g.mla) {
    double R = m.qk_rope_head_dim, C = m.kv_lora_rank, Q = m.q_lora_rank;
    // Replicated on every rank (DeepseekV2MLAAttention: the fused q_a / kv_a projection, or
    // kv_a alone, is not split); q_b (or q), kv_b and o are split by heads.
    double replicated = (Q > 0 ? hidden * Q : 0) + hidden * (C + R);
    double q = Q > 0 ? Q * H * (D + R) : hidden * H * (D + R);
    g.mla_kv_b_params_per_layer = C * H * 2 * D / tp;
    g.attn_params_per_layer = replicated + (q + H * D * hidden) / tp + g.mla_kv_b_params_per_layer;
  } else {
    const double kv_heads_per_rank = std::max(1, m.num_kv_heads / g.tp);
    g.attn_params_per_layer = 2 * hidden * H * D / tp + 2 * hidden * kv_heads_per_rank * D;
  }
  g.dense_mlp_params = 3.0 * hidden * m.intermediate_size / tp;
  g.num_experts = m.num_experts;
  g.experts_per_token = m.experts_per_token;
  g.num_shared_experts = m.num_shared_experts;
  if (m.num_experts > 0) {
    g.expert_params = 3.0 * hidden * m.moe_intermediate_size / tp;
    g.router_params = hidden * m.num_experts;
    g.num_dense_mlp_layers = std::min(m.first_dense_layers, m.num_layers);
    g.num_moe_layers = m.num_layers - g.num_dense_mlp_layers;
  } else {
    g.num_dense_mlp_layers = m.intermediate_size > 0 ? m.num_layers : 0;
  }
  g.lm_head_params = hidden * m.vocab_size / tp;
  g.embed_params = m.tie_word_embeddings ? 0 : g.lm_head_params;
  if (m.encoder_layers > 0) {
    g.encoder_params_per_layer = (4 * hidden * H * D) / tp + g.dense_mlp_params;
    g.cross_attn_params_per_layer = (4 * hidden * H * D) / tp;
  }
  KVTWIN_CHECK_LT(0, g.kv_bytes_per_token_per_layer);
  return g;
}

}  // namespace kvtwin::sim::hw
